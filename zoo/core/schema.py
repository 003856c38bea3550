"""Recipe schemas that load without torch: Lightning ``Trainer``'s arguments and every method's constructor arguments,
as JSON tables in ``zoo/core/schemas/`` generated from the code, so a recipe is checked before any heavy import.

* ``schemas/_trainer.json``: ``lightning.Trainer.__init__`` (name -> accepted types / values).
* ``schemas/<method>.json``: the method's LightningModule (``model:``) and LightningDataModule (``data:``) arguments,
  whether it optimises manually (``trainer.accumulate_grad_batches`` must then stay 1), its export formats, and the
  nested blocks it declares (``ZooModule.arg_schemas`` or :class:`zoo.core.constraints.Keys`; every ``optimizer``
  argument is checked against :data:`OPTIMIZER_SCHEMA`, the keys :func:`zoo.core.optim.build_optimizer` takes), and
  the trainer settings it refuses (``ZooModule.trainer_rules``, with the defaults of the model arguments they test).

Regenerate after changing a constructor, or after adding a method: ``python -m zoo.core.schema --write``;
``tests/platform/test_schema.py`` fails when a table and the code disagree. A method without a table (a plug-in) is
checked by importing it, as before. A type spec is ``{"types": [...], "choices": [...]}`` where a type is one of
``int float str bool null list dict`` (``float`` accepts ints), plus what :mod:`zoo.core.constraints` declares with the
argument: ``min`` / ``max`` (``min_exclusive`` / ``max_exclusive``), ``min_length``, ``items`` (a list's item spec) and
``keys`` (a dict block's key specs); no spec means anything goes. Each part also records ``docs``, every argument's
one-line meaning from the class's ``Args:`` docstring, for ``zoo info``.

Kept as one module: the checker (no torch) and the generator of the tables it checks (which
imports the classes, lazily) share one definition of a type spec.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from zoo.core.errors import UserError

SCHEMA_DIR = Path(__file__).parent / "schemas"


class RecipeError(UserError, ValueError):
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
    "num_nodes": {"min": 1},
    "max_epochs": {"min": -1},
    "min_epochs": {"min": 0},
    "max_steps": {"min": -1},
    "min_steps": {"min": 0},
    "accumulate_grad_batches": {"min": 1},
    "check_val_every_n_epoch": {"min": 1},
    "log_every_n_steps": {"min": 0},
    "num_sanity_val_steps": {"min": -1},
    "gradient_clip_val": {"min": 0.0},
    "reload_dataloaders_every_n_epochs": {"min": 0},
    "limit_train_batches": {"min": 0},
    "limit_val_batches": {"min": 0},
    "limit_test_batches": {"min": 0},
    "limit_predict_batches": {"min": 0},
    "overfit_batches": {"min": 0},
    "val_check_interval": {"min": 0, "min_exclusive": True},
}
_FRACTION_OR_COUNT = (
    "limit_train_batches",
    "limit_val_batches",
    "limit_test_batches",
    "limit_predict_batches",
    "overfit_batches",
    "val_check_interval",
)
PRIMITIVE_TYPES = {
    int: "int",
    float: "float",
    str: "str",
    bool: "bool",
    type(None): "null",
    list: "list",
    tuple: "list",
    dict: "dict",
}


# ------------------------------------------------------------------------------------------------ checking


def render(spec: dict) -> str:
    """``int or null``; ``one of 'a', 'b'``; both joined by ``or``."""
    parts = list(spec.get("types", []))
    if spec.get("choices"):
        parts.append("one of " + ", ".join(repr(c) for c in spec["choices"]))
    return " or ".join(parts) or "anything"


def allowed(spec: dict) -> str:
    """What a spec allows, in words: ``float > 0``, ``int >= 1 or null``, ``list of (one of 'a', 'b'), at least 1``,
    ``float in [0, 1)``."""
    parts = []
    for t in spec.get("types", []):
        if t in ("int", "float") and ("min" in spec or "max" in spec):
            t += " " + range_text(spec)
        elif t == "list":
            t += (
                (f" of ({allowed(spec['items'])})" if "items" in spec else "")
                + (f", at least {spec['min_length']}" if spec.get("min_length") else "")
                + (f", exactly {spec['length']}" if "length" in spec else "")
            )
        parts.append(t)
    if spec.get("choices"):
        parts.append("one of " + ", ".join(repr(c) for c in spec["choices"]))
    return (" or ".join(parts) or "anything") + (f" ({_file_text(spec['file'])})" if spec.get("file") else "")


def _file_text(file: dict) -> str:
    """What a ``DataFile`` argument's file must hold when its name ends in the kind's suffix, in words:
    ``.csv: a header with columns 'date', 'n_posts'``, ``.csv: a header with the columns data.label, data.features
    name; values: data.label number, ...``, ``.jsonl: objects with keys 'title', 'created_utc' (strings: 'title')``,
    ``.jsonl: as zoo.data.chat.read_conversations reads it``; ``folder with captions.csv: ...``; ``when data.format is 'csv'``."""
    if file.get("reader"):
        head = f".jsonl: as {file['reader'].replace(':', '.')} reads it"
    elif file.get("layouts"):
        head = " or ".join(f"({_file_text({**lay, 'kind': file['kind']})})" for lay in file["layouts"])
    else:
        csv = file["kind"] == "csv"
        what = (
            [f"{'columns' if csv else 'keys'} {', '.join(map(repr, file['columns']))}"] if file.get("columns") else []
        )
        if file.get("column_args"):
            names = ", ".join(f"data.{a}" for a in file["column_args"])
            what.append(f"the {'columns' if csv else 'keys'} {names} name{'s' * (len(file['column_args']) == 1)}")
        text = f" (strings: {', '.join(map(repr, file['text']))})" if file.get("text") else ""
        head = (".csv: a header" if csv else ".jsonl: one JSON object per line") + (
            " with " + " and ".join(what) if what else ""
        )
        head += text + _cells_text(file)
    if file.get("inside"):
        head = f"a folder with {file['inside']}: {head.split(': ', 1)[1]}"
    when = ", ".join(f"data.{k} is {v!r}" for k, v in (file.get("when") or {}).items())
    return head + (f", when {when}" if when else "")


def _cells_text(file: dict) -> str:
    """``; values: 'qid' integer, 'time' number >= 0, the others number``: what a file's typed columns hold."""
    types = file.get("types") or {}
    if not types:
        return ""

    def cell(c: dict) -> str:
        if c["type"] == "choice":
            return "one of " + ", ".join(map(repr, c["choices"]))
        if c["type"] == "file":
            return f"a file ({', '.join(c['choices'])})"
        return (
            c["type"]
            + (f" {range_text(c)}" if "min" in c or "max" in c else "")
            + " increasing" * bool(c.get("increasing"))
        )

    args = set(file.get("column_args") or [])
    rest = " (unset: every other column)"
    named = [
        f"{f'data.{k}' if k in args else repr(k)} {cell(c)}{rest * (k == file.get('rest_of'))}"
        for k, c in types.items()
        if k != "*"
    ]
    if "*" in types:
        named.append(f"the others {cell(types['*'])}")
    return "; values: " + ", ".join(named)


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    for py, name in PRIMITIVE_TYPES.items():
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


