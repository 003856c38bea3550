"""Resume is exact for every registered method that trains (#40): a tiny run stopped half-way and resumed with
``resume=auto`` ends with the same weights, registered buffers and optimiser state as the same run made in one go.

The method's recipe is the lifecycle test's (its ``EXAMPLE`` fact, ``test_method_lifecycle.example``), with its
``recipes/tiny/`` overlay. A step-counting overlay (``trainer.max_steps > 0``) runs 4 steps straight against
2 + 2; an epoch-counting one runs 2 epochs against 1 + 1. A fit that takes no optimiser step has nothing to resume
(skipped, saying so), and cond-dp, whose DP noise is calibrated to the planned steps, refuses an extension
(``extend_refused`` in its ``EXAMPLE``, tested by the lifecycle test). Slow: 3 tiny fits per method, 12 min for all at load 3.

``NOT_EXACT`` lists what this test found on its first run (2026-12-01), each a strict xfail until fixed (#40)."""
import logging

import pytest
import torch
from test_method_lifecycle import example
from test_resume_exact import _same

from zoo.cli import compose_and_validate, main
from zoo.core.registry import method_fact
from zoo.methods import METHODS

#: Resumes found not exact, with what differs (first run, 2026-12-01).
NOT_EXACT = {
    "fast": "the SAE's steps_since_fired buffer (dead-feature counter) is not the straight run's",
    "ltc": "the directions buffer is empty after the resume (the LTC pipeline runs at fit start only)",
    "saliency-bias": "weights differ by ~1e-4: the resumed fit does not replay the same randomness",
    "sf-consolidation": "extending by max_epochs ends at the first epoch's step (76, not 152)",
    "st-tgexplainer": "weights differ by ~1e-3: the resumed fit does not replay the same randomness",
    "watchlog": "the technique_* buffers fitted at the end of a fit are missing after the resume",
}


def _last(out) -> dict:
    (ckpt,) = out.glob("*/version_0/checkpoints/last.ckpt")
    return torch.load(ckpt, weights_only=True, map_location="cpu")


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=NOT_EXACT[n], strict=True))
                                  if n in NOT_EXACT else n for n in sorted(METHODS)])
def test_stopped_and_resumed_equals_straight(name, tmp_path, monkeypatch):
    if method_fact(name, "EXAMPLE").get("extend_refused"):
        pytest.skip("refuses to extend a run (its plan is fixed)")
    recipe_args = example(name)[0]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(logging.root, "handlers", list(logging.root.handlers))
    base = [*recipe_args, "export.formats=[]", "logger.kind=none"]
    by_steps = (compose_and_validate(base)["trainer"].get("max_steps") or -1) > 0
    plan = (["trainer.max_epochs=-1", "trainer.max_steps={}"] if by_steps else
            ["trainer.max_steps=-1", "trainer.max_epochs={}"])
    full, half = (4, 2) if by_steps else (2, 1)

    def train(out: str, n: int, *extra: str) -> int:
        return main(["train", *base, *(p.format(n) for p in plan), f"out_dir={tmp_path / out}", *extra])

    assert train("straight", full) == 0
    if _last(tmp_path / "straight")["global_step"] == 0:
        pytest.skip("its fit takes no optimiser step: nothing to resume")
    assert train("split", half) == 0
    assert train("split", full, "resume=auto") == 0
    straight, resumed = _last(tmp_path / "straight"), _last(tmp_path / "split")
    assert resumed["global_step"] == straight["global_step"], (resumed["global_step"], straight["global_step"])
    _same(straight["state_dict"], resumed["state_dict"], f"{name}: weights and buffers")
    _same(straight["optimizer_states"], resumed["optimizer_states"], f"{name}: optimizer state")
