"""A run whose stdout is not a terminal (a log file, a cluster job) prints timed progress lines and a closing
summary, and none of Lightning's steady noise (#14 item 6)."""
import os
import subprocess
import sys

from zoo.core.data import repo_root
from zoo.core.progress import _fmt_seconds


def test_piped_run_reports_progress_and_summary_without_noise(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(repo_root()))
    out = subprocess.run([sys.executable, "train.py", "recipe=zoo-lm.yaml", "overlay=tiny/zoo-lm.yaml",
                          f"out_dir={tmp_path}", "export.formats=[]", "logger.progress_every_s=0"],
                         cwd=repo_root(), env=env, capture_output=True, text=True, timeout=600, check=False)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-2000:]
    assert "training zoo-lm from step 0 (2 steps)" in text
    assert "step 2/2 (100%)" in text and "validation at step 2: val/loss" in text
    run_dir = tmp_path / "zoo-lm" / "version_0"
    assert f"run {run_dir}: step 2" in text and "metrics (metrics.json): " in text
    assert "checkpoints: best by val/loss" in text and "exports: none" in text
    for noise in ("LeafSpec", "Tip: For seamless", "returned `None`"):
        assert noise not in text, noise


def test_durations_read_naturally():
    assert [_fmt_seconds(s) for s in (4.4, 61, 3725)] == ["4s", "1m01s", "1h02m"]
