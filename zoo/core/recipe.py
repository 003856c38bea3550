"""Recipes: YAML files composed with ``base:`` inheritance and command-line overrides, validated before training.

Grammar of the command line (``python train.py recipe=NAME [overlay=FILE] TOKEN ...``):

=================  ==============================================================
``k.j=v``          set an existing key (``v`` parsed as YAML: ``1e-4`` is a float)
``+k.j=v``         add a key (or overwrite it)
``~k.j``           delete a key
=================  ==============================================================

A bare recipe name is looked up in ``recipes/``; ``.yaml`` may be omitted. Every error is a
``RecipeError`` whose message starts with the recipe file or the full key path, and, for a typo,
ends with a "did you mean".

Kept as one module: composition, overrides and validation of one format; validation needs the
composed tree and the override grammar together.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from zoo.core.registry import format_not_ready, suggest
from zoo.core.schema import RecipeError

TOP_KEYS = (
    "method",
    "base",
    "name",
    "seed",
    "threads",
    "init_from",
    "resume",
    "out_dir",
    "model",
    "data",
    "trainer",
    "checkpoint",
    "logger",
    "export",
    "card",
)
BLOCK_SCHEMA: dict[str, dict[str, Any]] = {
    # key -> (type or tuple of types, check or None)
    "checkpoint": {
        "monitor": (str, type(None)),
        "mode": ("min", "max"),
        "save_top_k": int,
        "every_n_train_steps": (int, type(None)),
        "every_n_epochs": (int, type(None)),
        "every_n_minutes": (float, type(None)),
    },
    "logger": {
        "kind": ("csv", "wandb", "tensorboard", "none"),
        "project": str,
        "mode": ("offline", "online", "disabled"),
        "progress_every_s": (int, float),
    },
    "export": {"formats": list, "onnx_atol": float},
    "card": {"license": str, "data": (str, list), "description": str},  # data: set from a user data.path too
}
EXPORT_FORMATS = ("package", "hf", "onnx", "torch_export")
PATH_KEY_SUFFIXES = ("path", "_file", "_dir", "_paths", "_files")


def recipes_dir() -> Path:
    """``recipes/`` at the repository root."""
    from zoo.core.data import repo_root

    return repo_root() / "recipes"


def find_recipe(ref: str, relative_to: Path | None = None, kind: str = "recipe") -> Path:
    """Resolve a recipe reference to a file.

    Looks at ``ref`` as given (relative to ``relative_to`` or the working directory), then in ``recipes/``,
    each with and without an added ``.yaml``. ``kind`` names what ``ref`` is in the message (recipe or overlay).

    Raises:
        RecipeError: nothing found; the message lists the closest recipe names.
    """
    if Path(ref).is_dir():
        inside = sorted(p.name for p in Path(ref).glob("*.yaml"))[:5]
        raise RecipeError(
            f"{kind} {ref!r} is a directory; pass a recipe file"
            + (f" such as {ref.rstrip('/')}/{inside[0]} (there: {', '.join(inside)})" if inside else "")
        )
    cands = []
    for base in ([relative_to] if relative_to else []) + [Path.cwd(), recipes_dir()]:
        cands += [base / ref, base / f"{ref}.yaml"]
    for c in cands:
        if c.is_file():
            return c.resolve()
    known = [str(p.relative_to(recipes_dir())) for p in recipes_dir().rglob("*.yaml")]
    raise RecipeError(
        f"{kind} {ref!r} not found (looked in {relative_to or Path.cwd()} and {recipes_dir()})"
        f"{suggest(ref, known) or suggest(ref + '.yaml', known)}"
    )


def read_yaml(path: Path) -> dict:
    """Parse one YAML file with OmegaConf's loader (``1e-4`` is a float, duplicate keys are refused).

    Raises:
        RecipeError: ``path:line: problem`` for bad YAML, or a top level that is not a mapping.
    """
    from omegaconf import OmegaConf

    try:
        cfg = OmegaConf.load(path)
    except Exception as e:  # yaml.YAMLError and OmegaConf's own errors
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise RecipeError(f"{where}: invalid YAML: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(OmegaConf.to_container(cfg), dict):
        raise RecipeError(f"{path}: a recipe must be a mapping of keys, got {type(cfg).__name__}")
    return OmegaConf.to_container(cfg)


def _merge(base: dict, top: dict) -> dict:
    out = dict(base)
    for k, v in top.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def compose(path: Path, _seen: tuple[Path, ...] = ()) -> dict:
    """Load ``path`` and its ``base:`` chain (the base underneath, this file's keys winning).

    Raises:
        RecipeError: a cycle in the chain, or a missing or bad base file.
    """
    if path in _seen:
        raise RecipeError(f"{path}: base chain loops: {' -> '.join(map(str, _seen + (path,)))}")
    cfg = read_yaml(path)
    base = cfg.pop("base", None)
    if base is None:
        return cfg
    if not isinstance(base, str):
        raise RecipeError(f"{path}: base: must be a recipe file name, got {base!r}")
    try:
        base_path = find_recipe(base, relative_to=path.parent)
    except RecipeError as e:
        raise RecipeError(f"{path}: base: {e}") from None
    return _merge(compose(base_path, _seen + (path,)), cfg)


def parse_value(raw: str) -> Any:
    """An override's value as YAML reads it; digits with a leading zero (``06075``, a FIPS code) stay a string."""
    from omegaconf import OmegaConf

    if (digits := raw.strip().lstrip("+-")).isdigit() and len(digits) > 1 and digits[0] == "0":  # YAML: octal
        return raw.strip()
    try:
        return OmegaConf.to_container(OmegaConf.from_dotlist([f"v={raw}"]))["v"]
    except Exception as e:
        raise RecipeError(f"cannot parse value {raw!r}: {e}") from None


def _all_paths(cfg: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in cfg.items():
        out.append(prefix + str(k))
        if isinstance(v, dict):
            out += _all_paths(v, prefix + str(k) + ".")
    return out


def apply_override(cfg: dict, token: str) -> None:
    """Apply one ``k=v``, ``+k=v`` or ``~k`` token to ``cfg`` in place.

    Raises:
        RecipeError: malformed token; ``k=v`` or ``~k`` on a key that does not exist (with the full key path
            and the closest existing path); a path through a non-mapping value.
    """
    if token.startswith("~"):
        op, body = "del", token[1:]
        if "=" in body:
            raise RecipeError(f"override {token!r}: delete takes no value; write ~{body.split('=')[0]}")
        key, value = body, None
    else:
        op = "add" if token.startswith("+") else "set"
        body = token[1:] if op == "add" else token
        if "=" not in body:
            raise RecipeError(f"override {token!r}: expected key=value, +key=value or ~key")
        key, raw = body.split("=", 1)
        value = parse_value(raw)
    parts = key.split(".")
    if not key or any(not p for p in parts):
        raise RecipeError(f"override {token!r}: empty key")
    node = cfg
    for i, p in enumerate(parts[:-1]):
        if p not in node:
            if op == "add":
                node[p] = {}
            else:
                path = ".".join(parts[: i + 1])
                raise RecipeError(f"{path}: no such key{suggest(key, _all_paths(cfg))}; use +{key}=... to add one")
        node = node[p]
        if not isinstance(node, dict):
            raise RecipeError(f"{'.'.join(parts[: i + 1])}: is {node!r}, not a mapping; cannot set {key}")
    last = parts[-1]
    if op == "set" and node is cfg and last in TOP_KEYS:  # name=, seed=, init_from=... need no '+'
        op = "add"
    if op != "add" and last not in node:
        hint = suggest(key, _all_paths(cfg))
        raise RecipeError(f"{key}: no such key{hint}" + ("; use +" + key + "=... to add one" if op == "set" else ""))
    if op == "del":
        del node[last]
    else:
        node[last] = value


def apply_overrides_checked(cfg: dict, tokens) -> None:
    """Apply override tokens to a saved recipe (``zoo eval`` / ``predict`` / ``export``) and check the ``model:`` and
    ``data:`` blocks against the method's table, as :func:`validate` does for a recipe."""
    from zoo.core import schema

    table = schema.method_schema(cfg["method"]) or schema.generate_method(cfg["method"])
    _apply_user_paths(cfg, [schema.block_token(cfg, table, t) for t in tokens])
    for block in ("model", "data"):
        schema.check_method_block(table, block, cfg.get(block) or {}, cfg["method"])


def load_recipe(ref: str, overrides: list[str] = (), overlays: list[str] = ()) -> dict:
    """Compose a recipe, apply overlays (YAML files merged on top) and overrides, and resolve interpolations.

    Shipped paths are anchored to the project (:func:`anchor_shipped_paths`); existing paths that overrides set are
    made absolute.

    Returns:
        A plain ``dict`` (no OmegaConf objects), with ``name`` defaulting to the recipe's file stem; with an overlay
        from ``recipes/tiny/`` the name (unless ``name=`` is given) ends in ``-tiny``.

    Raises:
        RecipeError: see :func:`compose` and :func:`apply_override`; an unknown top-level key.
    """
    from omegaconf import OmegaConf

    path = find_recipe(ref)
    cfg = compose(path)
    for ov_path in (ov_paths := [find_recipe(ov, kind="overlay") for ov in overlays]):
        top = compose(ov_path)
        for k in _all_paths(top):
            if k.split(".")[0] not in TOP_KEYS:
                raise RecipeError(f"{ov_path}: {k}: unknown top-level key{suggest(k.split('.')[0], TOP_KEYS)}")
        cfg = _merge(cfg, top)
    anchor_shipped_paths(cfg)
    from zoo.core import schema
    from zoo.core.userdata import run_name

    table = schema.method_schema(cfg["method"]) if isinstance(cfg.get("method"), str) else None
    _apply_user_paths(cfg, [schema.block_token(cfg, table, t) for t in overrides] if table else overrides)

    cfg["name"] = run_name(cfg, path.stem, ov_paths, overrides)  # <method>-<file> on user data; <name>-tiny
    try:
        cfg = OmegaConf.to_container(OmegaConf.create(cfg), resolve=True, throw_on_missing=True)
    except Exception as e:
        raise RecipeError(f"{path}: {e}") from None
    for k in cfg:
        if k not in TOP_KEYS:
            raise RecipeError(f"{k}: unknown top-level key{suggest(k, TOP_KEYS)}; allowed: {', '.join(TOP_KEYS)}")
    from zoo.core.data import repo_root

    cfg["_recipe"] = str(path.relative_to(repo_root())) if path.is_relative_to(repo_root()) else str(path)
    return cfg


def anchor_shipped_paths(cfg: dict) -> None:
    """Paths written in recipe files (and in a run's saved config.yaml) name shipped files relative to the project
    root; when the current directory is elsewhere (``cd /tmp && zoo train recipe=praxis.yaml``) each such path of the
    ``data:`` and ``model:`` blocks is made absolute, in place. Output paths (``out_dir``) are left alone."""
    from zoo.core.data import repo_root

    _map_path_keys(
        _input_blocks(cfg),
        None,
        lambda p: (
            str(repo_root() / p)
            if isinstance(p, str) and p and not os.path.isabs(p) and not Path(p).exists() and (repo_root() / p).exists()
            else p
        ),
    )


def _apply_user_paths(cfg: dict, tokens) -> None:
    """Apply override tokens; each path they set in ``data:`` / ``model:`` is the user's (relative to the current
    directory) and is made absolute when it exists, so the run's config.yaml works from any directory. A path that
    reads the same from the project root keeps the recipe's form; a missing one stays as typed, for errors to name."""
    import copy

    from zoo.core.data import repo_root

    def absolute(p):
        full = os.path.abspath(os.path.expanduser(p)) if isinstance(p, str) and p else None
        return full if full and os.path.exists(full) and full != os.path.abspath(repo_root() / p) else p

    before = copy.deepcopy(_input_blocks(cfg))
    for token in tokens:
        apply_override(cfg, token)
    _map_path_keys(_input_blocks(cfg), before, absolute)


def _input_blocks(cfg: dict) -> dict:
    return {b: cfg[b] for b in ("data", "model") if isinstance(cfg.get(b), dict)}


def _map_path_keys(block: dict, before: dict | None, fn) -> None:
    """Replace each value (or list item) of a path key (``*path``, ``*_file``, ``*_dir``, ...) of ``block``, nested
    blocks included, by ``fn(value)``; with ``before``, only values that differ from it there."""
    for k, v in block.items():
        old = before.get(k) if before is not None else None
        if isinstance(v, dict):
            _map_path_keys(v, None if before is None else (old if isinstance(old, dict) else {}), fn)
        elif k.endswith(PATH_KEY_SUFFIXES) and v is not None and (before is None or v != old):
            block[k] = [fn(p) for p in v] if isinstance(v, list) else fn(v)


# ----------------------------------------------------------------------------------------------- validation


def _check_block(cfg: dict, block: str) -> None:
    schema = BLOCK_SCHEMA[block]
    val = cfg.get(block) or {}
    if not isinstance(val, dict):
        raise RecipeError(f"{block}: must be a mapping, got {val!r}")
    for k, v in val.items():
        if k not in schema:
            raise RecipeError(f"{block}.{k}: unknown key{suggest(k, schema)}; allowed: {', '.join(schema)}")
        want = schema[k]
        if isinstance(want, tuple) and all(isinstance(w, str) for w in want):
            if v not in want:
                raise RecipeError(f"{block}.{k}: {v!r} is not one of {', '.join(want)}")
        else:
            from zoo.core.schema import PRIMITIVE_TYPES, check_value

            check_value(
                v,
                {"types": [PRIMITIVE_TYPES[w] for w in (want if isinstance(want, tuple) else (want,))]},
                f"{block}.{k}",
            )


def _check_paths(block: dict, where: str) -> None:
    for k, v in block.items():
        if isinstance(v, dict):
            _check_paths(v, f"{where}.{k}")
        elif k.endswith(PATH_KEY_SUFFIXES) and v is not None:
            for p in v if isinstance(v, list) else [v]:
                if isinstance(p, str) and not Path(p).exists():
                    raise RecipeError(f"{where}.{k}: no such file or directory: {p} (cwd {os.getcwd()})")


def validate(cfg: dict, check_files: bool = True) -> None:
    """Check a composed recipe before anything is built or trained.

    Checks: ``method`` is registered; ``model`` / ``data`` keys and value types against the method's
    LightningModule / LightningDataModule constructors; ``trainer`` keys against ``lightning.Trainer``;
    the ``checkpoint``, ``logger``, ``export`` and ``card`` blocks against their schemas; the extra each of
    ``export.formats`` needs is installed; ``seed`` is a non-negative int; and, with ``check_files``, that data
    paths (keys ending in ``path``, ``_file``, ``_dir``), ``init_from`` and ``resume`` exist, and the user's data files
    that the datamodule declares with ``DataFile`` read as it declares (:mod:`zoo.core.datafiles`).

    Raises:
        RecipeError: the first problem found, naming its full key path.
        DataError: a user data file's first bad line, as ``file:line: ...``.
    """
    from zoo.core import schema
    from zoo.core.preflight import check_model_rules, check_trainer_rules, planned_processes
    from zoo.core.registry import RegistryError, known_methods

    where = cfg.get("_recipe") or "recipe"
    if "method" not in cfg or not isinstance(cfg["method"], str):
        raise RecipeError(
            f"{where}: method: missing; a recipe names its method (see `zoo list`)"
            + (" (the file is empty)" if not any(k for k in cfg if k not in ("_recipe", "name")) else "")
        )
    method = cfg["method"]
    known = known_methods()
    if method not in known:
        try:  # a method registered in-process (tests, notebooks) is known to the registry only
            from zoo.core.registry import get_method

            get_method(method)
        except RegistryError as e:
            raise RecipeError(f"method: {e}") from None
    seed = cfg.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise RecipeError(f"seed: expected a non-negative integer, got {seed!r}")
    threads = cfg.get("threads")
    if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
        raise RecipeError(f"threads: expected a positive integer (torch intra-op threads) or null, got {threads!r}")
    if not isinstance(cfg.get("name"), str) or not cfg["name"] or "/" in cfg["name"]:
        raise RecipeError(f"name: expected a run name without '/', got {cfg.get('name')!r}")
    table = schema.method_schema(method)
    if table is None:  # a plug-in without a stored table: read it off the classes (imports the method)
        try:
            table = schema.generate_method(method)
        except RegistryError as e:
            raise RecipeError(f"method: {e}") from None
    for block in ("model", "data"):
        schema.check_method_block(table, block, cfg.get(block) or {}, method)
    check_model_rules(table, cfg)
    trainer = cfg.get("trainer") or {}
    schema.check_trainer(trainer)
    check_trainer_rules(table, cfg, planned_processes(trainer))
    if table["module"].get("manual_optimization") and (trainer.get("accumulate_grad_batches") or 1) > 1:
        raise RecipeError(
            f"trainer.accumulate_grad_batches: {method} optimises manually, so Lightning cannot "
            f"accumulate for it; keep 1 (got {trainer['accumulate_grad_batches']}) and raise the "
            "batch size instead"
        )
    for block in BLOCK_SCHEMA:
        _check_block(cfg, block)
    ck = cfg.get("checkpoint") or {}
    if ck.get("save_top_k", 1) < -1:
        raise RecipeError(f"checkpoint.save_top_k: must be >= -1, got {ck['save_top_k']}")
    for k in ("every_n_train_steps", "every_n_epochs"):
        if ck.get(k) is not None and ck[k] < 1:
            raise RecipeError(f"checkpoint.{k}: must be >= 1, got {ck[k]}")
    if ck.get("every_n_minutes") is not None and ck["every_n_minutes"] <= 0:
        raise RecipeError(f"checkpoint.every_n_minutes: must be > 0 (or null for off), got {ck['every_n_minutes']}")
    for fmt in (cfg.get("export") or {}).get("formats", []):
        if fmt not in EXPORT_FORMATS:
            raise RecipeError(
                f"export.formats: unknown format {fmt!r}{suggest(fmt, EXPORT_FORMATS)}; "
                f"choose from {', '.join(EXPORT_FORMATS)}"
            )
        if fmt not in table["export_formats"]:
            raise RecipeError(
                f"export.formats: {cfg['method']} cannot export {fmt!r}; it supports "
                f"{', '.join(table['export_formats'])}"
            )
        if missing := format_not_ready(fmt):  # now, not after training
            raise RecipeError(f"export.formats: {missing}")
    if check_files:
        _check_paths(cfg.get("data") or {}, "data")
        from zoo.core.datafiles import check_data_files

        check_data_files(table, cfg.get("data") or {})  # a user's CSV/JSONL rows, before torch
        _check_paths({k: v for k, v in (cfg.get("model") or {}).items()}, "model")
        res = cfg.get("resume")
        if res not in (None, "auto") and not Path(str(res)).is_file():
            raise RecipeError(f"resume: no such checkpoint file: {res} (use resume=auto or a .ckpt path)")
        if cfg.get("init_from"):
            from zoo.core.hub import HubError, describe_ref

            try:
                describe_ref(str(cfg["init_from"]))
            except HubError as e:
                raise RecipeError(f"init_from: {e}") from None
