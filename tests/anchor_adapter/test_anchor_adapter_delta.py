"""An adapter released over an adapter (anchor-adapter.random-grpo over anchor-adapter.math): the base layers under
both LoRA wrappers and the first adapter are taken from the base package; only the second adapter is stored."""

import torch

from zoo.core.delta import join, split_over_base


def test_lora_over_lora_stores_only_the_new_adapter():
    w, a, b, emb = torch.randn(4, 4), torch.randn(2, 4), torch.randn(4, 2), torch.randn(8, 4)
    base = {
        "lm.base_model.model.model.layers.0.mlp.up_proj.base_layer.weight": w,
        "lm.base_model.model.model.layers.0.mlp.up_proj.lora_A.midtrain.weight": a,
        "lm.base_model.model.model.layers.0.mlp.up_proj.lora_B.midtrain.weight": b,
        "lm.base_model.model.model.embed_tokens.weight": emb,
    }
    new_a = torch.randn(1, 4)
    own = {
        **{k: v.clone() for k, v in base.items()},
        "lm.base_model.model.model.layers.0.mlp.up_proj.lora_A.grpo.weight": new_a,
    }
    keys, stored = split_over_base(own, base)
    assert list(stored) == ["lm.base_model.model.model.layers.0.mlp.up_proj.lora_A.grpo.weight"]
    assert keys == {k: k for k in base}
    full = join({"base": "x", "base_sha256": "0", "keys": keys}, stored, "here", base)
    assert set(full) == set(own) and all(torch.equal(full[k], own[k]) for k in own)
