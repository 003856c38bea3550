"""Resume is exact for every registered method that trains (#40): a tiny run killed half-way and resumed with
``resume=auto`` ends with the same weights, registered buffers and optimiser state as the same run made in one go.

The method's recipe is the lifecycle test's (its ``EXAMPLE`` fact, ``test_method_lifecycle.example``), with its
``recipes/tiny/`` overlay. A step-counting overlay (``trainer.max_steps > 0``) runs 4 steps, killed after
the checkpoint of step 2 (``checkpoint.every_n_train_steps=2``); an epoch-counting one runs 2 epochs, killed when the
second starts (after the first epoch's checkpoint). Both runs have the same plan (a schedule over the planned steps,
such as FAST's warm-up and decay fractions, is the same in both: extending a run changes the plan and is the
lifecycle test's concern). The kill is an exception raised in the process at that point, as a crash would end it. A
fit that takes no optimiser step has nothing to resume (skipped, saying so). Slow: 3 tiny fits per method, about
12 min for all at load 3. The first run of this test (2026-12-01, then as 2 + 2 extensions) found six methods not
exact; their causes are in the commit that fixed them."""

import logging

import lightning as L
import pytest
import torch
from test_method_lifecycle import example
from test_resume_exact import _same

from zoo.cli import compose_and_validate, main
from zoo.core import training
from zoo.methods import METHODS


class Killed(Exception):
    """The stand-in for SIGKILL: raised where the process dies."""


class KillAt(L.Callback):
    """Raise :class:`Killed` at the first batch of epoch ``epoch`` or the batch after optimiser step ``step``: after
    every hook of the step (or epoch) before it, as a kill would land while the next one starts."""

    def __init__(self, step: int | None = None, epoch: int | None = None):
        self.step, self.epoch = step, epoch

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if trainer.current_epoch == self.epoch:
            raise Killed(f"epoch {self.epoch}")

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            raise Killed(f"step {self.step}")


def _last(out) -> dict:
    (ckpt,) = out.glob("*/version_0/checkpoints/last.ckpt")
    return torch.load(ckpt, weights_only=True, map_location="cpu")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(METHODS))
def test_killed_and_resumed_equals_straight(name, tmp_path, monkeypatch):
    recipe_args = example(name)[0]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(logging.root, "handlers", list(logging.root.handlers))
    base = [*recipe_args, "export.formats=[]", "logger.kind=none"]
    by_steps = (compose_and_validate(base)["trainer"].get("max_steps") or -1) > 0
    plan = (
        ["trainer.max_epochs=-1", "trainer.max_steps=4", "checkpoint.every_n_train_steps=2"]
        if by_steps
        else ["trainer.max_steps=-1", "trainer.max_epochs=2"]
    )
    kill = KillAt(step=2) if by_steps else KillAt(epoch=1)

    def train(out: str, *extra: str) -> int:
        return main(["train", *base, *plan, f"out_dir={tmp_path / out}", *extra])

    assert train("straight") == 0
    if _last(tmp_path / "straight")["global_step"] == 0:
        pytest.skip("its fit takes no optimiser step: nothing to resume")
    with monkeypatch.context() as m:
        trainer_of = training.build_trainer
        m.setattr(
            training,
            "build_trainer",
            lambda cfg, run_dir, callbacks=(), resume_step=None: trainer_of(
                cfg, run_dir, [*callbacks, kill], resume_step
            ),
        )
        with pytest.raises(Killed):
            train("split")
    assert train("split", "resume=auto") == 0
    straight, resumed = _last(tmp_path / "straight"), _last(tmp_path / "split")
    assert resumed["global_step"] == straight["global_step"], (resumed["global_step"], straight["global_step"])
    _same(straight["state_dict"], resumed["state_dict"], f"{name}: weights and buffers")
    _same(straight["optimizer_states"], resumed["optimizer_states"], f"{name}: optimizer state")
