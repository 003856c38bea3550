"""A newcomer's path in one test (#42 "Done when"), typed as a user types it, each command its own process in a
fresh working directory: a tiny run of ``zoo-lm.yaml``; the real recipe (shortened on the command line), killed with
SIGKILL once it has written a checkpoint; a tiny run of the same recipe, which must land in ``runs/zoo-lm-tiny/``
and leave the real run alone; ``resume=auto`` of the real run, which must continue the killed run at its
checkpoint's step and finish it; ``zoo eval``; ``zoo predict --json`` (parsed with ``json.loads``); ``zoo export``.

zoo-lm is the cheap method here: its real recipe trains the 5.3M-parameter zoo-lm-small from scratch on shipped
text. Slow: seven processes, each paying the torch import (122 s on the 2 shared cores at load ~3, 2026-12-02)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from zoo.core.data import repo_root

pytestmark = pytest.mark.slow

ROOT = repo_root()
#: The real recipe, shortened as a user would for a first try: one text file (a path typed on the command line is
#: relative to the working directory, so the shipped one is given in full), smaller batches, a checkpoint every 2 steps.
REAL = [
    "recipe=zoo-lm.yaml",
    f"data.path=[{ROOT}/data/tinyshakespeare/input.txt]",
    "data.max_length=64",
    "data.batch_size=4",
    "trainer.max_steps=60",
    "trainer.val_check_interval=60",
    "trainer.limit_val_batches=2",
    "checkpoint.every_n_train_steps=2",
    "export.formats=[]",
]
TINY = ["recipe=zoo-lm.yaml", "overlay=tiny/zoo-lm.yaml", "export.formats=[]"]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def _zoo() -> list[str]:
    """The ``zoo`` command next to this Python (the console script), else ``python -m zoo.cli``."""
    script = Path(sys.executable).with_name("zoo")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "zoo.cli"]


def _run(cmd: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout, check=False)
    assert out.returncode == 0, f"{' '.join(cmd)} -> {out.returncode}\n{out.stderr[-3000:]}"
    return out


def _step(ckpt: Path) -> int:
    return int(torch.load(ckpt, weights_only=True, map_location="cpu")["global_step"])


def test_tiny_run_real_run_killed_tiny_again_resume_eval_predict_export(tmp_path):
    train = [sys.executable, str(ROOT / "train.py")]
    runs = tmp_path / "runs"

    # 1. a tiny run first, as the README's smoke test
    _run([*train, *TINY], tmp_path)
    assert (runs / "zoo-lm-tiny" / "version_0" / "checkpoints" / "last.ckpt").is_file()

    # 2. the real run, killed (SIGKILL, no cleanup) once it has written a checkpoint
    real = runs / "zoo-lm" / "version_0"
    last = real / "checkpoints" / "last.ckpt"
    with open(tmp_path / "real.log", "w") as log:
        proc = subprocess.Popen([*train, *REAL], cwd=tmp_path, env=_env(), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 600
        while not last.is_file() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, (
        f"the real run ended before it was killed:\n{(tmp_path / 'real.log').read_text()[-3000:]}"
    )
    killed_at = _step(last)
    assert 0 < killed_at < 60, killed_at

    # 3. a tiny run of the same recipe: its own folder, the real run untouched
    before = last.read_bytes()
    _run([*train, *TINY], tmp_path)
    assert sorted(p.name for p in runs.iterdir()) == ["zoo-lm", "zoo-lm-tiny"]
    assert sorted(p.name for p in (runs / "zoo-lm-tiny").iterdir()) == ["version_0", "version_1"]
    assert [p.name for p in (runs / "zoo-lm").iterdir()] == ["version_0"] and last.read_bytes() == before

    # 4. resume the real run where it was killed, and finish it
    out = _run([*train, *REAL, "resume=auto"], tmp_path)
    assert re.search(rf"resuming \S*zoo-lm/version_0 at step {killed_at}\b", out.stderr), out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1].endswith(str(Path("zoo-lm") / "version_0")), out.stdout
    assert _step(last) == 60 and [p.name for p in (runs / "zoo-lm").iterdir()] == ["version_0"]

    # 5. zoo eval: writes the run's metrics.json
    _run([*_zoo(), "eval", str(real)], tmp_path)
    metrics = json.loads((real / "metrics.json").read_text())
    assert metrics["method"] == "zoo-lm" and "val/loss" in metrics["metrics"], metrics

    # 6. zoo predict --json: one JSON object with the reply as data
    out = _run(
        [*_zoo(), "predict", str(real), "--json", "model.generation.max_new_tokens=8", "How do I bake bread?"], tmp_path
    )
    doc = json.loads(out.stdout)
    assert doc["method"] == "zoo-lm" and doc["prediction"][0]["prompt"] == "How do I bake bread?", doc
    assert isinstance(doc["prediction"][0]["reply"], str)

    # 7. zoo export: the package loads
    _run([*_zoo(), "export", str(real), "--formats", "package"], tmp_path)
    import zoo

    assert zoo.load(str(real / "export" / "package")) is not None
