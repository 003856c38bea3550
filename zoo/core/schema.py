"""Recipe schemas that load without torch: Lightning ``Trainer``'s arguments and every method's constructor arguments,
as JSON tables in ``zoo/core/schemas/`` generated from the code, so a recipe is checked before any heavy import.

* ``schemas/_trainer.json``: ``lightning.Trainer.__init__`` (name -> accepted types / values).
* ``schemas/<method>.json``: the method's LightningModule (``model:``) and LightningDataModule (``data:``) arguments,
  whether it optimises manually (``trainer.accumulate_grad_batches`` must then stay 1), its export formats, and the
  nested blocks it declares (``ZooModule.arg_schemas``; every ``optimizer`` argument is checked against
  :data:`OPTIMIZER_SCHEMA`, the keys :func:`zoo.core.optim.build_optimizer` takes).

Regenerate after changing a constructor, or after adding a method: ``python -m zoo.core.schema --write``;
``tests/platform/test_schema.py`` fails when a table and the code disagree. A method without a table (a plug-in) is
checked by importing it, as before. A type spec is ``{"types": [...], "choices": [...]}`` where a type is one of
``int float str bool null list dict`` (``float`` accepts ints); no spec means anything goes.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).parent / "schemas"


class RecipeError(ValueError):
    """A recipe that cannot be loaded or does not validate; raised before any training starts (also importable as
    ``zoo.core.recipe.RecipeError``)."""

TRAINER_FILE = SCHEMA_DIR / "_trainer.json"

#: The optimiser block (``model.optimizer``) every method passes to ``zoo.core.optim.build_optimizer``.
OPTIMIZER_SCHEMA: dict[str, dict] = {
    "name": {"choices": ["adamw", "adam", "sgd"]},
    "lr": {"types": ["float"], "min": 0.0, "min_exclusive": True},
    "weight_decay": {"types": ["float"], "min": 0.0},
    "betas": {"types": ["list"], "length": 2},
    "eps": {"types": ["float"], "min": 0.0, "min_exclusive": True},
    "momentum": {"types": ["float"], "min": 0.0},
    "dampening": {"types": ["float"], "min": 0.0},
    "nesterov": {"types": ["bool"]},
    "amsgrad": {"types": ["bool"]},
    "warmup_steps": {"types": ["int"], "min": 0},
    "schedule": {"choices": ["constant", "cosine", "linear"]},
}

#: Value ranges of trainer keys (the types come from the generated table).
TRAINER_RANGES: dict[str, dict] = {
    "num_nodes": {"min": 1}, "max_epochs": {"min": -1}, "min_epochs": {"min": 0}, "max_steps": {"min": -1},
    "min_steps": {"min": 0}, "accumulate_grad_batches": {"min": 1}, "check_val_every_n_epoch": {"min": 1},
    "log_every_n_steps": {"min": 0}, "num_sanity_val_steps": {"min": -1}, "gradient_clip_val": {"min": 0.0},
    "reload_dataloaders_every_n_epochs": {"min": 0}, "limit_train_batches": {"min": 0},
    "limit_val_batches": {"min": 0}, "limit_test_batches": {"min": 0}, "limit_predict_batches": {"min": 0},
    "overfit_batches": {"min": 0}, "val_check_interval": {"min": 0, "min_exclusive": True},
}
_FRACTION_OR_COUNT = ("limit_train_batches", "limit_val_batches", "limit_test_batches", "limit_predict_batches",
                      "overfit_batches", "val_check_interval")
_PRIMITIVE = {int: "int", float: "float", str: "str", bool: "bool", type(None): "null", list: "list",
              tuple: "list", dict: "dict"}


# ------------------------------------------------------------------------------------------------ checking


def render(spec: dict) -> str:
    """``int or null``; ``one of 'a', 'b'``; both joined by ``or``."""
    parts = list(spec.get("types", []))
    if spec.get("choices"):
        parts.append("one of " + ", ".join(repr(c) for c in spec["choices"]))
    return " or ".join(parts) or "anything"


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    for py, name in _PRIMITIVE.items():
        if py is not bool and isinstance(value, py):
            return name
    return type(value).__name__


def fits(value: Any, spec: dict) -> bool:
    """Whether ``value`` (from YAML) fits ``spec``; an empty spec accepts anything."""
    if not spec.get("types") and not spec.get("choices"):
        return True
    choices = spec.get("choices", [])
    if any(c is value for c in choices) if isinstance(value, bool) else value in choices:
        return True
    t = _type_of(value)
    return t in spec.get("types", []) or (t == "int" and "float" in spec.get("types", []))


def check_value(value: Any, spec: dict, where: str) -> None:
    """Raise ``RecipeError`` naming ``where`` when ``value`` does not fit ``spec`` (types, choices, ranges)."""
    if not fits(value, spec):
        raise RecipeError(f"{where}: expected {render(spec)}, got {value!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and "min" in spec:
        low, strict = spec["min"], spec.get("min_exclusive", False)
        if value < low or (strict and value == low):
            raise RecipeError(f"{where}: must be {'>' if strict else '>='} {low}, got {value!r}")
    if "length" in spec and isinstance(value, list) and len(value) != spec["length"]:
        raise RecipeError(f"{where}: expected {spec['length']} values, got {value!r}")


def check_block(values: dict, schema: dict[str, dict], where: str, owner: str) -> None:
    """Check a mapping's keys (unknown ones with a did-you-mean and the allowed list) and each value."""
    from zoo.core.registry import suggest

    if not isinstance(values, dict):
        raise RecipeError(f"{where}: must be a mapping, got {values!r}")
    for k, v in values.items():
        if k not in schema:
            raise RecipeError(f"{where}.{k}: {owner} takes no argument {k!r}{suggest(k, schema)}; "
                              f"allowed: {', '.join(schema)}")
        check_value(v, schema[k], f"{where}.{k}")


