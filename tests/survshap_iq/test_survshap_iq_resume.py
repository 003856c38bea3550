"""survshap-iq killed with SIGKILL and resumed with ``resume=auto`` ends with the checkpoint of a run never killed:
weights, optimiser state and every buffer (the Breslow baseline ``bh_times`` / ``bh_cumhaz`` and the data-fitted
standardisation, background and time grid). Killed during a validation, the resumed run never repeats that
validation, which used to leave the baseline of the validation before it in the final checkpoint (``bh_cumhaz`` off
by 0.012 with equal weights); resumed from an epoch-end checkpoint, Lightning used to hand the sampler the finished
epoch's number and the next epoch replayed its order."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from zoo.cli import main

ROOT = Path(__file__).resolve().parents[2]
# GBSG2's 446 training rows in batches of 128: 4 batches an epoch (the last one partial); validation every 2 batches
COMMON = [
    "recipe=survshap-iq.yaml",
    "overlay=tiny/survshap-iq.yaml",
    "trainer.max_epochs=-1",
    "data.batch_size=128",
    "model.explain.n_points=0",
    "export.formats=[]",
    "logger.kind=none",
]
# train.py with a callback that SIGKILLs the process when the hook argv[1] starts at optimiser step argv[2]
KILL = (
    "import os, signal, sys\n"
    "import lightning as L\n"
    "from zoo.cli import compose_and_validate\n"
    "from zoo.core.training import train\n"
    "def kill(self, trainer, *args):\n"
    "    if trainer.global_step == int(sys.argv[2]):\n"
    "        os.kill(os.getpid(), signal.SIGKILL)\n"
    "train(compose_and_validate(sys.argv[3:]), callbacks=[type('Kill', (L.Callback,), {sys.argv[1]: kill})()])\n"
)


def _last(out: Path) -> dict:
    return torch.load(out / "survshap-iq-tiny" / "version_0" / "checkpoints" / "last.ckpt", weights_only=True)


# (hook the kill happens in, at step, max_steps, checkpoint.every_n_train_steps, step of the checkpoint resumed from)
CASES = {
    "killed-in-validation": ("on_validation_start", 8, 9, 4, 8),
    "epoch-end-checkpoint": pytest.param(("on_train_batch_start", 6, 11, 50, 4), marks=pytest.mark.slow),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_sigkill_then_resume_matches_the_uninterrupted_run(tmp_path, case):
    hook, kill, max_steps, every, resumed_from = case
    args = [*COMMON, f"trainer.max_steps={max_steps}", f"checkpoint.every_n_train_steps={every}"]
    assert main(["train", *args, f"out_dir={tmp_path / 'straight'}"]) == 0
    env = {k: v for k, v in os.environ.items() if k != "ZOO_RUN_DIR"}
    out = subprocess.run(
        [sys.executable, "-c", KILL, hook, str(kill), *args, f"out_dir={tmp_path / 'killed'}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == -9, out.stderr[-2000:]
    assert _last(tmp_path / "killed")["global_step"] == resumed_from
    assert main(["train", *args, f"out_dir={tmp_path / 'killed'}", "resume=auto"]) == 0
    straight, resumed = _last(tmp_path / "straight"), _last(tmp_path / "killed")
    assert straight["global_step"] == resumed["global_step"] == max_steps
    assert straight["state_dict"].keys() == resumed["state_dict"].keys()
    assert {"bh_times", "bh_cumhaz", "x_mean", "background", "explain_times"} <= set(straight["state_dict"])
    for key, value in straight["state_dict"].items():
        assert torch.equal(value, resumed["state_dict"][key]), f"{key} differs"
    (before,), (after,) = straight["optimizer_states"], resumed["optimizer_states"]
    assert before["state"].keys() == after["state"].keys()
    for a, b in zip(before["state"].values(), after["state"].values()):
        assert all(torch.equal(a[k], b[k]) for k in a), "optimiser state differs"