def in_range(value: float, spec: dict) -> bool:
    """Whether a number lies in the range a spec allows (``min``/``max``, ``min_exclusive``/``max_exclusive``; NaN
    never does when a bound is set)."""
    lo, hi = spec.get("min"), spec.get("max")
    if lo is not None and not (value > lo if spec.get("min_exclusive") else value >= lo):
        return False
    return hi is None or (value < hi if spec.get("max_exclusive") else value <= hi)


def range_text(spec: dict) -> str:
    """``> 0``, ``in [0, 1)``, ``<= 5``: the range a spec allows."""
    lo, hi = spec.get("min"), spec.get("max")
    if lo is not None and hi is not None:
        return f"in {'(' if spec.get('min_exclusive') else '['}{lo}, {hi}{')' if spec.get('max_exclusive') else ']'}"
    if lo is not None:
        return f"{'>' if spec.get('min_exclusive') else '>='} {lo}"
    return f"{'<' if spec.get('max_exclusive') else '<='} {hi}"


def check_value(value: Any, spec: dict, where: str) -> None:
    """Raise ``RecipeError`` naming ``where`` when ``value`` does not fit ``spec``: types, choices (with the closest
    one), a numeric range, a list's length and items (``where[i]``), a dict's keys (``where.key``)."""
    if not fits(value, spec):
        hint = ""
        if spec.get("choices") and isinstance(value, str):
            from zoo.core.registry import suggest

            hint = suggest(value, [c for c in spec["choices"] if isinstance(c, str)])
        raise RecipeError(f"{where}: expected {render(spec)}, got {value!r}{hint}")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and ("min" in spec or "max" in spec):
        if not in_range(value, spec):
            raise RecipeError(f"{where}: must be {range_text(spec)}, got {value!r}")
    if isinstance(value, list):
        if "length" in spec and len(value) != spec["length"]:
            raise RecipeError(f"{where}: expected {spec['length']} values, got {value!r}")
        if len(value) < spec.get("min_length", 0):
            raise RecipeError(
                f"{where}: needs at least {spec['min_length']} item{'s' * (spec['min_length'] > 1)}, got {value!r}"
            )
        for i, item in enumerate(value if "items" in spec else ()):
            check_value(item, spec["items"], f"{where}[{i}]")
    if isinstance(value, dict) and "keys" in spec:
        check_block(value, spec["keys"], where, where)