def trainer_schema() -> dict[str, dict]:
    """``lightning.Trainer``'s arguments from ``schemas/_trainer.json``, with zoo's value ranges merged in."""
    table = json.loads(TRAINER_FILE.read_text())
    return {k: dict(v, **TRAINER_RANGES.get(k, {})) for k, v in table.items()}


def check_trainer(values: dict) -> None:
    """Keys, types and ranges of the ``trainer:`` block, without importing Lightning.

    Raises:
        RecipeError: an unknown key (with the closest one), a wrong type (naming the accepted ones) or a value out of
            range, e.g. ``trainer.devices: must be >= 1, 'auto' or a list of device indices, got 0``.
    """
    check_block(values, trainer_schema(), "trainer", "lightning.Trainer")
    for k in ("callbacks", "logger", "default_root_dir", "enable_checkpointing"):
        if k in values:
            raise RecipeError(f"trainer.{k}: set by zoo (see the checkpoint:, logger: and out_dir keys)")
    dev = values.get("devices")
    if dev is not None and not (dev == "auto" or dev == -1 or (isinstance(dev, int) and dev >= 1)
                                or (isinstance(dev, list) and dev and all(isinstance(d, int) and d >= 0 for d in dev))
                                or (isinstance(dev, str) and dev.replace(",", "").strip().isdigit())):
        raise RecipeError(f"trainer.devices: must be >= 1, -1 (all), 'auto' or a list of device indices, got {dev!r}")
    for k in _FRACTION_OR_COUNT:
        v = values.get(k)
        if isinstance(v, float) and v > 1.0:
            raise RecipeError(f"trainer.{k}: a float is a fraction in [0, 1]; for a number of batches write an int, "
                              f"got {v!r}")


def method_schema(name: str) -> dict | None:
    """The stored table of method ``name``, or None when there is none (a plug-in: check by importing it)."""
    path = SCHEMA_DIR / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def check_method_block(schema: dict, block: str, values: dict, method: str) -> None:
    """Check ``model:`` (``block="model"``) or ``data:`` against a method's table, nested blocks included."""
    part = schema["module" if block == "model" else "datamodule"]
    if part is None:
        if values:
            raise RecipeError(f"data: method {method!r} has no DataModule, so data: must be empty")
        return
    if not isinstance(values, dict):
        raise RecipeError(f"{block}: must be a mapping, got {values!r}")
    args = part["args"]
    if not part.get("var_kwargs"):
        check_block(values, args, block, part["class"])
    for k, v in values.items():
        nested = part.get("nested", {}).get(k)
        if nested is not None and isinstance(v, dict):
            check_block(v, nested, f"{block}.{k}", f"{block}.{k}")
        elif k in args:
            check_value(v, args[k], f"{block}.{k}")


