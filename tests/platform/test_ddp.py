"""DDP is real for every method: two gloo processes on CPU train each method's tiny recipe, and the validation value
they log is the value `zoo eval` measures on the same weights (every rank validates the whole set; logs are synced)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from zoo.cli import main
from zoo.methods import METHODS

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"
DDP = ["trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp", "export.formats=[]"]


def _train_ddp(args, tmp_path, refusal=None):
    env = {k: v for k, v in os.environ.items() if k != "ZOO_RUN_DIR"}
    out = subprocess.run(
        [sys.executable, "train.py", *args, *DDP, f"out_dir={tmp_path}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if refusal and out.returncode != 0 and refusal in out.stderr:
        pytest.xfail(f"the method refuses DDP by design: {refusal}")
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.count("run: ") == 1, out.stdout  # rank 0 names the run; the other rank prints nothing
    runs = list(tmp_path.glob("*/version_0"))
    assert len(runs) == 1, runs
    return runs[0]


def _logged_best(run: Path):
    """(monitor, value) the best-k callback recorded at its validation, and that checkpoint."""
    best = sorted((run / "checkpoints").glob("best-*.ckpt"))
    if not best:
        return None, None, None
    ckpt = torch.load(best[-1], weights_only=True)
    for key, state in ckpt["callbacks"].items():
        if key.startswith("AtomicModelCheckpoint") and state.get("best_model_score") is not None:
            return state["monitor"], float(state["best_model_score"]), best[-1]
    return None, None, None


def _eval(run: Path, tmp_path: Path) -> dict:
    out = tmp_path / "eval.json"
    assert main(["eval", str(run), "--which", "best", "--out", str(out)]) == 0
    return json.loads(out.read_text())["metrics"]


@pytest.mark.slow
def test_ddp_validation_equals_zoo_eval_on_an_odd_sized_set(tmp_path):
    # 81 validation images: a padded DistributedSampler would count one twice and each rank would log its own half
    run = _train_ddp(
        [
            "recipe=tests/platform/recipes/digits.yaml",
            "+data.limit=401",
            "data.batch_size=32",
            "trainer.max_steps=6",
            "trainer.max_epochs=-1",
            "trainer.val_check_interval=3",
        ],
        tmp_path,
    )
    monitor, logged, _ = _logged_best(run)
    assert monitor == "val/acc"
    assert abs(_eval(run, tmp_path)["val/acc"] - logged) < 1e-6


ONE_RECIPE_PER_METHOD = sorted(m for m in METHODS if (RECIPES / f"{m}.yaml").is_file())


def single_device_refusal(method: str) -> str | None:
    """The reason a method gives for refusing more than one process whatever its settings (a ``trainer_rules`` entry
    with an empty ``when`` and ``max_processes: 1``, recorded in its table), or None: read from the method, so a
    method that refuses DDP by design needs no entry here."""
    from zoo.core.schema import method_schema

    rules = method_schema(method)["module"].get("trainer_rules", [])
    return next((r["why"] for r in rules if not r["when"] and r.get("max_processes") == 1), None)


@pytest.mark.slow
@pytest.mark.parametrize("method", ONE_RECIPE_PER_METHOD)
def test_every_method_trains_under_two_process_ddp(method, tmp_path):
    run = _train_ddp(
        [
            f"recipe={method}.yaml",
            f"overlay=tiny/{method}.yaml",
            "trainer.limit_val_batches=1.0",  # the whole set, so the logged value is what `zoo eval` measures
        ],
        tmp_path,
        single_device_refusal(method),
    )
    assert (run / "checkpoints" / "last.ckpt").is_file()
    monitor, logged, _ = _logged_best(run)
    if monitor is None:
        pytest.skip(f"{method}'s recipe monitors no validation metric: trained under DDP, nothing to compare")
    measured = _eval(run, tmp_path)
    assert monitor in measured, f"zoo eval does not report {monitor}: {sorted(measured)}"
    assert measured[monitor] == pytest.approx(logged, rel=1e-4, abs=1e-5)
