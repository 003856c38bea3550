"""Plots and states of every run (#42): a fit writes ``curves.png`` from its metrics.csv and names it in the summary;
``zoo runs [NAME]`` lists each run's status (finished / killed / running), step, best metric and path."""

import json
import logging
import subprocess
import sys

import lightning as L
from PIL import Image

from zoo.cli import compose_and_validate, main
from zoo.core import runs
from zoo.core.training import train

DIGITS = [
    "recipe=tests/platform/recipes/digits.yaml",
    "trainer.max_steps=6",
    "trainer.val_check_interval=2",
    "logger.kind=csv",
    "export.formats=[]",
]


class _StatusDuringFit(L.Callback):
    def __init__(self):
        self.seen = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.seen.append(runs.run_state(trainer.default_root_dir)["status"])


def test_fit_writes_curves_and_zoo_runs_lists_every_state(tmp_path, caplog, capsys):
    during = _StatusDuringFit()
    with caplog.at_level(logging.INFO, logger="zoo"):
        run = train(compose_and_validate([*DIGITS, f"out_dir={tmp_path}"]), callbacks=[during])
    assert set(during.seen) == {"running"}
    png = run / "curves.png"
    assert f"curves: {png}" in caplog.text
    with Image.open(png) as im:
        assert im.format == "PNG" and im.width > 400 and im.height > 250
    # the figure's series are metrics.csv's: the monitor's best value is the one zoo runs reports
    cols = runs.metric_columns(run)
    assert {"train/loss", "val/acc"} <= set(cols) and cols["val/acc"][0] == [1, 3, 5]  # Lightning logs step 2 at 1
    best = max(cols["val/acc"][1])
    # a second run, killed: its record says running, but its process is gone
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    killed = tmp_path / "digits" / "version_1"
    (killed / "checkpoints").mkdir(parents=True)
    (killed / "config.yaml").write_text((run / "config.yaml").read_text())
    (killed / "status.json").write_text(
        json.dumps(
            {**json.loads((run / "status.json").read_text()), "status": "running", "pid": int(gone.stdout), "step": 4}
        )
    )
    # a third, running: this process
    live = tmp_path / "digits" / "version_2"
    live.mkdir()
    runs.mark(live, "running", step=2)
    capsys.readouterr()
    assert main(["runs", "digits", f"--out-dir={tmp_path}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["run", "status", "step", "best"]
    assert lines[1].split()[:3] == [str(run), "finished", "6"] and f"val/acc {best:.4g} (max)" in lines[1]
    assert lines[2].split()[:3] == [str(killed), "killed", "4"]
    assert lines[3].split() == [str(live), "running", "2", "-"]  # no config.yaml yet: no monitor known
    assert main(["runs", "nope", f"--out-dir={tmp_path}"]) == 2
    assert "no runs under" in capsys.readouterr().err


def test_a_run_without_metrics_csv_says_why_it_has_no_curves(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="zoo"):
        run = train(compose_and_validate([*DIGITS, "logger.kind=none", f"out_dir={tmp_path}"]))
    assert not (run / "curves.png").exists()
    assert "curves: none (no logs/metrics.csv: logger.kind is not csv)" in caplog.text
    assert runs.run_state(run)["status"] == "finished"
