"""EDR event windows: read events (+ labels), group per host or process, cut into windows, split by recording.

Everything in this file is ours (the paper's data pipeline is not public); see the method card.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zoo.core.constraints import Cell, DataFile, Range
from zoo.core.data import DataError, read_jsonl, seeded_split
from zoo.core.datafiles import read_declared
from zoo.methods.watchlog.event_images import RESERVED_KEYS, normalise_value

BENIGN = "none"


#: A labels CSV (``data.labels_path``): ``line`` (1-based line of the events file) and ``label`` 0 or 1 per row,
#: optional ``technique``; checked before torch too (a line missing from the events file is found when both are read).
LABELS = DataFile(
    "csv", ("line", "label"), types={"line": Cell("integer", Range(1)), "label": Cell("choice", choices=("0", "1"))}
)


@dataclass
class EventLog:
    """Events of one file in file order, with optional per-event labels and per-recording techniques.

    Attributes:
        events: the event dicts (``label`` / ``technique`` keys removed).
        lines: 1-based line number of each event in its file (for messages and for citing evidence).
        labels: per-event 0/1, or ``None`` when the input has no labels.
        recordings: per-event recording name (``recording_key`` value, or the file stem when absent).
        techniques: recording -> ATT&CK technique id (only recordings that have one).
    """

    events: list[dict[str, Any]]
    lines: list[int]
    labels: list[int] | None
    recordings: list[str]
    techniques: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Window:
    """A run of consecutive events of one group (host or process) of one recording.

    Attributes:
        event_idx: indices into :attr:`EventLog.events`, in time order (length <= window size).
        recording: the recording name.
        group: the host name or process GUID.
        label: 1 when at least ``min_attack_events`` events are labelled attack, else 0 (-1 when unlabelled).
        technique: the recording's technique when ``label == 1``, else ``"none"``.
    """

    event_idx: tuple[int, ...]
    recording: str
    group: str
    label: int
    technique: str


def _jsonl_line_numbers(path: Path) -> list[int]:
    import gzip

    with gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8") as f:
        return [i for i, line in enumerate(f, 1) if line.strip()]


def load_event_log(
    path: str | os.PathLike,
    labels_path: str | os.PathLike | None = None,
    metadata_path: str | os.PathLike | None = None,
    recording_key: str = "dataset",
) -> EventLog:
    """Read an events JSONL (one flat JSON object per line, any keys) and its labels.

    Labels come from, in order: ``labels_path`` (a CSV with columns ``line`` = 1-based line number in the events
    file and ``label`` in {0, 1}, optional ``technique``; lines not listed are benign), else a ``label`` key in
    the events (the shipped Mordor file), else none (prediction only). Techniques come from ``metadata_path``
    (a JSON list of ``{"dataset", "attack_techniques"}``, the shipped ``datasets.json``), a ``technique``
    column of the labels CSV, or a ``technique`` key in the events.

    Args:
        path: events ``.jsonl`` or ``.jsonl.gz``.
        labels_path: optional labels CSV.
        metadata_path: optional recording metadata JSON.
        recording_key: event key naming the recording (events without it belong to the file's stem).

    Returns:
        The :class:`EventLog`.

    Raises:
        DataError: ``file:line: ...`` for a malformed JSON line, a non-object line, a bad ``label`` value, a labels
            CSV row naming a line that is not in the events file, or a metadata file that is not a list.
    """
    path = Path(path)
    rows = read_jsonl(path)
    lines = _jsonl_line_numbers(path)
    stem = path.name.split(".")[0]
    events, labels, recs, techniques = [], [], [], {}
    has_labels = labels_path is not None or any("label" in r for r in rows[:1000])
    for row, line in zip(rows, lines):
        row = dict(row)
        lab = row.pop("label", 0)
        tech = row.pop("technique", None)
        if lab not in (0, 1, True, False):
            raise DataError(f"{path}:{line}: 'label' must be 0 or 1, got {lab!r}")
        rec = str(row.get(recording_key, stem))
        if tech:
            techniques.setdefault(rec, str(tech))
        events.append(row)
        labels.append(int(lab))
        recs.append(rec)
    if labels_path is not None:
        labels = [0] * len(events)
        line_to_idx = {ln: i for i, ln in enumerate(lines)}
        _, lrows = read_declared(labels_path, LABELS)
        for k, r in lrows:
            ln, lab = r["line"], int(r["label"])
            if ln not in line_to_idx:
                raise DataError(f"{labels_path}:{k}: line {ln} is not an event line of {path}")
            labels[line_to_idx[ln]] = lab
            if r.get("technique"):
                techniques.setdefault(recs[line_to_idx[ln]], r["technique"])
    if metadata_path is not None:
        meta = json.loads(Path(metadata_path).read_text())
        if not isinstance(meta, list):
            raise DataError(f"{metadata_path}:1: expected a JSON list of recordings")
        for k, m in enumerate(meta):
            if "dataset" not in m:
                raise DataError(f"{metadata_path}: record {k} has no 'dataset' key")
            if m.get("attack_techniques"):
                techniques[m["dataset"]] = m["attack_techniques"][0]
    return EventLog(events, lines, labels if has_labels else None, recs, techniques)


def make_windows(
    log: EventLog,
    window: int,
    stride: int | None = None,
    group_by: str = "host",
    min_attack_events: int = 1,
    min_len: int = 1,
) -> list[Window]:
    """Cut each (recording, group) event stream into windows of ``window`` consecutive events (ours).

    Args:
        log: the events.
        window: events per window (frames per clip).
        stride: step between window starts (default ``window``: no overlap).
        group_by: ``host`` (events of one host, ``host`` key) or ``process`` (events of one acting process,
            ``actor_guid`` / ``process_guid`` key); events without the key form one group per recording.
        min_attack_events: attack events a window needs to be labelled malicious.
        min_len: shorter trailing windows are dropped.

    Returns:
        Windows in recording / group / time order.

    Raises:
        ValueError: an unknown ``group_by`` or a non-positive ``window`` / ``stride``.
    """
    if group_by not in ("host", "process"):
        raise ValueError(f"data.group_by: expected 'host' or 'process', got {group_by!r}")
    stride = stride or window
    if window < 1 or stride < 1:
        raise ValueError(f"data.window and data.stride must be >= 1, got {window}, {stride}")
    keys = ("host",) if group_by == "host" else ("actor_guid", "process_guid")
    groups: dict[tuple[str, str], list[int]] = {}
    for i, (ev, rec) in enumerate(zip(log.events, log.recordings)):
        g = next((str(ev[k]) for k in keys if ev.get(k) is not None), "")
        groups.setdefault((rec, g), []).append(i)
    out = []
    for (rec, g), idx in groups.items():
        for start in range(0, len(idx), stride):
            chunk = tuple(idx[start : start + window])
            if len(chunk) < min_len:
                continue
            if log.labels is None:
                lab = -1
            else:
                lab = int(sum(log.labels[i] for i in chunk) >= min_attack_events)
            tech = log.techniques.get(rec, "unknown") if lab == 1 else BENIGN
            out.append(Window(chunk, rec, g, lab, tech))
            if start + window >= len(idx):
                break
    return out


def split_recordings(
    recordings: Sequence[str], fractions: Sequence[float], seed: int, test_recordings: Sequence[str] | None = None
) -> dict[str, list[str]]:
    """Assign whole recordings to train / val / test so no recording is in two splits.

    Args:
        recordings: recording names (duplicates ignored; sorted before the seeded shuffle).
        fractions: ``(train, val)`` fractions; test takes the rest.
        seed: shuffle seed.
        test_recordings: explicit test recordings (then the rest is split train / val by ``fractions``).

    Returns:
        ``{"train": [...], "val": [...], "test": [...]}``.

    Raises:
        DataError: a named test recording that is not present, or fewer than 3 recordings without explicit ones.
    """
    names = sorted(set(recordings))
    if test_recordings:
        missing = sorted(set(test_recordings) - set(names))
        if missing:
            raise DataError(f"data.test_recordings: not in the data: {missing}")
        rest = [n for n in names if n not in set(test_recordings)]
        p = fractions[0] / (fractions[0] + fractions[1])
        tr, va = seeded_split(len(rest), [p, 1.0 - p], seed)
        return {"train": [rest[i] for i in tr], "val": [rest[i] for i in va], "test": sorted(test_recordings)}
    if len(names) < 3:
        raise DataError(
            f"data: need >= 3 recordings to split by recording, got {len(names)} ({names}); give every "
            "event a recording key (data.recording_key, default 'dataset') or list the held-out "
            "recordings in data.test_recordings"
        )
    tr, va, te = seeded_split(len(names), [fractions[0], fractions[1], 1.0 - fractions[0] - fractions[1]], seed)
    return {"train": [names[i] for i in tr], "val": [names[i] for i in va], "test": [names[i] for i in te]}


def window_key(log: EventLog, w: Window) -> tuple:
    """What the model sees of a window, as a hashable key (ours): per event, the sorted ``(key, normalised value)``
    pairs of the rendered keys (:data:`render.RESERVED_KEYS` such as recording, host, time and GUIDs left out;
    values lower-cased with digit runs replaced by ``0``, :func:`render.normalise_value`). Two windows with equal
    keys are drawn as the same clip."""
    return tuple(
        tuple(sorted((k, normalise_value(v)) for k, v in log.events[e].items() if k not in RESERVED_KEYS))
        for e in w.event_idx
    )


def deduplicate_splits(
    log: EventLog, splits: dict[str, list[Window]], order: Sequence[str] = ("train", "val", "test")
) -> dict[str, int]:
    """Drop, in place, every window whose :func:`window_key` already occurs in an earlier split of ``order``.

    Training keeps all its windows; validation loses those equal to a training window; test loses those equal to
    a training or validation window. Afterwards no normalised window is in two splits (repeats inside one split
    stay).

    Returns:
        ``{split: number of windows dropped}``.
    """
    seen: set[tuple] = set()
    dropped = {}
    for name in order:
        keys = [window_key(log, w) for w in splits.get(name, [])]
        kept = [w for w, k in zip(splits.get(name, []), keys) if k not in seen]
        dropped[name] = len(keys) - len(kept)
        if name in splits:
            splits[name] = kept
        seen.update(keys)
    return dropped


def describe_event(event: dict[str, Any]) -> str:
    """One-line human summary of an event (for explanations): ``EID <id> <actor> -> <object>``."""

    def base(v):
        return str(v).replace("/", "\\").split("\\")[-1] if v is not None else None

    actor = base(event.get("image") or event.get("source_image")) or "?"
    obj = (
        base(event.get("target_image"))
        or event.get("target_object")
        or base(event.get("target_filename"))
        or base(event.get("image_loaded"))
        or event.get("destination_hostname")
        or event.get("destination_ip")
        or event.get("query_name")
        or event.get("pipe_name")
        or event.get("command_line")
    )
    head = f"EID {event['event_id']} " if "event_id" in event else ""
    return f"{head}{actor}" + (f" -> {str(obj)[:60]}" if obj else "")
