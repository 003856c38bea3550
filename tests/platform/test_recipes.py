"""Every shipped recipe composes and validates; every CPU recipe runs in-process with its tiny overlay."""
from pathlib import Path

import pytest

from zoo.cli import compose_and_validate, main
from zoo.core.data import repo_root

RECIPES = repo_root() / "recipes"
CPU = sorted(p for p in RECIPES.glob("*.yaml") if not p.name.startswith("_"))
PAPER = sorted((RECIPES / "paper").glob("*.yaml"))
rel = lambda p: str(p.relative_to(RECIPES))  # noqa: E731


@pytest.mark.parametrize("recipe", CPU + PAPER, ids=rel)
def test_recipe_composes_and_validates(recipe):
    # paper recipes point at local model directories that exist only on a GPU machine, so files are not checked
    cfg = compose_and_validate([f"recipe={rel(recipe)}"], check_files=recipe.parent == RECIPES)
    assert cfg["method"] and cfg["name"]
    for key in ("devices", "strategy", "num_nodes", "precision", "accumulate_grad_batches"):
        assert key in cfg["trainer"], f"{rel(recipe)}: trainer.{key} missing (scale keys come from _defaults.yaml)"


@pytest.mark.parametrize("recipe", CPU, ids=rel)
def test_recipe_runs_with_tiny_overlay(recipe, tmp_path):
    overlay = RECIPES / "tiny" / recipe.name
    assert overlay.is_file(), f"{rel(recipe)} has no tiny overlay recipes/tiny/{recipe.name}"
    assert main(["train", f"recipe={rel(recipe)}", f"overlay=tiny/{recipe.name}", f"out_dir={tmp_path}",
                 "export.formats=[]"]) == 0
    runs = list(Path(tmp_path).glob("*/version_0/checkpoints/last.ckpt"))
    assert runs, "no checkpoint written"
