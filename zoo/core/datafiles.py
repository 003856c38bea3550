"""A user's data files checked before torch is imported: every ``data:`` argument declared with
:class:`~zoo.core.constraints.DataFile` (recorded in the method's table, ``zoo/core/schemas/``) has its file read by the
shared line-numbered readers of :mod:`zoo.core.data` during the recipe check, so a binary file, a header naming a
column twice, a ragged row, a line that is not a JSON object or a missing column fails as ``file:line: ...`` in about
the time Python takes to import YAML, not after the 10-30 s torch import (``benchmarks/time_to_error.py``).

What only the method knows (a value's range, a tokeniser's length) is still checked by its datamodule, before the run
directory exists (:mod:`zoo.core.preflight`). Shipped files under ``data/`` are not read here: they are known to be
good, and reading the large ones would slow every run. Imports nothing heavy.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: A file larger than this (bytes) says it is being checked, so a long read is never silent.
ANNOUNCE_BYTES = 20_000_000
#: The file names each :class:`~zoo.core.constraints.DataFile` kind reads (anything else is left to the datamodule).
SUFFIXES = {"csv": (".csv", ".csv.gz"), "jsonl": (".jsonl", ".jsonl.gz")}


def _needed_columns(spec: dict, block: dict) -> list[str]:
    """The spec's fixed columns, then those its ``column_args`` name in ``block`` (a list value: each item)."""
    out = list(spec.get("columns") or [])
    for arg in spec.get("column_args") or []:
        value = block.get(arg)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and v and v not in out:
                out.append(v)
    return out


def check_file(path: Path, spec: dict, block: dict) -> None:
    """Read ``path`` as ``spec`` (a table's ``file`` entry) describes, with the columns ``block`` names.

    Raises:
        DataError: ``path:line: ...`` from the shared readers.
    """
    from zoo.core.data import read_csv_rows, read_jsonl

    need = _needed_columns(spec, block)
    if spec["kind"] == "csv":
        read_csv_rows(path, required=need)
    else:
        read_jsonl(path, required=need, types=dict.fromkeys(spec.get("text") or [], str))


def check_data_files(table: dict | None, data: dict) -> None:
    """Check each user file that a ``data:`` argument with a ``file`` spec names (one path or a list of paths).

    Args:
        table: the method's table (``zoo.core.schema.method_schema``); None checks nothing.
        data: the recipe's ``data:`` block.

    Raises:
        DataError: the first bad file, as ``file:line: ...`` with ``(recipe key: data.<key>)`` appended
            (:func:`zoo.core.preflight.with_recipe_key`, as for the datamodule's own errors).
    """
    from zoo.core.data import DataError
    from zoo.core.preflight import with_recipe_key
    from zoo.core.userdata import is_shipped

    args = ((table or {}).get("datamodule") or {}).get("args") or {}
    for key, spec in args.items():
        file = spec.get("file")
        value = data.get(key)
        if not file or value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            p = Path(str(item))
            if not p.name.lower().endswith(SUFFIXES[file["kind"]]) or not p.is_file() or is_shipped(p):
                continue
            if (size := p.stat().st_size) > ANNOUNCE_BYTES:  # logging is not set up yet: a plain line
                print(f"checking data.{key} {p} ({size / 1e6:.0f} MB) ...", file=sys.stderr, flush=True)
            try:
                check_file(p, file, data)
            except DataError as e:
                raise with_recipe_key(e, data) from None
