"""A run whose stdout is not a terminal (a log file, a cluster job) prints timed progress lines and a closing
summary, and none of Lightning's steady noise (#14 item 6)."""

import logging
import os
import subprocess
import sys
from types import SimpleNamespace

from zoo.cli import main
from zoo.core.data import repo_root
from zoo.core.progress import ProgressBar, ProgressLines, _fmt_seconds


def test_piped_run_reports_progress_and_summary_without_noise(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(repo_root()))
    env.pop("HF_HUB_DISABLE_PROGRESS_BARS", None)
    out = subprocess.run(
        [
            sys.executable,
            "train.py",
            "recipe=zoo-lm.yaml",
            "overlay=tiny/zoo-lm.yaml",
            f"out_dir={tmp_path}",
            "export.formats=[hf]",
            "logger.progress_every_s=0",
        ],
        cwd=repo_root(),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-2000:]
    assert "training zoo-lm from step 0 (2 steps)" in text
    assert "step 2/2 (100%)" in text and "validation at step 2: val/loss" in text
    run_dir = tmp_path / "zoo-lm-tiny" / "version_0"
    assert f"run {run_dir}: step 2" in text and "metrics (metrics.json): " in text
    assert "checkpoints: best by val/loss" in text and f"exports: hf in {run_dir / 'export'}" in text
    for noise in ("LeafSpec", "Tip: For seamless", "returned `None`", "Writing model shards"):
        assert noise not in text, noise


def test_durations_read_naturally():
    assert [_fmt_seconds(s) for s in (4.4, 61, 3725)] == ["4s", "1m01s", "1h02m"]


def test_a_fit_without_optimiser_counts_batches_not_steps(caplog):
    # praxis and other enumerations: configure_optimizers returns None, global_step stays 0; "step 0/1 (0%)" misled
    from lightning.pytorch.core.optimizer import _MockOptimizer

    trainer = SimpleNamespace(
        optimizers=[_MockOptimizer()],
        global_step=0,
        estimated_stepping_batches=1,
        num_training_batches=1,
        current_epoch=0,
        max_epochs=1,
        is_global_zero=True,
        callback_metrics={},
    )
    lines = ProgressLines(every_s=0)
    with caplog.at_level(logging.INFO, logger="zoo"):
        lines.on_train_start(trainer, SimpleNamespace(method_name="praxis"))
        lines.on_train_batch_end(trainer, None, None, None, 0)
    assert "(no optimiser steps: 1 batch(es) per epoch)" in caplog.text and "batch 1/1 (100%)" in caplog.text
    assert "step 0/" not in caplog.text and "steps/s" not in caplog.text


def test_progress_bar_has_no_epoch_total_without_max_epochs():
    bar = ProgressBar()
    bar._trainer = SimpleNamespace(max_epochs=-1)
    assert bar._get_train_description(0).strip() == "Epoch 0"
    bar._trainer = SimpleNamespace(max_epochs=3)
    assert bar._get_train_description(0).strip() == "Epoch 0/2"


def test_zoo_eval_prints_no_lightning_tip(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(repo_root()), os.environ.get("PYTHONPATH", "")]))
    digits = [
        "recipe=tests/platform/recipes/digits.yaml",
        f"out_dir={tmp_path}",
        "trainer.max_steps=1",
        "logger.kind=none",
        "export.formats=[]",
    ]
    assert main(["train", *digits]) == 0
    out = subprocess.run(
        [sys.executable, "-c", "from zoo.cli import main; main(['eval', 'version_0'])"],
        cwd=tmp_path / "digits",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "val/acc" in out.stdout and "Tip:" not in out.stdout + out.stderr, out.stderr[-2000:]


def test_summary_counts_epochs_from_batches():
    from zoo.core.progress import _epochs

    def trainer(done, per_epoch):
        progress = SimpleNamespace(total=SimpleNamespace(completed=done))
        return SimpleNamespace(
            num_training_batches=per_epoch,
            fit_loop=SimpleNamespace(epoch_loop=SimpleNamespace(batch_progress=progress)),
        )

    assert _epochs(trainer(2, 10)) == ", 1 epoch (the last partial)"  # max_steps=2 of a 10-batch epoch
    assert _epochs(trainer(30, 10)) == ", 3 epochs"
    assert _epochs(trainer(31, 10)) == ", 4 epochs (the last partial)"
    assert _epochs(trainer(5, float("inf"))) == "" and _epochs(trainer(0, 10)) == ""  # unknown length, no fit
