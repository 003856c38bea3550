"""Daily feature series (the PuLSE site's JSON schema, or a CSV) and the Reddit posts reader, validated.

A series is ``T`` consecutive-or-gapped days with ``n_posts[t]`` posts and, per feature ``i``, ``counts[i, t]`` =
posts whose SAE activation on feature ``i`` is non-zero (paper §4.2 "daily fraction of posts with non-zero
activation"). Bad input fails naming the file, line and column (JSON: line 1, the column of the value, and its key
path) before anything runs; missing days are reported as gaps, not filled.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from zoo.core.constraints import Cell, DataFile, Range
from zoo.core.data import DataError, read_jsonl
from zoo.core.datafiles import read_declared

_log = logging.getLogger("zoo")

#: OpenAI release dates the trends are anchored at (paper App. B.2; notes §4.4), with short names.
RELEASES: dict[str, str] = {
    "2023-03-01": "ChatGPT API",
    "2023-05-12": "plugins",
    "2023-07-06": "GPT-4 + Code Interpreter",
    "2023-09-25": "voice",
    "2023-11-06": "GPT-4 Turbo",
    "2024-01-10": "GPT Store",
    "2024-05-13": "GPT-4o",
    "2024-07-30": "Advanced Voice",
    "2024-09-12": "o1",
    "2025-01-31": "o3-mini",
    "2025-04-16": "o3/o4-mini",
    "2025-08-07": "GPT-5",
}
PAPER_WINDOW = ("2023-01-01", "2025-11-30")


@dataclass
class FeatureSeries:
    """Daily counts. ``dates`` ISO strings ``(T,)``; ``n_posts`` int ``(T,)``; ``counts`` int ``(F, T)`` for the
    features ``idx`` (``(F,)``) named ``labels``; ``day_error`` float ``(T,)`` (NaN where unknown); ``gaps``: lists
    ``[first_missing, last_missing]`` of absent days; ``source``: file it came from."""

    dates: list[str]
    n_posts: np.ndarray
    counts: np.ndarray
    idx: list[int]
    labels: list[str]
    day_error: np.ndarray
    source: str = ""
    gaps: list[list[str]] = field(default_factory=list)

    @property
    def fractions(self) -> np.ndarray:
        """``counts / n_posts`` ``(F, T)`` (0 on a day without posts)."""
        return self.counts / np.maximum(self.n_posts, 1)[None, :]

    def row(self, feature: int) -> int:
        """Row of feature ``idx == feature``; raises KeyError naming the known range."""
        try:
            return self.idx.index(int(feature))
        except ValueError:
            raise KeyError(f"{self.source}: no feature {feature} (have {min(self.idx)}..{max(self.idx)})") from None

    def window(self, start: str | None, end: str | None) -> FeatureSeries:
        """Days with ``start <= date <= end`` (ISO strings; None = open)."""
        keep = np.array([(start is None or d >= start) and (end is None or d <= end) for d in self.dates])
        if not keep.any():
            raise DataError(
                f"{self.source}: no days between {start} and {end} (its days: {self.dates[0]} to "
                f"{self.dates[-1]}; data.window sets the replay's days)"
            )
        dates = [d for d, k in zip(self.dates, keep) if k]
        return FeatureSeries(
            dates,
            self.n_posts[keep],
            self.counts[:, keep],
            list(self.idx),
            list(self.labels),
            self.day_error[keep],
            self.source,
            find_gaps(dates),
        )

    def days(self) -> np.ndarray:
        """Days since the first date ``(T,)`` float (gaps keep their calendar distance)."""
        return np.array([(_date(d) - _date(self.dates[0])).days for d in self.dates], dtype=float)


def _date(s: str) -> dt.date:
    return dt.date.fromisoformat(s)


def find_gaps(dates: list[str]) -> list[list[str]]:
    """Missing calendar days between consecutive ``dates`` as ``[[first_missing, last_missing], ...]``."""
    gaps = []
    for a, b in itertools.pairwise(dates):
        da, db = _date(a), _date(b)
        if (db - da).days > 1:
            gaps.append([(da + dt.timedelta(1)).isoformat(), (db - dt.timedelta(1)).isoformat()])
    return gaps


def _array_column(text: str, key_pos: int, i: int) -> int:
    """1-based column of element ``i`` of the JSON array that starts after ``key_pos`` in ``text`` (one line)."""
    pos, depth, k = text.index("[", key_pos) + 1, 0, 0
    while k < i and pos < len(text):
        c = text[pos]
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            k += 1
        pos += 1
    return pos + 1


def _key_positions(text: str, key: str) -> list[int]:
    out, start = [], 0
    while (p := text.find(f'"{key}"', start)) >= 0:
        out.append(p)
        start = p + 1
    return out


def _check(dates, n_posts, counts, where) -> None:
    """Shared checks; ``where(kind, i, f)`` -> ``'file:line:col: key'`` for the failing value."""
    seen = {}
    for t, d in enumerate(dates):
        try:
            _date(str(d))
        except ValueError:
            raise DataError(f"{where('date', t, None)}: bad date {d!r} (want YYYY-MM-DD)") from None
        if d in seen:
            raise DataError(f"{where('date', t, None)}: duplicate date {d} (first at row {seen[d] + 1})")
        if seen and d < dates[t - 1]:
            raise DataError(f"{where('date', t, None)}: date {d} is before the previous {dates[t - 1]}")
        seen[d] = t
    for t, n in enumerate(n_posts):
        if not float(n).is_integer() or n < 0:
            raise DataError(f"{where('n_posts', t, None)}: n_posts must be an integer >= 0, got {n}")
    bad = np.argwhere((counts < 0) | (counts > n_posts[None, :]) | (counts != np.round(counts)))
    if len(bad):
        f, t = map(int, bad[0])
        raise DataError(
            f"{where('count', t, f)}: count {counts[f, t]:g} is not an integer in [0, n_posts = {int(n_posts[t])}]"
        )


def read_series_json(path: str | Path) -> FeatureSeries:
    """The site's ``feature_series*.json``: ``{dates[T], n_posts[T], day_error[T] (optional, null allowed),
    features: [{idx, label, n_active[T]}]}``.

    Raises:
        DataError: ``file:1:col: key`` for unreadable JSON, a missing key, a length mismatch, a bad / duplicate /
            unsorted date, a negative or non-integer ``n_posts``, or a count < 0 or > ``n_posts``.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    text = path.read_text(encoding="utf-8")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}:{e.colno}: invalid JSON ({e.msg})") from None
    for key in ("dates", "n_posts", "features"):
        if key not in obj:
            raise DataError(f"{path}:1: missing key {key!r}")
    dates, n_posts = [str(d) for d in obj["dates"]], np.asarray(obj["n_posts"], dtype=float)
    T = len(dates)
    feats = obj["features"]
    for f, feat in enumerate(feats):
        for key in ("idx", "n_active"):
            if key not in feat:
                raise DataError(f"{path}:1: features[{f}]: missing key {key!r}")
        if len(feat["n_active"]) != T:
            raise DataError(f"{path}:1: features[{f}].n_active has {len(feat['n_active'])} days, dates has {T}")
    if len(n_posts) != T:
        raise DataError(f"{path}:1: n_posts has {len(n_posts)} days, dates has {T}")
    counts = np.asarray([f["n_active"] for f in feats], dtype=float).reshape(len(feats), T)

    def where(kind, t, f):
        key, pos = {"date": ("dates", None), "n_posts": ("n_posts", None), "count": ("n_active", f)}[kind]
        positions = _key_positions(text, key)
        col = _array_column(text, positions[pos or 0], t) if positions else 0
        name = f"features[{f}].n_active[{t}]" if kind == "count" else f"{key}[{t}]"
        return f"{path}:1:{col}: {name}"

    _check(dates, n_posts, counts, where)
    err = obj.get("day_error") or [None] * T
    day_error = np.array([np.nan if e is None else float(e) for e in err], dtype=float)
    series = FeatureSeries(
        dates,
        n_posts.astype(np.int64),
        counts.astype(np.int64),
        [int(f["idx"]) for f in feats],
        [str(f.get("label", f["idx"])) for f in feats],
        day_error,
        str(path),
        find_gaps(dates),
    )
    _report_gaps(series)
    return series


