"""Every released zoo weight still reaches the metrics its manifest entry records (issue 11; slow: ~minutes per id).

For each id in checkpoints/manifest.yaml, ``zoo eval ID`` (``load_module`` + ``evaluate``, the same call) is rerun
and every validation/test metric the manifest records and the evaluation produces is compared. Training-time keys
(``train/*``, ``global_step``) are not re-measurable and are skipped.

    python -m pytest -m slow tests/platform/test_released_weights.py
"""

import math

import pytest
import yaml

from zoo.core.data import repo_root

MANIFEST = yaml.safe_load((repo_root() / "checkpoints" / "manifest.yaml").read_text())["weights"]
#: evaluation is deterministic (fixed data, seeded sampling); the slack only absorbs float summation order
TOL = {"rel": 1e-3, "abs": 1e-3}


def comparable(recorded: dict, measured: dict) -> dict[str, tuple[float, float]]:
    """``{key: (recorded, measured)}`` for the evaluation metrics both hold (NaN-free)."""
    return {
        k: (float(v), float(measured[k]))
        for k, v in recorded.items()
        if k in measured
        and not k.startswith("train/")
        and k != "global_step"
        and not (math.isnan(float(v)) and math.isnan(float(measured[k])))
    }


def test_comparable_skips_training_keys():
    got = comparable(
        {"train/loss": 1.0, "val/f1": 0.5, "global_step": 3, "val/x": 2.0}, {"val/f1": 0.5, "train/loss": 2}
    )
    assert got == {"val/f1": (0.5, 0.5)}


#: an evaluation over a pretrained base (manifest ``base:``; SmolLM2, Gemma) generates and judges with a 135M+
#: parameter model on one thread: shapo.smollm2-hh took 687 s at load ~2, over the default 600 s per-test timeout
BASE_EVAL_TIMEOUT_S = 1800


def _weight(zoo_id: str):
    marks = [pytest.mark.timeout(BASE_EVAL_TIMEOUT_S)] if MANIFEST[zoo_id].get("base") else []
    return pytest.param(zoo_id, marks=marks)


@pytest.mark.slow
@pytest.mark.parametrize("zoo_id", [_weight(i) for i in sorted(MANIFEST)])
def test_zoo_eval_reproduces_the_manifest_metrics(zoo_id):
    from zoo.core.evaluation import evaluate
    from zoo.core.loading import load_module

    module, cfg = load_module(zoo_id)
    pairs = comparable(MANIFEST[zoo_id].get("metrics") or {}, evaluate(module, cfg))
    assert pairs, f"{zoo_id}: zoo eval produced none of the manifest's evaluation metrics"
    off = {k: (r, m) for k, (r, m) in pairs.items() if m != pytest.approx(r, **TOL)}
    assert not off, f"{zoo_id}: manifest vs zoo eval differ: " + ", ".join(
        f"{k} {r:.6g} -> {m:.6g}" for k, (r, m) in off.items()
    )
