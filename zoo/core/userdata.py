"""Runs named for what they are: a recipe pointed at the user's own data (``data.path=my.csv``) names its run after
that file and records it (file name, sha256, rows) in the run's config, model card and manifest entry, instead of
the shipped data set the recipe was written for.

Shipped data are files under the repository's ``data/``; any other file given to a ``data:`` key ending in ``path``,
``_file`` or ``_files``/``_paths`` is the user's.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from pathlib import Path

from zoo.core.data import repo_root

_FILE_KEY = re.compile(r"(path|_file|_files|_paths)$")


def is_shipped(p: Path) -> bool:
    """Whether ``p`` lies under the project's shipped ``data/`` folder."""
    try:
        p.resolve().relative_to((repo_root() / "data").resolve())
        return True
    except ValueError:
        return False


def _project_relative(p: Path) -> str:
    """A shipped file as the project names it (``data/...``), wherever the run was started."""
    return str(p.resolve().relative_to(repo_root().resolve()))


def user_files(cfg: dict) -> list[tuple[str, Path]]:
    """``(recipe key, file)`` for every existing file a ``data:`` path key names outside the shipped ``data/``."""
    out = []
    for k, v in (cfg.get("data") or {}).items():
        if not _FILE_KEY.search(k) or v is None:
            continue
        for item in v if isinstance(v, list) else [v]:
            p = Path(str(item))
            if p.is_file() and not is_shipped(p):
                out.append((f"data.{k}", p))
    return out


def default_run_name(cfg: dict, recipe_stem: str) -> str:
    """``<method>-<file stem>`` for a run on the user's data (the first user file), else the recipe's file stem."""
    files = user_files(cfg)
    if not files:
        return recipe_stem
    stem = files[0][1].name.split(".")[0]
    return f"{cfg.get('method', recipe_stem)}-{re.sub(r'[^A-Za-z0-9_.-]+', '-', stem).strip('-') or 'data'}"


def run_name(cfg: dict, recipe_stem: str, overlays: list[Path], overrides) -> str:
    """The run's name: ``name`` where the recipe or the command line sets it, else :func:`default_run_name`; with an
    overlay from ``recipes/tiny/`` or ``recipes/paper/tiny/`` (``overlays``: resolved files) ``-tiny`` is added, unless the command line gives
    ``name=``, so a smoke run never shares ``runs/<name>/`` (nor ``resume=auto``) with the real run."""
    name = cfg["name"] if "name" in cfg else default_run_name(cfg, recipe_stem)
    recipes = (repo_root() / "recipes").resolve()
    tiny = any(p.parent in (recipes / "tiny", recipes / "paper" / "tiny") for p in overlays)
    named = any(str(t).lstrip("+").startswith("name=") for t in overrides)
    return f"{name}-tiny" if tiny and not named and isinstance(name, str) else name


def describe(path: Path) -> dict:
    """``{"file", "sha256", "rows"}``: rows are non-blank lines, less the header of a ``.csv``/``.tsv``."""
    digest, rows = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        rows = sum(1 for line in f if line.strip())
    if any(s in (".csv", ".tsv") for s in path.suffixes) and rows:
        rows -= 1
    return {"file": path.name, "sha256": digest.hexdigest(), "rows": rows}


def record_user_data(cfg: dict) -> list[dict]:
    """When the recipe trains on user files, put them in ``cfg["card"]["data"]`` (each with its recipe key, name,
    absolute path, sha256 and rows; shipped files still in use are listed as such, by their ``data/...`` path) so
    config.yaml, the model card and the manifest entry name them. Updates ``cfg`` in place; returns the user files' entries (empty: nothing changed)."""
    files = user_files(cfg)
    if not files:
        return []
    entries = [dict(describe(p), key=key, path=str(p.absolute())) for key, p in files]
    user_keys = {key for key, _ in files}
    shipped = [
        {"key": f"data.{k}", "file": _project_relative(Path(v)), "shipped": True}
        for k, v in (cfg.get("data") or {}).items()
        if _FILE_KEY.search(k) and isinstance(v, str) and f"data.{k}" not in user_keys and is_shipped(Path(v))
    ]
    card = dict(cfg.get("card") or {})
    card["data"] = entries + shipped
    if card.get("license"):  # the recipe's licence is its shipped data's
        card["license"] = "not recorded: trained on the user's data (see data)"
    cfg["card"] = card
    return entries