#: A count in a series CSV: a whole number >= 0.
COUNT = Cell("integer", Range(0))
#: A user's series CSV (``data.series_path``): ``date``, ``n_posts`` and one count column per feature, every count an
#: integer >= 0 (``day_error``, optional, may be blank). Checked before torch too; the dates and each count being at
#: most ``n_posts`` are checked by :func:`read_series_csv`.
SERIES = DataFile("csv", ("date", "n_posts"), types={"n_posts": COUNT, "*": COUNT}, ignore=("day_error",))


def read_series_csv(path: str | Path) -> FeatureSeries:
    """A CSV (``SERIES``) with columns ``date, n_posts``, optional ``day_error``, then one count column per feature
    (the header names the feature: an integer index, or any label, numbered in column order).

    Raises:
        DataError: ``file:line: column`` for a bad / duplicate / unsorted date, a count that is not an integer >= 0
            (``n_posts`` too), or a count > ``n_posts``.
    """
    header, rows = read_declared(path, SERIES)
    feats = [h for h in header if h not in ("date", "n_posts", "day_error")]
    if not rows or not feats:
        raise DataError(f"{path}:1: need at least one data row and one feature column; header is {header}")
    lines = [line for line, _ in rows]
    n_posts = np.array([r["n_posts"] for _, r in rows], dtype=float)
    values = np.array([[r[h] for _, r in rows] for h in feats], dtype=float).reshape(len(feats), len(rows))
    day_error = np.array([float(r["day_error"]) if r.get("day_error", "").strip() else np.nan for _, r in rows])
    dates = [r["date"].strip() for _, r in rows]
    _check(
        dates,
        n_posts,
        values,
        lambda kind, t, f: (
            f"{path}:{lines[t]}: {'date' if kind == 'date' else 'n_posts' if kind == 'n_posts' else feats[f]}"
        ),
    )
    idx = [int(h) if h.isdigit() else k for k, h in enumerate(feats)]
    series = FeatureSeries(
        dates, n_posts.astype(np.int64), values.astype(np.int64), idx, feats, day_error, str(path), find_gaps(dates)
    )
    _report_gaps(series)
    return series


def read_series(path: str | Path) -> FeatureSeries:
    """``.json`` (site schema) or ``.csv``; see :func:`read_series_json` and :func:`read_series_csv`."""
    return read_series_json(path) if str(path).endswith(".json") else read_series_csv(path)


def _report_gaps(series: FeatureSeries) -> None:
    if series.gaps:
        n = sum((_date(b) - _date(a)).days + 1 for a, b in series.gaps)
        _log.warning(
            "%s: %d missing day(s) in %d gap(s), first %s..%s", series.source, n, len(series.gaps), *series.gaps[0]
        )


def read_posts(path: str | Path) -> list[dict]:
    """Posts JSONL: ``title`` (str), ``created_utc`` (int Unix s) required; ``selftext`` (str), ``num_comments``
    (int), ``subreddit`` (str) optional.

    Raises:
        DataError: ``file:line: key`` for a missing or wrongly typed key.
    """
    return read_jsonl(
        path,
        required=("title", "created_utc"),
        types={"title": str, "created_utc": int, "selftext": (str, type(None)), "num_comments": int, "subreddit": str},
    )