def check_block(values: dict, schema: dict[str, dict], where: str, owner: str) -> None:
    """Check a mapping's keys (unknown ones with a did-you-mean and the allowed list) and each value."""
    from zoo.core.registry import suggest

    if not isinstance(values, dict):
        raise RecipeError(f"{where}: must be a mapping, got {values!r}")
    for k, v in values.items():
        if k not in schema:
            raise RecipeError(
                f"{where}.{k}: {owner} takes no argument {k!r}{suggest(k, schema)}; allowed: {', '.join(schema)}"
            )
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
    if dev is not None and not (
        dev == "auto"
        or dev == -1
        or (isinstance(dev, int) and dev >= 1)
        or (isinstance(dev, list) and dev and all(isinstance(d, int) and d >= 0 for d in dev))
        or (isinstance(dev, str) and dev.replace(",", "").strip().isdigit())
    ):
        raise RecipeError(f"trainer.devices: must be >= 1, -1 (all), 'auto' or a list of device indices, got {dev!r}")
    for k in _FRACTION_OR_COUNT:
        v = values.get(k)
        if isinstance(v, float) and v > 1.0:
            raise RecipeError(
                f"trainer.{k}: a float is a fraction in [0, 1]; for a number of batches write an int, got {v!r}"
            )


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


def block_token(cfg: dict, table: dict, token: str) -> str:
    """Override ``token`` with a ``+`` when it sets a key of a declared dict block (``model.generation.greedy=true``,
    ``model.masker.net.n_bits=8``) that the recipe leaves unset: such keys need no ``+``; a null block on the way
    becomes an empty mapping in ``cfg``. A key the block does not take fails here, at its own level, with the
    block's keys and a did-you-mean."""
    parts = token.split("=", 1)[0].split(".")
    part = table.get({"model": "module", "data": "datamodule"}.get(parts[0], ""))
    nested = (part or {}).get("nested") or {}
    if token[:1] in "+~" or "=" not in token or len(parts) < 3 or parts[1] not in nested:
        return token
    keys = nested[parts[1]]
    for i, key in enumerate(parts[2:], start=2):
        if keys is None:
            break
        if key not in keys:
            where = ".".join(parts[:i])
            check_block({key: None}, keys, where, where)
        keys = keys[key].get("keys")
    node = cfg
    for key in parts[:-1]:
        if not isinstance(node, dict):
            break  # apply_override names the value that is not a mapping
        if node.get(key) is None:
            node[key] = {}
        node = node[key]
    return "+" + token


# ---------------------------------------------------------------------------------------------- generating


