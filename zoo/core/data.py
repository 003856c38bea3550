"""Shared data helpers: line-numbered readers, seeded splits, seeding."""

from __future__ import annotations

import csv
import gzip
import json
import os
import random
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from zoo.core.errors import UserError


class DataError(UserError, ValueError):
    """Bad input data; the message starts with ``file:line:`` so the row can be found."""


def text_lines(path: Path):
    """The file's lines as text (``.gz`` decompressed), decoded one at a time so a byte that is not UTF-8 is named
    with its line.

    Raises:
        DataError: ``path:line: not UTF-8 text (byte 0x.. at column N)``.
    """
    with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                yield raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise DataError(
                    f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column "
                    f"{e.start + 1}); save the file as UTF-8"
                ) from None


def read_jsonl(
    path: str | os.PathLike, required: Sequence[str] = (), types: dict[str, type | tuple] | None = None
) -> list[dict[str, Any]]:
    """Read a JSON-lines file (``.gz`` allowed), one object per non-blank line.

    Args:
        path: the file.
        required: keys every row must have.
        types: optional ``key -> type`` checks (e.g. ``{"prompt": str}``).

    Returns:
        The rows, in file order.

    Raises:
        DataError: ``path:line: ...`` for a missing file, invalid JSON, a non-object line, a missing key or a
            wrongly typed value.
    """
    return [row for _, row in read_jsonl_numbered(path, required, types)]


def read_jsonl_numbered(
    path: str | os.PathLike, required: Sequence[str] = (), types: dict[str, type | tuple] | None = None
) -> list[tuple[int, dict[str, Any]]]:
    """:func:`read_jsonl` with each row's line number: ``[(line, row), ...]`` (same errors)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    rows = []
    for lineno, line in enumerate(text_lines(path), 1):
        if not line.strip():
            continue
        row = parse_json_line(line, f"{path}:{lineno}")
        if not isinstance(row, dict):
            raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
        _check_row(row, required, types, f"{path}:{lineno}")
        rows.append((lineno, row))
    return rows


def parse_json_line(line: str, where: str):
    """One line of a JSON-lines file, parsed.

    Raises:
        DataError: ``where: invalid JSON (reason at column N)``, the column counted within this line (a truncated
            line is reported at its end, not at "line 2" of the string).
    """
    try:
        return json.loads(line.rstrip("\r\n"))
    except json.JSONDecodeError as e:
        raise DataError(f"{where}: invalid JSON ({e.msg} at column {e.colno})") from None


def read_csv_rows(
    path: str | os.PathLike, required: Sequence[str] = (), delimiter: str = ","
) -> tuple[list[str], list[dict[str, str]]]:
    """Read a CSV with a header row.

    Returns:
        ``(header, rows)`` where each row maps column name to its raw string.

    Raises:
        DataError: ``path:line: ...`` for a missing file or column, a header naming a column twice, a byte that is
            not UTF-8 or a NUL byte (a binary file), or a row with the wrong number of fields.
    """
    header, numbered = read_csv_numbered(path, required, delimiter)
    return header, [row for _, row in numbered]


def read_csv_numbered(
    path: str | os.PathLike,
    required: Sequence[str] | Callable[[list[str]], Sequence[str]] = (),
    delimiter: str = ",",
) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """:func:`read_csv_rows` with each row's line number (blank lines are skipped but counted).

    Args:
        required: the columns every row needs, or a function of the header that returns them (it may raise
            ``DataError`` itself: a header that fits no accepted layout).

    Returns:
        ``(header, [(line, row), ...])``.

    Raises:
        DataError: as :func:`read_csv_rows`.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    reader = csv.reader(text_lines(path), delimiter=delimiter)
    try:
        header = [h.strip() for h in next(reader)]
        twice = next((h for i, h in enumerate(header) if h in header[:i]), None)
        if twice is not None:
            raise DataError(
                f"{path}:1: column {twice!r} appears twice in the header (columns "
                f"{header.index(twice) + 1} and {header.index(twice, header.index(twice) + 1) + 1}); "
                "every column needs its own name"
            )
        need = required(header) if callable(required) else required
        missing = [c for c in need if c not in header]
        if missing:
            raise DataError(f"{path}:1: missing column(s) {missing}; header is {header}")
        rows = []
        for lineno, rec in enumerate(reader, 2):
            if not rec or all(not x.strip() for x in rec):
                continue
            if len(rec) != len(header):
                raise DataError(f"{path}:{lineno}: {len(rec)} fields, header has {len(header)}")
            rows.append((lineno, dict(zip(header, rec))))
    except StopIteration:
        raise DataError(f"{path}:1: empty file, expected a header row") from None
    except csv.Error as e:  # a NUL byte: a binary file
        raise DataError(f"{path}:{reader.line_num}: not a CSV text line ({e}); is this a binary file?") from None
    return header, rows


def _check_row(row: dict, required: Iterable[str], types: dict | None, where: str) -> None:
    for key in required:
        if key not in row:
            raise DataError(f"{where}: missing key {key!r} (has {sorted(row)})")
    for key, typ in (types or {}).items():
        if key in row and not isinstance(row[key], typ):
            raise DataError(f"{where}: {key!r} should be {typ}, got {type(row[key]).__name__}")


def seeded_split(n: int, fractions: Sequence[float], seed: int) -> list[list[int]]:
    """Shuffle ``range(n)`` with ``seed`` and cut it into parts of the given fractions (the last takes the rest).

    Raises:
        ValueError: fractions that are negative or sum above 1.
    """
    if any(f < 0 for f in fractions) or sum(fractions) > 1 + 1e-9:
        raise ValueError(f"split fractions {list(fractions)} must be >= 0 and sum to <= 1")
    idx = list(range(n))
    random.Random(seed).shuffle(idx)
    parts, start = [], 0
    for i, frac in enumerate(fractions):
        stop = n if i == len(fractions) - 1 else start + int(round(frac * n))
        parts.append(sorted(idx[start:stop]))
        start = stop
    return parts


def set_seed(seed: int) -> None:
    """Seed python, numpy and torch (all ranks the same)."""
    import lightning as L

    L.seed_everything(seed, workers=True, verbose=False)


def cache_dir() -> Path:
    """Where the zoo keeps files it can rebuild (converted bases, embedding caches): ``$ZOO_CACHE``, else
    ``$XDG_CACHE_HOME/zoo``, else ``~/.cache/zoo``."""
    if os.environ.get("ZOO_CACHE"):
        return Path(os.environ["ZOO_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "zoo"


def repo_root() -> Path:
    """The repository root (where ``recipes/`` and ``data/`` live)."""
    return Path(__file__).resolve().parents[2]
