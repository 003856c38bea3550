"""A user's data files checked before torch is imported: every ``data:`` argument declared with
:class:`~zoo.core.constraints.DataFile` (recorded in the method's table, ``zoo/core/schemas/``) has its file read by the
shared line-numbered readers of :mod:`zoo.core.data` during the recipe check, so a binary file, a header naming a
column twice, a ragged row, a line that is not a JSON object, a missing column or a value that its declared
:class:`~zoo.core.constraints.Cell` refuses (not a number, out of range, missing, not one of the choices, no such
file) fails as ``file:line: column 'c': ...`` in about the time Python takes to import YAML, not after the 10-30 s torch
import (``benchmarks/time_to_error.py``). The method's own reader reads the file through :func:`read_declared` with the
same declaration, so both checks refuse the same values with the same message.

What only the method knows across rows or files (a composition summing to one, a keyword file naming each concept, a
tokeniser's length) is still checked by its datamodule, before the run directory exists (:mod:`zoo.core.preflight`). Shipped files under ``data/`` are not read here: they are known to be
good, and reading the large ones would slow every run. Imports nothing heavy.
"""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path
from typing import Any

from zoo.core.data import DataError, read_csv_numbered, read_jsonl_numbered
from zoo.core.schema import in_range, range_text

#: A file larger than this (bytes) says it is being checked, so a long read is never silent.
ANNOUNCE_BYTES = 20_000_000
#: The file names each :class:`~zoo.core.constraints.DataFile` kind reads (anything else is left to the datamodule).
SUFFIXES = {"csv": (".csv", ".csv.gz"), "jsonl": (".jsonl", ".jsonl.gz")}


#: Values a ``present`` cell may not hold (compared in lower case, stripped).
MISSING = ("", "na", "nan", "null", "none")


def _needed_columns(spec: dict, block: dict) -> list[str]:
    """The spec's fixed columns, then those its ``column_args`` name in ``block`` (a list value: each item)."""
    out = list(spec.get("columns") or [])
    for arg in spec.get("column_args") or []:
        for v in _arg_columns(block, arg):
            if v not in out:
                out.append(v)
    return out


def _arg_columns(block: dict, arg: str) -> list[str]:
    value = block.get(arg)
    return [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str) and v]


def _layout(spec: dict, header: list[str], path: Path) -> dict:
    """The spec itself, or the first of its ``layouts`` whose columns the header holds.

    Raises:
        DataError: ``path:1: ...`` when the header holds no layout's columns.
    """
    if not spec.get("layouts"):
        return spec
    for lay in spec["layouts"]:
        if all(c in header for c in lay["columns"]):
            return {**lay, "kind": spec["kind"]}
    accepted = " or ".join(str(lay["columns"]) for lay in spec["layouts"])
    raise DataError(f"{path}:1: header {header} holds the columns of no accepted layout ({accepted})")


def cell_types(spec: dict, block: dict, header: list[str] | None = None) -> dict[str, dict]:
    """``{column: cell spec}``: what each value of each column must be, for this block's arguments.

    Args:
        spec: a ``file`` spec (:meth:`zoo.core.constraints.DataFile.spec`) or one of its layouts.
        block: the ``data:`` block (column arguments).
        header: the file's columns (for ``"*"``, ``rest_of`` and optional typed columns; None: named ones only).
    """
    types = spec.get("types") or {}
    out = {c: t for c, t in types.items() if c != "*" and c not in (spec.get("column_args") or [])}
    named = set(spec.get("columns") or []) | set(out)
    for arg in spec.get("column_args") or []:
        cols = _arg_columns(block, arg)
        named |= set(cols)
        if arg in types:
            out.update(dict.fromkeys(cols, types[arg]))
    rest = types.get("*") or (
        types[spec["rest_of"]] if spec.get("rest_of") and not _arg_columns(block, spec["rest_of"]) else None
    )
    if rest and header is not None:
        skip = named | set(spec.get("ignore") or [])
        out.update({c: rest for c in header if c not in skip})
    if header is not None:  # a typed column that is not required is checked where the file has it
        out = {c: t for c, t in out.items() if c in header}
    return out


def check_cell(value: Any, cell: dict, where: str, name: str, folder: Path | None = None) -> Any:
    """One value checked against its cell spec (:class:`zoo.core.constraints.Cell`).

    Args:
        value: a CSV cell (a string) or a JSONL value.
        where: ``file:line``; name: ``column 'c'`` or ``key 'k'``, as the message names it.
        folder: the data file's folder (``file`` cells are relative to it).

    Returns:
        A CSV cell converted (``float`` for number, ``int`` for integer, else the string); a JSONL value as given.

    Raises:
        DataError: ``where: name: ...`` saying what the value is and what it should be.
    """
    kind, raw = cell["type"], value.strip() if isinstance(value, str) else value
    if kind in ("number", "integer"):
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            raise DataError(f"{where}: {name}: {value!r} is not a number")
        if raw == "":
            raise DataError(f"{where}: {name}: empty cell, expected a number")
        try:
            v = float(raw)
        except ValueError:
            raise DataError(
                f"{where}: {name}: {value!r} is not {'an integer' if kind == 'integer' else 'a number'}"
            ) from None
        if not math.isfinite(v):
            raise DataError(f"{where}: {name}: {value!r} is not a finite number")
        if kind == "integer" and not v.is_integer():
            raise DataError(f"{where}: {name}: {value!r} is not an integer")
        if not in_range(v, cell):
            raise DataError(f"{where}: {name}: {value!r} is not {range_text(cell)}")
        return value if not isinstance(value, str) else (int(v) if kind == "integer" else v)
    if kind == "text":
        if not isinstance(raw, str) or not raw:
            raise DataError(f"{where}: {name}: {'empty' if isinstance(raw, str) else f'{value!r} is not text'}")
    elif kind == "present":
        if raw is None or (isinstance(raw, str) and raw.lower() in MISSING):
            raise DataError(f"{where}: {name}: missing value {value!r} (impute or drop the row first)")
    elif kind == "choice":
        if str(raw).lower() not in cell["choices"]:
            raise DataError(f"{where}: {name}: {value!r} is not one of {', '.join(cell['choices'])}")
    elif kind == "file":
        f = (folder or Path()) / str(raw)
        if not raw or not f.is_file() or not f.name.lower().endswith(tuple(cell["choices"])):
            raise DataError(
                f"{where}: {name}: {value!r} is not a file in {folder or Path()} ({', '.join(cell['choices'])})"
            )
    return value