# ---------------------------------------------------------------------------------------------- generating


def describe(ann: Any) -> dict:
    """A type spec from a Python annotation (``Optional[int]`` -> ``{"types": ["int", "null"]}``; Literals become
    choices; classes a YAML value cannot be are left out; anything unjudgeable -> ``{}``)."""
    import collections.abc as cabc
    import inspect
    import types
    import typing

    if ann is inspect.Parameter.empty or ann is Any or isinstance(ann, (str, typing.TypeVar)):
        return {}
    origin = typing.get_origin(ann)
    if origin in (typing.Union, types.UnionType):
        types_, choices = [], []
        for a in typing.get_args(ann):
            d = describe(a)
            if not d:
                return {}
            types_ += [t for t in d.get("types", []) if t not in types_]
            choices += [c for c in d.get("choices", []) if c not in choices]
        out = {"types": types_} if types_ else {}
        return dict(out, choices=choices) if choices else out
    if origin is typing.Literal:
        return {"choices": list(typing.get_args(ann))}
    base = origin or ann
    if base in _PRIMITIVE:
        return {"types": [_PRIMITIVE[base]]}
    if base in (cabc.Sequence, cabc.Iterable, cabc.MutableSequence):
        return {"types": ["list"]}
    if base in (cabc.Mapping, cabc.MutableMapping):
        return {"types": ["dict"]}
    if isinstance(base, type):
        return {"types": []}  # an object (Strategy, timedelta, Logger...): no YAML value is one
    return {}


def _args(cls) -> dict:
    import inspect
    import typing

    sig = inspect.signature(cls.__init__)
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # noqa: BLE001 - an annotation that only resolves under TYPE_CHECKING: judge nothing
        hints = {}
    args = {n: describe(hints.get(n, inspect.Parameter.empty)) for n, p in sig.parameters.items()
            if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    var_kwargs = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    return {"class": cls.__name__, "args": args, "var_kwargs": var_kwargs}


def generate_method(name: str) -> dict:
    """The table of method ``name`` from its classes (imports the method)."""
    import inspect

    from zoo.core.registry import get_method

    entry = get_method(name)
    module = _args(entry.module_cls)
    nested = {k: OPTIMIZER_SCHEMA for k in module["args"] if k == "optimizer"}
    nested.update(getattr(entry.module_cls, "arg_schemas", {}) or {})
    module["nested"] = nested
    src = "".join(inspect.getsource(c) for c in entry.module_cls.__mro__ if c.__module__.startswith("zoo."))
    module["manual_optimization"] = "automatic_optimization = False" in src
    return {"method": name, "module": module,
            "datamodule": _args(entry.datamodule_cls) if entry.datamodule_cls else None,
            "export_formats": list(entry.module_cls.export_formats)}


def generate_trainer() -> dict:
    """``lightning.Trainer.__init__``'s arguments as type specs (imports Lightning)."""
    import lightning as L

    return _args(L.Trainer)["args"]


def write_all(names: list[str] | None = None) -> list[Path]:
    """(Re)write ``_trainer.json`` and the tables of ``names`` (default: every built-in method whose extra is
    installed). Returns the files written."""
    from zoo.core.registry import RegistryError, _known

    SCHEMA_DIR.mkdir(exist_ok=True)
    written = [TRAINER_FILE]
    TRAINER_FILE.write_text(json.dumps(generate_trainer(), indent=1, sort_keys=True) + "\n")
    for name in names or sorted(_known()):
        try:
            table = generate_method(name)
        except RegistryError as e:  # extra not installed here
            print(f"skipped {name}: {e}", file=sys.stderr)
            continue
        path = SCHEMA_DIR / f"{name}.json"
        path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
        written.append(path)
    return written


if __name__ == "__main__":
    if sys.argv[1:2] != ["--write"]:
        sys.exit("usage: python -m zoo.core.schema --write [METHOD ...]")
    for p in write_all(sys.argv[2:] or None):
        print(p)
