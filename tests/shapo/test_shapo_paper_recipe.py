"""The paper recipe (recipes/paper/shapo-llama3.2-3b.yaml: DrShaPO, gamma perturbation, full fine-tuning, bf16-mixed,
gradient checkpointing, accumulation 2) runs 2 optimiser steps on CPU with ``model.arch=smollm2-135m-instruct``, a
real Llama-family chat base in place of the 3B directory, so the 3B recipe's code path is exercised end to end
(stage A, a DPO step, a ShaPO step, the bf16 reference copy, validation with generation). Only the scale keys
change: device, strategy, lengths, counts."""

from __future__ import annotations

import json

import pytest

from zoo.cli import main

SMOL = "smollm2-135m-instruct"


@pytest.mark.slow  # the real SmolLM2-135M-Instruct, fully fine-tuned: ~2 minutes on one thread
def test_paper_recipe_runs_two_steps_on_smollm2_on_cpu(tmp_path):
    from zoo.core.bases import base_path

    if base_path(SMOL) is None:
        pytest.skip(f"{SMOL} is not fetched (zoo base fetch {SMOL})")
    assert (
        main(
            [
                "train",
                "recipe=paper/shapo-llama3.2-3b.yaml",
                f"model.arch={SMOL}",
                "trainer.accelerator=cpu",
                "trainer.devices=1",
                "trainer.strategy=auto",
                "trainer.max_steps=2",
                "trainer.limit_val_batches=1",
                "model.shapo_every=2",
                "model.probe_pairs=8",
                "model.max_new_tokens=4",
                "model.gen_batch_size=4",
                "data.batch_size=2",
                "data.eval_batch_size=2",
                "data.max_length=64",
                "data.max_prompt_length=32",
                "data.max_train_pairs=16",
                "data.max_eval_pairs=2",
                "data.heldout_prompts=2",
                "data.redteam_path=null",
                "logger.kind=none",
                "export.formats=[]",
                f"out_dir={tmp_path}",
            ]
        )
        == 0
    )
    run = next(tmp_path.glob("*/version_0"))
    metrics = json.loads((run / "metrics.json").read_text())["metrics"]
    cfg = (run / "config.yaml").read_text()
    assert "precision: bf16-mixed" in cfg and "aggregation: drdpo" in cfg and "perturbation: gamma" in cfg
    # two optimiser steps of two accumulated micro-batches each, the second a ShaPO step (its eps is gamma * |g|)
    assert metrics["global_step"] == 2.0 and metrics["train/eps_norm"] > 0
    assert 0.0 <= metrics["val/accuracy"] <= 1.0 and metrics["val/kl_ref"] >= 0
    assert (run / "shapo_masks.safetensors").is_file()
