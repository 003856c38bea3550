"""The command that trains a run: its recipe plus the overrides that turn the shipped recipe into the run's resolved one.

A released package's card prints it (``zoo release``), so "Reproduce:" names every setting the run changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zoo.core.recipe import RecipeError, load_recipe, parse_value

#: top-level keys that say where a run went and how it is labelled, not what it trained: no reproduce command names them
RUN_KEYS = ("name", "out_dir", "resume", "card")


def _leaves(cfg: dict, prefix: str = "") -> dict[str, Any]:
    """``{dotted.key: value}`` for every leaf of ``cfg`` (an empty mapping is a leaf)."""
    out: dict[str, Any] = {}
    for k, v in cfg.items():
        if isinstance(v, dict) and v:
            out |= _leaves(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


def _token_value(value: Any) -> str:
    """``value`` as an override's right-hand side that :func:`parse_value` reads back equal."""
    import json

    if value is None or isinstance(value, (bool, int, float, list, dict)):
        return json.dumps(value)  # JSON is YAML flow: null, true, 1e-3, ["q_proj", "v_proj"]
    text = str(value)
    return text if parse_value(text) == text else json.dumps(text)


def overrides_between(recipe: dict, run: dict, defaults: dict | None = None) -> list[str]:
    """The override tokens that turn the composed ``recipe`` into the resolved ``run`` recipe: ``k=v`` for a changed
    key, ``+k=v`` for one the recipe lacks, ``~k`` for one the run dropped; :data:`RUN_KEYS` and ``_``-prefixed keys
    are skipped; so is an added key whose value is its entry in ``defaults`` (``{"model.gen_seed": 0}``: a
    constructor default that a checkpoint's saved hyper-parameters spell out). Both recipes come from
    :func:`load_recipe` (the run's as saved in its config.yaml)."""

    def keep(cfg: dict) -> dict:
        return _leaves({k: v for k, v in cfg.items() if k not in RUN_KEYS and not str(k).startswith("_")})

    before, after, defaults = keep(recipe), keep(run), defaults or {}
    after = {k: v for k, v in after.items() if k in before or defaults.get(k, ...) != v}
    tokens = [f"{'' if k in before else '+'}{k}={_token_value(v)}" for k, v in after.items() if before.get(k, ...) != v]
    return tokens + [f"~{k}" for k in before if k not in after]


def reproduce_command(run: dict, defaults: dict | None = None) -> str:
    """``python train.py recipe=NAME k=v ...``: the command that trains ``run`` (a resolved recipe with ``_recipe``)
    from the recipe as shipped now, every override shell-quoted (``defaults``: see :func:`overrides_between`). A
    recipe that no longer loads gives the bare ``recipe=NAME`` with a pointer to the resolved file.

    Raises:
        KeyError: ``run`` has no ``_recipe``.
    """
    import shlex

    name = Path(run["_recipe"]).name
    try:
        tokens = overrides_between(load_recipe(run["_recipe"]), run, defaults)
    except RecipeError:
        return f"python train.py recipe={name} (the recipe no longer loads; config.yaml holds the resolved one)"
    return " ".join(["python train.py", f"recipe={name}", *map(shlex.quote, tokens)])
