"""Runs end to end: train.py in a subprocess, DDP on CPU, resume at the exact step, run directory layout."""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
import yaml

from zoo.cli import main

ROOT = Path(__file__).resolve().parents[2]
RECIPE = "tests/platform/recipes/digits.yaml"


def _env():
    env = dict(os.environ)
    env.pop("ZOO_RUN_DIR", None)
    return env


def test_train_py_subprocess_end_to_end(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "train.py",
            f"recipe={RECIPE}",
            f"out_dir={tmp_path}",
            "trainer.max_steps=5",
            "trainer.limit_train_batches=5",
        ],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    run = tmp_path / "digits" / "version_0"
    assert {p.name for p in run.iterdir()} >= {"config.yaml", "checkpoints", "logs", "metrics.json", "export"}
    assert {p.name for p in (run / "checkpoints").iterdir()} >= {"last.ckpt"}
    assert any(p.name.startswith("best-") for p in (run / "checkpoints").iterdir())
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert cfg["trainer"]["max_steps"] == 5 and cfg["method"] == "digits-mlp"
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)  # plain containers only
    assert ckpt["global_step"] == 5 and ckpt["hyper_parameters"]["hidden"] == 32
    assert json.loads((run / "metrics.json").read_text())["metrics"]["global_step"] == 5


def test_ddp_two_processes_share_one_run_dir(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "train.py",
            f"recipe={RECIPE}",
            f"out_dir={tmp_path}",
            "trainer.devices=2",
            "trainer.strategy=ddp",
            "trainer.max_steps=3",
            "logger.kind=csv",
        ],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert [p.name for p in (tmp_path / "digits").iterdir()] == ["version_0"], "each rank made its own run dir"
    run = tmp_path / "digits" / "version_0"
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 3
    assert "world_size=2" in out.stderr or "distributed_backend=gloo" in out.stderr


def test_resume_continues_at_exact_step_with_same_wandb_id(tmp_path):
    common = [
        f"recipe={RECIPE}",
        f"out_dir={tmp_path}",
        "logger.kind=wandb",
        "checkpoint.every_n_train_steps=2",
        "trainer.max_epochs=-1",
        "data.batch_size=8",
    ]
    assert main(["train", *common, "trainer.max_steps=4"]) == 0
    run = tmp_path / "digits" / "version_0"
    first_id = (run / "wandb_id.txt").read_text().strip()
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 4
    assert main(["train", *common, "trainer.max_steps=6", "resume=auto"]) == 0
    assert sorted(p.name for p in (tmp_path / "digits").iterdir()) == ["version_0"]
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 6
    assert (run / "wandb_id.txt").read_text().strip() == first_id
    offline_runs = list((run / "wandb").glob("offline-run-*"))
    assert offline_runs and all(p.name.endswith(first_id) for p in offline_runs)


def test_new_run_gets_next_version(tmp_path):
    for _ in range(2):
        assert (
            main(
                [
                    "train",
                    f"recipe={RECIPE}",
                    f"out_dir={tmp_path}",
                    "trainer.max_steps=1",
                    "logger.kind=none",
                    "export.formats=[]",
                ]
            )
            == 0
        )
    assert sorted(p.name for p in (tmp_path / "digits").iterdir()) == ["version_0", "version_1"]


def test_fit_without_optimiser_steps_still_leaves_a_checkpoint(tmp_path):
    # limit_train_batches=0 runs no training step, like a method whose fit is a closed-form computation
    assert (
        main(
            [
                "train",
                f"recipe={RECIPE}",
                f"out_dir={tmp_path}",
                "trainer.limit_train_batches=0",
                "logger.kind=none",
                "export.formats=[]",
            ]
        )
        == 0
    )
    ckpt = tmp_path / "digits" / "version_0" / "checkpoints" / "last.ckpt"
    assert torch.load(ckpt, weights_only=True)["global_step"] == 0


def test_failed_fresh_run_leaves_no_run_dir(tmp_path, monkeypatch):
    # a failure inside fit, after the run dir exists and before any checkpoint
    import pytest

    monkeypatch.setenv("ZOO_TEST_FAIL_AT_STEP", "0")
    with pytest.raises(RuntimeError, match="test failure at step 0"):
        main(["train", f"recipe={RECIPE}", f"out_dir={tmp_path}", "logger.kind=none"])
    assert not (tmp_path / "digits").exists(), "the failed run left runs/digits/ behind"


def test_lightning_refusing_a_trainer_setting_is_a_recipe_error(tmp_path, capsys):
    # a value only Lightning can judge (an unknown strategy name): exit 2 naming trainer, no run dir left
    assert main(["train", f"recipe={RECIPE}", f"out_dir={tmp_path}", "trainer.strategy=ddp_nonsense"]) == 2
    assert "trainer:" in capsys.readouterr().err
    assert not (tmp_path / "digits").exists()


def test_without_a_monitor_the_only_checkpoint_is_last_ckpt(tmp_path):
    # Lightning adds its own ModelCheckpoint (under logs/checkpoints/) when zoo adds none; metrics.json then says that
    # `zoo eval` re-measures last.ckpt, as `zoo eval` itself will
    common = [f"recipe={RECIPE}", f"out_dir={tmp_path}", "trainer.max_steps=2", "logger.kind=csv", "export.formats=[]"]
    assert main(["train", *common, "checkpoint.monitor=null"]) == 0
    run = tmp_path / "digits" / "version_0"
    assert sorted(run.rglob("*.ckpt")) == [run / "checkpoints" / "last.ckpt"]
    source = json.loads((run / "metrics.json").read_text())["source"]
    assert "re-measures last.ckpt: the run has no best checkpoint" in source, source
    assert main(["train", *common]) == 0  # the recipe's monitor: a best checkpoint, and nothing outside checkpoints/
    run = tmp_path / "digits" / "version_1"
    assert {p.parent for p in run.rglob("*.ckpt")} == {run / "checkpoints"}
    assert "re-measures the best checkpoint" in json.loads((run / "metrics.json").read_text())["source"]


def test_val_check_interval_longer_than_an_epoch_is_a_recipe_error(tmp_path, capsys):
    # Lightning refuses it only once the data are loaded (a ValueError traceback): exit 2, one line, no run dir left
    assert (
        main(
            ["train", f"recipe={RECIPE}", f"out_dir={tmp_path}", "trainer.val_check_interval=1000", "logger.kind=none"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "error: trainer.val_check_interval: 1000 is more than the 23 training batches of an epoch" in err, err
    assert "Traceback" not in err and not (tmp_path / "digits").exists()
