"""`train.py recipe=shapo-zoo-lm.yaml` end to end with the tiny overlay; stage-A masks are saved and reload."""

import json
import math

import pytest
import torch

from zoo.cli import main
from zoo.core.registry import get_method


def test_train_shapo_tiny_and_reload_masks(tmp_path):
    assert (
        main(["train", "recipe=shapo-zoo-lm.yaml", "overlay=recipes/tiny/shapo-zoo-lm.yaml", f"out_dir={tmp_path}"])
        == 0
    )
    run = tmp_path / "shapo-zoo-lm-tiny" / "version_0"
    metrics = json.loads((run / "metrics.json").read_text())["metrics"]
    for key in ("val/accuracy", "val/margin", "val/kl_ref", "train/eps_norm"):
        assert key in metrics
    # values, not just keys: two warm-up steps (lr ramping to 5e-5) barely move the policy off its reference, so the held-out margins
    # are ~0, the DPO loss is ~ln 2 and the KL ~0; the ShaPO step's perturbation has norm rho = 0.05 exactly
    assert abs(metrics["val/margin"]) < 0.01 and metrics["val/loss"] == pytest.approx(math.log(2), abs=0.01)
    assert 0.0 <= metrics["val/kl_ref"] < 1e-3 and metrics["train/eps_norm"] == pytest.approx(0.05, rel=1e-4)
    assert metrics["val/accuracy"] in (0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0)  # 4 pairs, ties 0.5
    assert metrics["global_step"] == 2.0
    masks_file = run / "shapo_masks.safetensors"
    assert (run / "export" / "package" / "shapo_masks.safetensors").is_file()
    from safetensors.torch import load_file

    from zoo.core.hub import load_package

    _, state = load_package(str(run / "export" / "package"))
    saved = load_file(str(masks_file))["neuron_masks"].bool()
    assert torch.equal(state["neuron_masks"], saved) and int(saved.sum()) == int(0.01 * saved.numel())
    fresh = get_method("shapo").module_cls(arch="zoo-lm-tiny", masks_path=str(masks_file))
    fresh.load_masks(str(masks_file))
    assert torch.equal(fresh.neuron_masks, saved) and bool(fresh.masks_ready)
