"""Every recipe exposes every argument its datamodule takes as a ``data.*`` key, so ``data.path=my.csv`` (README,
"Fine-tune on your own data") and every other documented data argument is set without ``+``."""

import inspect

import pytest

from zoo.core.data import repo_root
from zoo.core.recipe import load_recipe
from zoo.core.registry import get_method

RECIPES = repo_root() / "recipes"
ALL = sorted(p for p in RECIPES.glob("*.yaml") if not p.name.startswith("_")) + sorted(
    (RECIPES / "paper").glob("*.yaml")
)


def _datamodule_args(method: str) -> list[str]:
    init = get_method(method).datamodule_cls.__init__
    return [
        n
        for n, p in inspect.signature(init).parameters.items()
        if n != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ]


@pytest.mark.parametrize("recipe", ALL, ids=lambda p: str(p.relative_to(RECIPES)))
def test_recipe_exposes_every_datamodule_argument(recipe):
    ref = str(recipe.relative_to(RECIPES))
    cfg = load_recipe(ref)
    missing = [a for a in _datamodule_args(cfg["method"]) if a not in (cfg.get("data") or {})]
    assert not missing, f"{ref}: data block lacks {missing} (add them with their defaults)"
    if "path" in cfg["data"]:  # the README's own-data override composes as written
        assert load_recipe(ref, ["data.path=my_data.file"])["data"]["path"] == "my_data.file"