def describe(ann: Any) -> dict:
    """A type spec from a Python annotation (``Optional[int]`` -> ``{"types": ["int", "null"]}``; Literals become
    choices; ``list[X]`` checks its items against ``X``; ``Annotated`` metadata from :mod:`zoo.core.constraints` adds
    ranges, lengths and dict keys; classes a YAML value cannot be are left out; anything unjudgeable -> ``{}``)."""
    import collections.abc as cabc
    import inspect
    import types
    import typing

    if ann is inspect.Parameter.empty or ann is Any or isinstance(ann, (str, typing.TypeVar)):
        return {}
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(ann)
        out = describe(base)
        for m in meta:
            if hasattr(m, "spec"):
                add = m.spec(describe)
                if "choices" in add:  # the values replace their type: Annotated[str, OneOf(...)] is not any str
                    covered = {_type_of(c) for c in add["choices"]}
                    out["types"] = [t for t in out.get("types", []) if t not in covered]
                out.update(add)
        return {k: v for k, v in out.items() if v != [] or k != "types"} if "choices" in out else out
    if origin in (typing.Union, types.UnionType):
        types_, choices, extra = [], [], {}
        for a in typing.get_args(ann):
            d = describe(a)
            if not d:
                return {}
            types_ += [t for t in d.get("types", []) if t not in types_]
            choices += [c for c in d.get("choices", []) if c not in choices]
            extra.update({k: v for k, v in d.items() if k not in ("types", "choices")})
        out = {"types": types_} if types_ else {}
        return dict(out, choices=choices, **extra) if choices else dict(out, **extra)
    if origin is typing.Literal:
        return {"choices": list(typing.get_args(ann))}
    base = origin or ann
    if base in PRIMITIVE_TYPES:
        out = {"types": [PRIMITIVE_TYPES[base]]}
    elif base in (cabc.Sequence, cabc.Iterable, cabc.MutableSequence):
        out = {"types": ["list"]}
    elif base in (cabc.Mapping, cabc.MutableMapping):
        return {"types": ["dict"]}
    elif isinstance(base, type):
        return {"types": []}  # an object (Strategy, timedelta, Logger...): no YAML value is one
    else:
        return {}
    item = typing.get_args(ann)[0] if out["types"] == ["list"] and typing.get_args(ann) else None
    if item is not None and (spec := describe(item)):
        out["items"] = spec
    return out


def _args(cls) -> dict:
    import inspect
    import typing

    from zoo.core.docstrings import arg_docs

    sig = inspect.signature(cls.__init__)
    try:
        hints = typing.get_type_hints(cls.__init__, include_extras=True)
    except Exception:  # noqa: BLE001 - an annotation that only resolves under TYPE_CHECKING: judge nothing
        hints = {}
    args = {
        n: describe(hints.get(n, inspect.Parameter.empty))
        for n, p in sig.parameters.items()
        if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    var_kwargs = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    nested = {n: args[n].pop("keys") for n in args if "keys" in args[n]}
    out = {"class": cls.__name__, "args": args, "order": list(args), "var_kwargs": var_kwargs, "docs": arg_docs(cls)}
    return dict(out, nested=nested) if nested else out


def generate_method(name: str) -> dict:
    """The table of method ``name`` from its classes (imports the method)."""
    import inspect

    from zoo.core.registry import get_method

    entry = get_method(name)
    module = _args(entry.module_cls)
    nested = {k: OPTIMIZER_SCHEMA for k in module["args"] if k == "optimizer"}
    nested.update(module.get("nested", {}))
    nested.update(getattr(entry.module_cls, "arg_schemas", {}) or {})
    module["nested"] = nested
    defaults = {
        n: p.default
        for n, p in inspect.signature(entry.module_cls.__init__).parameters.items()
        if p.default is not p.empty
    }
    rules = [
        dict(r, defaults={k: defaults.get(k) for k in r.get("when", {})}, when=dict(r.get("when", {})))
        for r in getattr(entry.module_cls, "trainer_rules", ())
    ]
    if rules:
        module["trainer_rules"] = rules
    needs = [
        dict(
            r, defaults={k: defaults.get(k) for k in [*r.get("when", {}), *r["requires"]]}, when=dict(r.get("when", {}))
        )
        for r in getattr(entry.module_cls, "model_rules", ())
    ]
    if needs:
        module["model_rules"] = needs
    src = "".join(inspect.getsource(c) for c in entry.module_cls.__mro__ if c.__module__.startswith("zoo."))
    module["manual_optimization"] = "automatic_optimization = False" in src
    return {
        "method": name,
        "module": module,
        "datamodule": _args(entry.datamodule_cls) if entry.datamodule_cls else None,
        "export_formats": list(entry.module_cls.export_formats),
    }


def generate_trainer() -> dict:
    """``lightning.Trainer.__init__``'s arguments as type specs (imports Lightning)."""
    import lightning as L

    return _args(L.Trainer)["args"]


def write_all(names: list[str] | None = None) -> list[Path]:
    """(Re)write ``_trainer.json`` and the tables of ``names`` (default: every built-in method whose extra is
    installed). Returns the files written."""
    from zoo.core.registry import RegistryError, known_methods

    SCHEMA_DIR.mkdir(exist_ok=True)
    written = [TRAINER_FILE]
    TRAINER_FILE.write_text(json.dumps(generate_trainer(), indent=1, sort_keys=True) + "\n")
    for name in names or sorted(known_methods()):
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
