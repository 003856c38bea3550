"""zoo-lm module: the loss against a hand computation, tied weights in packages, HF export round trip."""

import math

import pytest
import torch
from safetensors.torch import load_file, save_file

import zoo
from zoo.methods.zoo_lm.losses import causal_lm_nll
from zoo.models.causal_lm import ARCHS, build_causal_lm, tied_aliases
from zoo.models.lm_state import load_lm_state, strip_prefix


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return zoo.create("zoo-lm", arch="zoo-lm-tiny").eval()


def test_nll_matches_a_hand_computation():
    # vocabulary of 3, one sequence of 3 tokens; position 0's logits predict token 1, position 1's predict token 2
    logits = torch.tensor([[[0.0, math.log(3.0), 0.0], [math.log(2.0), 0.0, 0.0], [5.0, 5.0, 5.0]]])
    labels = torch.tensor([[2, 1, 0]])
    nll, n = causal_lm_nll(logits, labels)
    assert n.item() == 2
    # p(1 | pos 0) = 3/5, p(0 | pos 1) = 2/4
    assert nll.item() == pytest.approx(-math.log(3 / 5) - math.log(2 / 4), abs=1e-6)
    nll_masked, n_masked = causal_lm_nll(logits, torch.tensor([[2, -100, 0]]))
    assert n_masked.item() == 1 and nll_masked.item() == pytest.approx(-math.log(2 / 4), abs=1e-6)


def test_nll_neither_copies_the_logits_nor_scatters_their_gradient():
    # shifting the logits (logits[:, :-1]) would clone the whole [B, T - 1, V] tensor forward and fill + copy another
    # backward: ~10 % of a SmolLM2 LoRA step on a CPU (benchmarks/zoo_lm.py)
    from torch.utils._python_dispatch import TorchDispatchMode

    class LargeOps(TorchDispatchMode):
        def __init__(self, n):
            super().__init__()
            self.n, self.ops = n, []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor) and out.numel() >= self.n:
                self.ops.append(func.overloadpacket.__name__)
            return out

    logits = torch.randn(2, 6, 50, requires_grad=True)
    with LargeOps(2 * 5 * 50) as mode:
        nll, _ = causal_lm_nll(logits, torch.randint(0, 50, (2, 6)))
        nll.backward()
    assert "_log_softmax" in mode.ops  # the mode sees the loss's ops
    assert not {"clone", "copy_", "_to_copy", "slice_backward", "slice_scatter"} & set(mode.ops), mode.ops


def test_nll_matches_transformers_loss(tiny):
    ids = torch.randint(6, 8192, (2, 12))
    labels = ids.clone()
    labels[0, :5] = -100
    nll, n = causal_lm_nll(tiny(ids), labels)
    ref = tiny.lm(input_ids=ids, labels=labels).loss
    assert (nll / n).item() == pytest.approx(ref.item(), rel=1e-5)


def test_presets_are_llama_with_swiglu_and_expected_sizes():
    small = build_causal_lm("zoo-lm-small")
    assert type(small).__name__ == "LlamaForCausalLM"
    mlp = small.model.layers[0].mlp
    assert (mlp.gate_proj.out_features, mlp.up_proj.out_features, mlp.down_proj.in_features) == (688, 688, 688)
    n = sum(p.numel() for p in small.parameters())
    assert n == 5_261_568 and n * 4 < 25 * 2**20
    assert ARCHS["zoo-lm-tiny"]["num_hidden_layers"] == 2
    with pytest.raises(ValueError, match="neither a preset"):
        build_causal_lm("zoo-lm-huge")


def test_package_state_stores_tied_weights_once(tiny, tmp_path):
    assert tied_aliases(tiny.lm, "lm.") == {"lm.lm_head.weight": "lm.model.embed_tokens.weight"}
    state = tiny.state_dict()
    assert "lm.lm_head.weight" not in state and all(k.startswith("lm.") for k in state)
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "m.safetensors"))  # no shared tensors
    other = zoo.create("zoo-lm", arch="zoo-lm-tiny")
    other.load_state_dict(load_file(str(tmp_path / "m.safetensors")), strict=True)
    assert other.lm.lm_head.weight is other.lm.model.embed_tokens.weight
    ids = torch.randint(6, 8192, (1, 9))
    assert torch.equal(other.eval()(ids), tiny(ids))
    bare = build_causal_lm("zoo-lm-tiny")
    load_lm_state(bare, strip_prefix(state, "lm."))
    assert torch.equal(bare.eval()(ids).logits, tiny(ids))
    with pytest.raises(KeyError, match="no state-dict key starts with"):
        strip_prefix({"head.w": ids}, "lm.")


def test_hf_export_loads_with_plain_transformers(tiny, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tiny.export_hf(str(tmp_path / "hf"))
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    tok = AutoTokenizer.from_pretrained(tmp_path / "hf")
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "How do I bake bread?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )["input_ids"]
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, tiny(ids), atol=1e-6)
    assert tok.decode(ids[0]) == "<s><|user|>\nHow do I bake bread?</s><|assistant|>\n"
    assert model.generation_config.eos_token_id == tok.eos_token_id == 2


def test_init_from_an_hf_directory(tiny, tmp_path):
    from zoo.core import hub

    tiny.export_hf(str(tmp_path / "hf"))
    fresh = zoo.create("zoo-lm", arch="zoo-lm-tiny").eval()
    state, source = hub.load_weights(str(tmp_path / "hf"))
    assert source == "hf" and "model.embed_tokens.weight" in state
    hub.adapt_and_load(fresh, state, source)
    ids = torch.randint(6, 8192, (1, 7))
    assert torch.equal(fresh(ids), tiny(ids))


def test_generate_is_seeded_and_stops(tiny):
    a = tiny.generate(["How do I bake bread?"], max_new_tokens=8)
    assert a == tiny.generate(["How do I bake bread?"], max_new_tokens=8) and isinstance(a[0], str)
    assert tiny.prompt_ids("Hi")[-2:] == tiny.tokenizer.convert_tokens_to_ids(["<|assistant|>", "Ċ"])
    with pytest.raises(ValueError, match="give a prompt"):
        tiny.predict_cli([])


def test_bad_arguments():
    with pytest.raises(ValueError, match="prompt_format"):
        zoo.create("zoo-lm", arch="zoo-lm-tiny", prompt_format="poem")