def read_declared(path: str | Path, spec, block: dict | None = None) -> tuple[list[str], list[tuple[int, dict]]]:
    """Read a CSV or JSONL file as its declaration says, every typed value checked (CSV cells converted, JSONL values
    kept as written).

    The method's reader calls this with its ``DataFile``; the recipe check with the same declaration from the
    method's table: one declaration, one check.

    Args:
        path: the file.
        spec: a :class:`zoo.core.constraints.DataFile` or its ``file`` spec (kind ``csv`` or ``jsonl``).
        block: the ``data:`` block (column arguments such as ``label``).

    Returns:
        ``(header, [(line, row), ...])``; the header of a JSONL file is the needed keys.

    Raises:
        DataError: ``path:line: column 'c': ...`` (``key 'k'`` for JSONL) for the first bad value, or the shared
            readers' errors (a missing column, a ragged row, invalid JSON ...).
    """
    spec = spec.spec()["file"] if hasattr(spec, "spec") else spec
    path, block = Path(path), block or {}
    increasing: dict[str, tuple[float, Any]] = {}

    def checked(row: dict, line: int, types: dict, label: str) -> dict:
        for col, cell in types.items():
            if col not in row:
                continue
            value = check_cell(row[col], cell, f"{path}:{line}", f"{label} {col!r}", path.parent)
            if label == "column":  # CSV cells are converted; a JSONL value is kept as written ("54" stays "54")
                row[col] = value
            if cell.get("increasing"):
                prev = increasing.get(col)
                if prev is not None and not float(row[col]) > prev[0]:
                    raise DataError(
                        f"{path}:{line}: {label} {col!r}: {row[col]!r} does not increase (previous row has {prev[1]!r})"
                    )
                increasing[col] = (float(row[col]), row[col])
        return row

    if spec["kind"] == "csv":
        chosen: dict = {}

        def needed(header: list[str]) -> list[str]:
            chosen.update(_layout(spec, header, path))
            return _needed_columns(chosen, block)

        header, rows = read_csv_numbered(path, needed)
        types = cell_types(chosen, block, header)
        return header, [(line, checked(row, line, types, "column")) for line, row in rows]
    need = _needed_columns(spec, block)
    rows = read_jsonl_numbered(path, required=need, types=dict.fromkeys(spec.get("text") or [], str))
    types = cell_types(spec, block)
    return need, [(line, checked(row, line, types, "key")) for line, row in rows]


def _applies(spec: dict, block: dict) -> bool:
    """Whether the block's arguments select this way of reading the file (``when``)."""
    return all(block.get(k) == v for k, v in (spec.get("when") or {}).items())


def check_file(path: Path, spec: dict, block: dict) -> None:
    """Read ``path`` as ``spec`` (a table's ``file`` entry) describes, with the columns ``block`` names.

    Raises:
        DataError: ``path:line: ...`` from the shared readers.
    """
    if spec.get("reader"):  # a shared reader of a nested format, named by the declaration (it imports no torch)
        module, function = spec["reader"].split(":")
        options = {**spec.get("options", {}), **{a: block[a] for a in spec.get("option_args", []) if a in block}}
        getattr(importlib.import_module(module), function)(path, **options)
    else:
        read_declared(path, spec, block)


def check_data_files(table: dict | None, data: dict) -> None:
    """Check each user file that a ``data:`` argument with a ``file`` spec names (one path or a list of paths).

    Args:
        table: the method's table (``zoo.core.schema.method_schema``); None checks nothing.
        data: the recipe's ``data:`` block.

    Raises:
        DataError: the first bad file, as ``file:line: ...`` with ``(recipe key: data.<key>)`` appended
            (:func:`zoo.core.preflight.with_recipe_key`, as for the datamodule's own errors).
    """
    from zoo.core.preflight import with_recipe_key
    from zoo.core.userdata import is_shipped

    args = ((table or {}).get("datamodule") or {}).get("args") or {}
    for key, spec in args.items():
        file = spec.get("file")
        value = data.get(key)
        if not file or value is None or not _applies(file, data):
            continue
        for item in value if isinstance(value, list) else [value]:
            p = Path(str(item))
            if file.get("inside"):
                p = p / file["inside"]
            if not p.name.lower().endswith(SUFFIXES[file["kind"]]) or not p.is_file() or is_shipped(p):
                continue
            if (size := p.stat().st_size) > ANNOUNCE_BYTES:  # logging is not set up yet: a plain line
                print(f"checking data.{key} {p} ({size / 1e6:.0f} MB) ...", file=sys.stderr, flush=True)
            try:
                check_file(p, file, data)
            except DataError as e:
                raise with_recipe_key(e, data) from None
