"""Each multi-device strategy a paper recipe names (``trainer.strategy`` in ``recipes/paper/*.yaml``: ``fsdp2``,
``ddp``) runs that recipe's stand-in (``recipes/paper/tiny/``) as two gloo processes on CPU through ``train.py``: one
run directory, one checkpoint that loads, metrics written once. Found by globbing, so a new paper recipe with a
strategy is tested without editing this file. Slow: each run starts two processes (~30-60 s here)."""

import json
import os
import subprocess
import sys

import pytest
import torch

from zoo.core.data import repo_root
from zoo.core.recipe import load_recipe
from zoo.models import stand_ins

RECIPES = repo_root() / "recipes"
SINGLE = {"auto", "single_device", None}


def _strategy(recipe) -> str | None:
    return load_recipe(f"paper/{recipe.name}")["trainer"].get("strategy")


SHARDED = [p for p in sorted((RECIPES / "paper").glob("*.yaml")) if _strategy(p) not in SINGLE]


def test_paper_recipes_name_the_strategies_tested_here():
    """The strategies paper recipes name are ones zoo knows (fsdp1 cannot run on CPU, so no recipe names it)."""
    assert {_strategy(p) for p in SHARDED} <= {"fsdp2", "ddp"}, {p.name: _strategy(p) for p in SHARDED}
    assert any(_strategy(p) == "fsdp2" for p in SHARDED)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", SHARDED, ids=lambda p: f"{p.name}:{_strategy(p)}")
def test_paper_strategy_on_two_gloo_processes(recipe, tmp_path_factory):
    root = stand_ins.build(
        tmp_path_factory.mktemp("stand-ins"), stand_ins.kinds(RECIPES / "paper" / "tiny" / recipe.name)
    )
    out = tmp_path_factory.mktemp("runs")
    env = {k: v for k, v in os.environ.items() if k != "ZOO_RUN_DIR"} | {stand_ins.ENV: str(root)}
    argv = [
        f"recipe=paper/{recipe.name}",
        f"overlay=paper/tiny/{recipe.name}",
        "trainer.accelerator=cpu",
        "trainer.devices=2",
        "trainer.num_nodes=1",
        f"out_dir={out}",
    ]
    done = subprocess.run(
        [sys.executable, "train.py", *argv], cwd=repo_root(), env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.count("run: ") == 1, done.stdout  # rank 0 names the run; the other rank prints nothing
    (run,) = list(out.glob("*/version_*"))
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu")
    assert ckpt["global_step"] >= 1 and ckpt["state_dict"]
    assert not any(type(v).__name__ == "DTensor" for v in ckpt["state_dict"].values())  # gathered, single file
    metrics = json.loads((run / "metrics.json").read_text())["metrics"]
    assert metrics
