"""Stage A ranking and stage C perturbation on small models with known answers."""

import pytest
import torch
from shapo_oracles import masked_grads  # tests/shapo/shapo_oracles.py (pytest puts this folder on sys.path)
from torch import nn

from zoo.methods.shapo.subspace import DownProjection, MaskedPerturbation, down_projections, rank_neurons


def _fake_projections():
    # nn.Linear layout (d=3, d_ff=4): column j is neuron j's value vector; cosines with v = e0 written below
    w0 = torch.tensor([[1.0, -1.0, 0.0, 1.0], [0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])  # 1, -1, 0, .707
    w1 = torch.tensor([[-1.0, 0.0, 2.0, -3.0], [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])  # -.707, 0, 1, -1
    return [DownProjection(0, "l0", nn.Parameter(w0), 1), DownProjection(1, "l1", nn.Parameter(w1), 1)]


def test_rank_neurons_signs():
    proj, v = _fake_projections(), torch.tensor([2.0, 0.0, 0.0])
    neg = rank_neurons(proj, v, 25.0, "negative")  # k = 8 * 25% = 2: the two cosines of -1
    assert neg.nonzero().tolist() == [[0, 1], [1, 3]]
    pos = rank_neurons(proj, v, 25.0, "positive")
    assert pos.nonzero().tolist() == [[0, 0], [1, 2]]
    both = rank_neurons(proj, v, 50.0, "abs")
    assert both.nonzero().tolist() == [[0, 0], [0, 1], [1, 2], [1, 3]]
    with pytest.raises(ValueError):
        rank_neurons(proj, v, 5.0, "negative")  # selects none
    with pytest.raises(ValueError):
        rank_neurons(proj, v, 25.0, "sideways")


def _tiny_llama():
    from zoo.models.causal_lm import build_causal_lm

    torch.manual_seed(0)
    return build_causal_lm("zoo-lm-tiny")


def test_down_projections_llama_and_gpt2_axis():
    llama = _tiny_llama()
    projs = down_projections(llama)
    assert [p.layer for p in projs] == [0, 1] and all(p.neuron_axis == 1 for p in projs)
    assert projs[0].value_vectors().shape == (176, 64)
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=2, n_inner=80, vocab_size=50, n_positions=16))
    g = down_projections(gpt2)
    # Conv1D stores (d_ff, d): neurons are rows (the authors' code masks the other axis)
    assert g[0].name.endswith("mlp.c_proj") and g[0].neuron_axis == 0 and g[0].value_vectors().shape == (80, 32)


def test_down_projections_under_lora_uses_base_weight():
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(_tiny_llama(), LoraConfig(r=2, target_modules=["down_proj"]))
    projs = down_projections(model)
    assert len(projs) == 2 and projs[0].weight.shape == (64, 176) and not projs[0].weight.requires_grad


@pytest.mark.parametrize("mode", ["gamma", "rho"])
def test_perturbation_touches_only_selected_columns_and_restores_bit_exactly(mode):
    model = _tiny_llama()
    projs = down_projections(model)
    masks = torch.zeros(2, 176, dtype=torch.bool)
    masks[0, [3, 50]] = True
    masks[1, [7]] = True
    before = {k: v.clone() for k, v in model.state_dict().items()}
    grads = [torch.randn_like(p.weight) for p in projs]
    pert = MaskedPerturbation(projs, masks)
    size = pert.apply_masked(masked_grads(pert, grads), mode, gamma=0.5, rho=0.05)
    after = model.state_dict()
    for k, v in after.items():
        if k.endswith("mlp.down_proj.weight"):
            layer = int(k.split(".")[2])
            changed = (v != before[k]).any(0)  # per column
            assert torch.equal(changed, masks[layer]), k
        else:
            assert torch.equal(v, before[k]), k
    sel = [g[:, m] for g, m in zip(grads, masks)]
    if mode == "rho":
        assert size == pytest.approx(0.05, rel=1e-5)
    else:
        assert size == pytest.approx(0.5 * torch.sqrt(sum((s**2).sum() for s in sel)).item(), rel=1e-5)
    pert.restore()
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k  # bit-exact
    with pytest.raises(RuntimeError):
        pert.restore()
