"""Stage C's masked ascent gradient from activations equals autograd's dL/dW on the selected neurons."""

import pytest
import torch
from shapo_oracles import masked_grads  # tests/shapo/shapo_oracles.py (pytest puts this folder on sys.path)

from zoo.methods.shapo.ascent import MaskedGradient
from zoo.methods.shapo.subspace import MaskedPerturbation, down_projections
from zoo.models.causal_lm import enable_checkpointing


def _llama():
    from zoo.models.causal_lm import build_causal_lm

    torch.manual_seed(0)
    return build_causal_lm("zoo-lm-tiny")


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(
        GPT2Config(
            n_embd=32,
            n_layer=2,
            n_head=2,
            n_inner=80,
            vocab_size=50,
            n_positions=16,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        )
    )


def _lora(model, targets=("q_proj", "v_proj"), checkpointing=False):
    from peft import LoraConfig, get_peft_model

    if checkpointing:
        enable_checkpointing(model, use_reentrant=False)
        model.train()
    model = get_peft_model(model, LoraConfig(r=2, target_modules=list(targets)))
    if "down_proj" in targets:  # random adapters: lora_B starts at zero, which would hide a wrong base-layer hook
        with torch.no_grad():
            for n, p in model.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.1)
    return model


# LoRA on down_proj only: the hook sits on each down_proj's base_layer, and nothing upstream of it trains, so its
# output is made a leaf (ascent.MaskedGradient._hook); with non-reentrant checkpointing the recompute is ignored
BUILDS = {
    "llama": _llama,
    "gpt2-conv1d": _gpt2,
    "lora": lambda: _lora(_llama()),
    "lora-down_proj": lambda: _lora(_llama(), ["down_proj"]),
    "lora-down_proj-checkpointing": lambda: _lora(_llama(), ["down_proj"], checkpointing=True),
}


@pytest.mark.parametrize("name", list(BUILDS))
def test_masked_gradient_equals_weight_gradient_columns(name):
    model = BUILDS[name]()
    projs = down_projections(model)
    d_ff = projs[0].weight.shape[projs[0].neuron_axis]
    masks = torch.zeros(len(projs), d_ff, dtype=torch.bool)
    masks[0, [1, 7, d_ff - 1]] = True
    masks[1, 10:14] = True
    pert = MaskedPerturbation(projs, masks)
    ids = torch.randint(3, 50, (3, 9))

    def loss_fn():
        logits = model(input_ids=ids).logits
        return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))

    with MaskedGradient(model, projs, pert.index) as mg:
        got = mg.grads(loss_fn())
    weights = [p.weight for p in projs]
    for w in weights:  # the autograd answer (frozen LoRA base weights switched on for it)
        w.requires_grad_(True)
    want = masked_grads(pert, list(torch.autograd.grad(loss_fn(), weights)))
    for g, w, p in zip(got, want, projs):
        assert g.shape == w.shape and torch.allclose(g, w, atol=1e-6, rtol=1e-4), p.name
        assert w.abs().sum() > 0
