"""ShaPO, DPO and the cost model on a pretrained chat base (``model.arch=smollm2-135m-instruct``) with LoRA.

Default CI never touches the real base: the tiny stand-in of tests/platform/stand_in_base.py (a 2-block random Llama
with SmolLM2's special tokens, BOS ``<|im_start|>``, EOS ``<|im_end|>`` and a ChatML template) is fetched through
the real pipeline and answers to the base id. Checked here: the pairs are encoded with the base's own template and
EOS; the cost model trains only its adapters and head and packages only those (a delta over the base); the
ShaPO/DPO reference is the policy with its adapters disabled (no copy), and the before -> after line is printed.
"""

from __future__ import annotations

import json
import logging

import pytest
import torch
from stand_in_base import SMOL  # tests/platform/

from zoo.cli import main

pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def cost_run(stand_in_base, tmp_path_factory):
    """A 2-step LoRA cost model over the base (the judge of the ShaPO tests)."""
    out = tmp_path_factory.mktemp("cost")
    assert (
        main(
            [
                "train",
                "recipe=shapo-cost-model-smollm2.yaml",
                "overlay=tiny/shapo-cost-model-smollm2.yaml",
                f"model.arch={SMOL}",
                f"out_dir={out}",
            ]
        )
        == 0
    )
    return next(out.glob("*/version_0"))


def test_pairs_use_the_base_template_bos_and_eos(stand_in_base):
    from zoo.data.preference import PreferenceDataModule, encode_pair
    from zoo.models.causal_lm import load_tokenizer, tokenizer_for

    tok = load_tokenizer(tokenizer_for(SMOL, None))
    enc = encode_pair(tok, "\n\nHuman: hi <|im_end|>\n\nAssistant:", "no", "yes", 64, 32)
    assert tok.decode(enc["prompt"]) == "<|im_start|>user\nhi <|im_end|><|im_end|>\n<|im_start|>assistant\n"
    assert enc["prompt"][0] == tok.bos_token_id and enc["prompt"].count(tok.eos_token_id) == 1  # user text: no control
    assert enc["chosen"][-1] == enc["rejected"][-1] == tok.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    assert PreferenceDataModule.encode_reply(tok, "hi", "no")[-1] == tok.eos_token_id


def test_cost_model_lora_over_the_base_trains_and_packages_only_adapters_and_head(stand_in_base, cost_run):
    from safetensors.torch import load_file

    import zoo
    from zoo.core.delta import read_base
    from zoo.core.loading import load_module

    module, cfg = load_module(str(cost_run))
    assert cfg["model"]["arch"] == SMOL and module.uses_lora and module.tokenizer.bos_token == "<|im_start|>"
    trainable = {n for n, p in module.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n or n.startswith("head.") for n in trainable)
    assert module.head.weight.abs().sum() > 0  # two steps moved the zero-initialised head
    package = cost_run / "export" / "package"
    stored = load_file(str(package / "model.safetensors"))
    assert stored and all("lora_" in k or k.startswith("head.") for k in stored), sorted(stored)[:5]
    assert read_base(package)["base"] == SMOL
    ids = torch.tensor([[1, 40, 41, 2]])
    again = zoo.load(str(package))
    with torch.no_grad():
        assert torch.equal(again.score(ids, torch.ones_like(ids)), module.score(ids, torch.ones_like(ids)))


@pytest.mark.parametrize("recipe", ["shapo.yaml", "shapo-dpo-smollm2.yaml"])
def test_shapo_and_dpo_over_the_base_reference_is_the_adapter_disabled_policy(
    recipe, stand_in_base, cost_run, tmp_path, caplog
):
    from zoo.core.loading import load_module

    with caplog.at_level(logging.INFO, logger="zoo"):
        assert (
            main(
                [
                    "train",
                    f"recipe={recipe}",
                    f"overlay=tiny/{recipe}",
                    f"model.arch={SMOL}",
                    f"model.cost_model={cost_run}",
                    f"out_dir={tmp_path}",
                ]
            )
            == 0
        )
    run = next(tmp_path.glob("*/version_0"))
    metrics = json.loads((run / "metrics.json").read_text())["metrics"]
    for key in (
        "val/accuracy",
        "val/logp_accuracy",
        "val/logp_accuracy_ref",
        "val/harmful_rate",
        "val/harmful_rate_ref",
        "val/refusal_rate",
        "val/refusal_rate_ref",
        "val/kl_ref",
    ):
        assert key in metrics, key
    assert ("train/eps_norm" in metrics) == (recipe == "shapo.yaml")
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("ShaPO before (reference)"))
    assert f"{metrics['val/harmful_rate_ref']:.3f} -> {metrics['val/harmful_rate']:.3f}" in line
    module, cfg = load_module(str(run))
    assert cfg["model"]["arch"] == SMOL and module.uses_lora
    module.setup("validate")
    assert "reference" not in module._frozen  # no copy: the reference is the policy with its adapters off
    with torch.no_grad():
        for n, p in module.policy.named_parameters():
            if "lora_B" in n:
                p.add_(0.1)  # adapters that change the policy, so a copied reference would differ from the base
        ids = torch.tensor([[1, 40, 41, 42, 2]])
        with module.policy.disable_adapter():
            base_logits = module.policy(input_ids=ids).logits
        from zoo.models.causal_lm import build_causal_lm

        plain = build_causal_lm(SMOL, dtype=torch.float32)(input_ids=ids).logits
        assert torch.equal(module._reference_logits(ids, torch.ones_like(ids)), base_logits)
        assert torch.allclose(base_logits, plain, atol=1e-6)
        assert not torch.allclose(module(ids), plain, atol=1e-3)
