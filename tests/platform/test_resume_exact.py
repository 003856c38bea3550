"""Kill a real train.py with SIGKILL mid-epoch, resume=auto, and end bit-identical to the run that was never killed."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from zoo.cli import main

ROOT = Path(__file__).resolve().parents[2]
# 320 training images in batches of 32: 10 batches an epoch; 25 steps cross two epoch ends; dropout makes the RNG
# matter, shuffling the data order; validation every 5 batches sits between checkpoint and kill
COMMON = [
    "recipe=tests/platform/recipes/digits.yaml",
    "+data.limit=400",
    "data.batch_size=32",
    "+model.p_drop=0.3",
    "trainer.max_epochs=-1",
    "trainer.max_steps=25",
    "trainer.val_check_interval=5",
    "checkpoint.every_n_train_steps=4",
    "logger.kind=none",
    "export.formats=[]",
]


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "ZOO_RUN_DIR"}
    return dict(env, **extra)


def _state(run: Path) -> dict:
    return torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)


def _same(a, b, where=""):
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), f"{where} differs"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_auto_is_bit_identical(tmp_path):
    assert main(["train", *COMMON, f"out_dir={tmp_path / 'straight'}"]) == 0
    straight = _state(tmp_path / "straight" / "digits" / "version_0")

    killed = tmp_path / "killed"
    # step 14 is mid-epoch 1; the last step-checkpoint before it is step 12, so two trained steps are lost
    out = subprocess.run(
        [sys.executable, "train.py", *COMMON, f"out_dir={killed}"],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(ZOO_TEST_SIGKILL_AT_STEP="14"),
    )
    assert out.returncode == -9, out.stderr[-2000:]
    run = killed / "digits" / "version_0"
    assert _state(run)["global_step"] == 12, "last.ckpt is not the step-12 checkpoint"

    assert main(["train", *COMMON, f"out_dir={killed}", "resume=auto"]) == 0
    assert sorted(p.name for p in (killed / "digits").iterdir()) == ["version_0"]
    resumed = _state(run)
    assert resumed["global_step"] == straight["global_step"] == 25
    _same(straight["state_dict"], resumed["state_dict"], "weights")
    _same(straight["optimizer_states"], resumed["optimizer_states"], "optimizer state")
    assert straight["epoch"] == resumed["epoch"]
    _same(
        straight["loops"]["fit_loop"]["epoch_loop.batch_progress"],
        resumed["loops"]["fit_loop"]["epoch_loop.batch_progress"],
        "batch progress",
    )


def test_extending_a_finished_run_is_bit_identical(tmp_path):
    """A run that finished at max_steps mid-epoch, extended by raising max_steps, ends where one longer run ends (its
    end-of-fit checkpoint once held the cut epoch as finished, so the extension drew the next epoch's order)."""
    assert main(["train", *COMMON, f"out_dir={tmp_path / 'straight'}"]) == 0
    straight = _state(tmp_path / "straight" / "digits" / "version_0")
    assert main(["train", *COMMON, "trainer.max_steps=14", f"out_dir={tmp_path / 'ext'}"]) == 0
    assert main(["train", *COMMON, f"out_dir={tmp_path / 'ext'}", "resume=auto"]) == 0
    extended = _state(tmp_path / "ext" / "digits" / "version_0")
    assert extended["global_step"] == 25 and straight["epoch"] == extended["epoch"]
    _same(straight["state_dict"], extended["state_dict"], "weights")
    _same(straight["optimizer_states"], extended["optimizer_states"], "optimizer state")


def test_last_ckpt_is_written_atomically(tmp_path, monkeypatch):
    """A crash while the checkpoint is being written leaves the previous complete last.ckpt, not a torn file."""
    import lightning as L

    real = L.Trainer.save_checkpoint
    saved = []

    def crash_at_step_12(self, path, *a, **k):
        if self.global_step == 12:
            Path(path).write_bytes(b"torn")  # part of a file, then the process dies
            raise RuntimeError("killed while writing")
        real(self, path, *a, **k)
        saved.append(self.global_step)

    monkeypatch.setattr(L.Trainer, "save_checkpoint", crash_at_step_12)
    with pytest.raises(RuntimeError, match="killed while writing"):
        main(["train", *COMMON, f"out_dir={tmp_path}"])
    run = tmp_path / "digits" / "version_0"
    assert saved and saved[-1] < 12
    assert _state(run)["global_step"] == saved[-1]  # the previous complete file, still loadable


def test_resume_auto_uses_a_best_checkpoint_when_no_last_ckpt_was_written(tmp_path):
    """Killed before the first last.ckpt (step cadence not reached) but after a validation wrote a best-k file."""
    args = [
        "recipe=tests/platform/recipes/digits.yaml",
        "+data.limit=400",
        "data.batch_size=32",
        "trainer.max_epochs=-1",
        "trainer.val_check_interval=3",
        "checkpoint.every_n_train_steps=null",
        "logger.kind=none",
        "export.formats=[]",
        f"out_dir={tmp_path}",
    ]
    assert main(["train", *args, "trainer.max_steps=3"]) == 0
    run = tmp_path / "digits" / "version_0"
    (run / "checkpoints" / "last.ckpt").unlink()  # what a kill before the first last.ckpt leaves
    assert main(["train", *args, "trainer.max_steps=5", "resume=auto"]) == 0
    assert sorted(p.name for p in (tmp_path / "digits").iterdir()) == ["version_0"]
    assert _state(run)["global_step"] == 5


def test_resume_from_an_epoch_end_checkpoint_is_bit_identical(tmp_path):
    """With no step checkpoint between, the kill at step 14 resumes from the checkpoint written at the end of epoch 0
    (step 10); Lightning then hands the sampler the finished epoch's number, and the next epoch used to replay its
    order (weights off by 0.08): the sampler takes the trainer's epoch instead."""
    args = [*COMMON, "checkpoint.every_n_train_steps=50", "trainer.max_steps=16"]
    assert main(["train", *args, f"out_dir={tmp_path / 'straight'}"]) == 0
    straight = _state(tmp_path / "straight" / "digits" / "version_0")
    killed = tmp_path / "killed"
    out = subprocess.run(
        [sys.executable, "train.py", *args, f"out_dir={killed}"],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(ZOO_TEST_SIGKILL_AT_STEP="14"),
    )
    assert out.returncode == -9, out.stderr[-2000:]
    assert _state(killed / "digits" / "version_0")["global_step"] == 10
    assert main(["train", *args, f"out_dir={killed}", "resume=auto"]) == 0
    resumed = _state(killed / "digits" / "version_0")
    assert resumed["global_step"] == straight["global_step"] == 16
    _same(straight["state_dict"], resumed["state_dict"], "weights")
    _same(straight["optimizer_states"], resumed["optimizer_states"], "optimizer state")
