"""``WatchLogDataModule``: real Sysmon windows as event videos (and as serialised tokens for the baseline).

Input schema (``path``): JSON lines, one flat JSON object per event, any keys; values are strings, numbers,
booleans or null (lists / objects are JSON-encoded before drawing). Events are taken in file order within each group
(the shipped file is sorted by ``utc_time``). Optional keys: ``label`` (0/1 per event), ``technique``, the
``recording_key`` (default ``dataset``), ``host``, ``actor_guid`` / ``process_guid``. A malformed line raises
``DataError("file:line: ...")``. Labels may instead come from a CSV (``labels_path``, columns
``line,label[,technique]``).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, WeightedRandomSampler

from zoo.core.constraints import DataFile, Fraction, NonNegativeInt, PositiveInt, Probability
from zoo.core.data import DataError, repo_root
from zoo.methods.watchlog.event_images import RESERVED_KEYS, SYSMON_LAYOUT, EventRenderer, normalise_value
from zoo.methods.watchlog.windows import (
    BENIGN,
    LABELS,
    EventLog,
    Window,
    deduplicate_splits,
    load_event_log,
    make_windows,
    split_recordings,
)

SHIPPED_PATH = "data/mordor-sysmon/events.jsonl.gz"
DEFAULT_SPLIT = (0.7, 0.1)

_WORD = re.compile(r"[a-z0-9_.\-]+|[^a-z0-9_.\-\s]")


def serialise_tokens(
    event: dict[str, Any], vocab_size: int, max_len: int, layout: Sequence[str] = SYSMON_LAYOUT
) -> list[int]:
    """The serialised-text view of an event for the token-sequence baseline (ours).

    ``key=value`` pairs (keys in the renderer's layout order, so truncation drops the same low-priority fields the
    image puts last, then the other keys sorted; reserved keys dropped; values normalised as for rendering) are
    split into words and punctuation; each token is hashed with CRC-32 into ``[2, vocab_size)`` (0 = padding,
    1 = event separator, which starts every event). Truncated to ``max_len`` tokens.

    Returns:
        Token ids, ``1 <= len <= max_len``.
    """
    ids = [1]
    order = [k for entry in layout for k in entry.split("|") if k != "*"]
    for k in [k for k in order if k in event] + sorted(k for k in event if k not in set(order)):
        if k in RESERVED_KEYS or event[k] is None:
            continue
        for tok in _WORD.findall(f"{k} = {normalise_value(event[k])}"):
            ids.append(2 + zlib.crc32(tok.encode("utf-8")) % (vocab_size - 2))
            if len(ids) >= max_len:
                return ids
    return ids


def explanation_target(label: int, technique: str, evidence: Sequence[int]) -> str:
    """The SFT answer (ours): ``verdict: <malicious|benign> ; technique: <id|none> ; evidence: #i #j ...``.

    Args:
        label: window label (1 = malicious).
        technique: ATT&CK technique id, or ``none``.
        evidence: frame indices (0-based within the window) of attack events to cite (at most 4 are listed).
    """
    if label != 1:
        return "verdict: benign ; technique: none ; evidence: none"
    ev = " ".join(f"#{i}" for i in list(evidence)[:4]) or "none"
    return f"verdict: malicious ; technique: {technique.lower()} ; evidence: {ev}"


def caption_target(events: Sequence[dict[str, Any]], n: int = 4) -> str:
    """Stage-2 alignment caption (ours): ``#i eid <id> <actor basename>`` for ``n`` evenly spaced events."""
    if not events:
        return "empty"
    picks = sorted({round(k * (len(events) - 1) / max(1, n - 1)) for k in range(n)})
    parts = []
    for i in picks:
        e = events[i]
        actor = str(e.get("image") or e.get("source_image") or "?").replace("/", "\\").split("\\")[-1].lower()
        parts.append(f"#{i} eid {e.get('event_id', '?')} {actor}")
    return " ; ".join(parts)


class WindowDataset(Dataset):
    """Windows as tensors.

    Each item is a dict with ``frames`` ``(T, H, W)`` float32 in [0, 1] (zeros past the window's end),
    ``mask`` ``(T,)`` bool (True = a real event), ``event_labels`` ``(T,)`` long (-1 = padding or unlabelled),
    ``label`` long (-1 = unlabelled), ``target`` (the explanation string), ``caption`` (stage-2 text), ``index``
    (window index) and, when ``token_len > 0``, ``tokens`` ``(T, token_len)`` long.

    Args:
        hits: pre-computed :meth:`EventRenderer.pixel_hits` per event, or None to render from the raw events.
        render: False leaves ``frames`` all zero (the token baseline does not need them).
    """

    def __init__(
        self,
        windows: list[Window],
        log: EventLog,
        renderer: EventRenderer,
        hits: list[tuple[np.ndarray, np.ndarray]] | None,
        n_frames: int,
        token_len: int = 0,
        vocab_size: int = 8192,
        render: bool = True,
    ):
        self.windows, self.log, self.renderer, self.hits = windows, log, renderer, hits
        self.n_frames, self.token_len, self.vocab_size, self.render = n_frames, token_len, vocab_size, render

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, i: int) -> dict[str, Any]:
        w = self.windows[i]
        T, r = self.n_frames, self.renderer
        frames = np.zeros((T, r.height, r.width), np.float32)
        ev_lab = torch.full((T,), -1, dtype=torch.long)
        for t, e in enumerate(w.event_idx):
            if self.render:
                frames[t] = r.image_from_hits(
                    *(self.hits[e] if self.hits is not None else r.pixel_hits(self.log.events[e]))
                )
            if self.log.labels is not None:
                ev_lab[t] = self.log.labels[e]
        mask = torch.zeros(T, dtype=torch.bool)
        mask[: len(w.event_idx)] = True
        evidence = [t for t in range(len(w.event_idx)) if ev_lab[t] == 1]
        item = {
            "frames": torch.from_numpy(frames),
            "mask": mask,
            "event_labels": ev_lab,
            "label": torch.tensor(w.label),
            "target": explanation_target(w.label, w.technique, evidence),
            "caption": caption_target([self.log.events[e] for e in w.event_idx]),
            "index": torch.tensor(i),
        }
        if self.token_len:
            tok = torch.zeros((T, self.token_len), dtype=torch.long)
            for t, e in enumerate(w.event_idx):
                ids = serialise_tokens(self.log.events[e], self.vocab_size, self.token_len)
                tok[t, : len(ids)] = torch.tensor(ids)
            item["tokens"] = tok
        return item


def balanced_sampler(labels: Sequence[int], malicious_fraction: float, seed: int) -> WeightedRandomSampler:
    """Sample windows with replacement so that each draw is malicious with probability ``malicious_fraction``.

    Each malicious window gets weight ``f / n_mal`` and each benign one ``(1 - f) / n_ben``; one epoch is
    ``len(labels)`` draws from a generator seeded with ``seed``.

    Raises:
        ValueError: no malicious or no benign window (the fraction cannot be met).
    """
    lab = torch.tensor(list(labels))
    n_mal, n_ben = int((lab == 1).sum()), int((lab == 0).sum())
    if not n_mal or not n_ben:
        raise ValueError(
            f"data.malicious_fraction={malicious_fraction} needs malicious and benign training "
            f"windows; got {n_mal} malicious, {n_ben} benign"
        )
    w = torch.where(lab == 1, malicious_fraction / n_mal, (1 - malicious_fraction) / n_ben).double()
    return WeightedRandomSampler(w, len(lab), replacement=True, generator=torch.Generator().manual_seed(seed))


class WatchLogDataModule(L.LightningDataModule):
    """Sysmon (or any EDR JSONL) windows split by recording.

    Args:
        path: events JSONL(.gz), relative to the repo root or absolute (default: the shipped Mordor telemetry).
        labels_path: optional labels CSV (``line,label[,technique]``).
        metadata_path: optional recording metadata JSON (``datasets.json``: technique per recording).
        recording_key: event key naming the recording; splits never cut a recording.
        window: events (frames) per window.
        stride: step between window starts for val / test / predict (default ``window``).
        train_stride: step for training windows (smaller = overlapping windows, more training clips).
        group_by: ``host`` or ``process`` (see :func:`make_windows`).
        min_attack_events: attack events needed for a malicious window.
        split: ``[train, val]`` fractions of recordings; test takes the rest. ``None`` (default): on the shipped
            Mordor file the project's split ``[0.7, 0.1]``; on any other file (a user's recordings) **every window is
            a test window** (train and val empty: ``zoo eval <id> data.path=my.jsonl`` scores all of the file, never
            a silent re-split); give ``split`` or ``test_recordings`` to train on a user's file.
        test_recordings: explicit held-out recordings (overrides the seeded test split; the rest is split train /
            val by ``split``, default ``[0.7, 0.1]``).
        seed: split seed.
        layout: slot entries (default :data:`SYSMON_LAYOUT`); canvas: ``[height, width, rows, cols]``.
        token_len: serialised tokens per event for the token baseline (0 = do not build tokens).
        vocab_size: hashed vocabulary size of the token baseline.
        batch_size, num_workers: loader settings.
        deduplicate: drop validation windows drawn identically to a training window and test windows drawn
            identically to a training or validation window (:func:`windows.window_key`: rendered keys, digits
            normalised), so no clip is in two splits; the counts are in :attr:`duplicates_dropped`.
        limit_windows: keep at most this many windows per split (evenly spaced; for tiny runs), 0 = all.
        malicious_fraction: when > 0, training batches are drawn with replacement so that this expected fraction
            of windows is malicious (ours: without it the SFT answers are ~80% the one benign template and the
            decoder learns to write only that); 0 = plain shuffling. Validation and test are never resampled.

    Raises:
        DataError: malformed input (``file:line``); ValueError: bad split / window settings, ``malicious_fraction``
        outside ``[0, 1)``, or a positive ``malicious_fraction`` with no malicious or no benign training window.
    """

    def __init__(
        self,
        path: Annotated[str, DataFile("jsonl")] = "data/mordor-sysmon/events.jsonl.gz",
        labels_path: Annotated[str | None, LABELS] = None,
        metadata_path: str | None = "data/mordor-sysmon/datasets.json",
        recording_key: str = "dataset",
        window: PositiveInt = 16,
        stride: PositiveInt | None = None,
        train_stride: PositiveInt | None = None,
        group_by: Literal["host", "process"] = "host",
        min_attack_events: PositiveInt = 1,
        split: Sequence[Probability] | None = None,
        test_recordings: Sequence[str] | None = None,
        seed: NonNegativeInt = 0,
        layout: Sequence[str] | None = None,
        canvas: Sequence[PositiveInt] = (32, 128, 4, 4),
        token_len: NonNegativeInt = 0,
        vocab_size: PositiveInt = 8192,
        batch_size: PositiveInt = 32,
        num_workers: NonNegativeInt = 0,
        limit_windows: NonNegativeInt = 0,
        malicious_fraction: Fraction = 0.0,
        deduplicate: bool = True,
    ):
        super().__init__()
        self.save_hyperparameters()
        if not 0 <= malicious_fraction < 1:
            raise ValueError(f"data.malicious_fraction must lie in [0, 1), got {malicious_fraction}")
        h, w, rows, cols = canvas
        self.renderer = EventRenderer(tuple(layout or SYSMON_LAYOUT), h, w, rows, cols)
        self.splits: dict[str, WindowDataset] = {}
        self.recording_split: dict[str, list[str]] = {}
        self.duplicates_dropped: dict[str, int] = {}

    def _resolve(self, p: str | None) -> str | None:
        if p is None:
            return None
        q = Path(p)  # the user's path first, then a shipped one; a missing file is named as the user gave it
        return str(repo_root() / q if not q.is_absolute() and not q.exists() and (repo_root() / q).exists() else q)

    def setup(self, stage: str | None = None) -> None:
        """Read, render and window the data once (idempotent). A module whose ``log_`` and ``hits`` are already set
        (:meth:`resplit`) windows those instead of reading the file again."""
        if self.splits:
            return
        hp = self.hparams
        if not hasattr(self, "log_"):
            meta = self._resolve(hp.metadata_path)
            if meta is not None and not Path(meta).exists():
                meta = None
            self.log_ = load_event_log(self._resolve(hp.path), self._resolve(hp.labels_path), meta, hp.recording_key)
            self.hits = [self.renderer.pixel_hits(e) for e in self.log_.events]
        if hp.split is None and not hp.test_recordings and not self.is_shipped_data():
            names = sorted(set(self.log_.recordings))
            self.recording_split = {"train": [], "val": [], "test": names}
        else:
            self.recording_split = split_recordings(
                self.log_.recordings, hp.split or DEFAULT_SPLIT, hp.seed, hp.test_recordings
            )
        by_split = {}
        for name, recs in self.recording_split.items():
            stride = hp.train_stride if name == "train" else hp.stride
            keep = set(recs)
            by_split[name] = [
                w
                for w in make_windows(self.log_, hp.window, stride, hp.group_by, hp.min_attack_events)
                if w.recording in keep
            ]
        if hp.deduplicate:
            self.duplicates_dropped = deduplicate_splits(self.log_, by_split)
        for name, ws in by_split.items():
            if hp.limit_windows and len(ws) > hp.limit_windows:
                step = len(ws) / hp.limit_windows
                ws = [ws[int(k * step)] for k in range(hp.limit_windows)]
            self.splits[name] = WindowDataset(
                ws, self.log_, self.renderer, self.hits, hp.window, hp.token_len, hp.vocab_size
            )

    def is_shipped_data(self) -> bool:
        """Whether ``path`` is the shipped Mordor telemetry (where ``split=None`` means the project's split)."""
        return Path(self._resolve(self.hparams.path)).resolve() == (repo_root() / SHIPPED_PATH).resolve()

    def resplit(self, **changes: Any) -> WatchLogDataModule:
        """A new data module with ``changes`` to its arguments (``test_recordings=[...]``, ``seed=...``) that reuses
        this one's events and rendered pixels (no second read). Window-shape arguments must stay equal.

        Raises:
            ValueError: a change to ``path``, ``labels_path``, ``layout``, ``canvas`` or ``recording_key``.
        """
        fixed = {"path", "labels_path", "metadata_path", "layout", "canvas", "recording_key"} & set(changes)
        if fixed:
            raise ValueError(f"resplit cannot change {sorted(fixed)}; build a new WatchLogDataModule")
        self.setup()
        new = WatchLogDataModule(**{**dict(self.hparams), **changes})
        new.log_, new.hits = self.log_, self.hits
        new.setup()
        return new

    def techniques(self) -> list[str]:
        """Sorted technique ids of malicious training windows (lower-case), with ``none`` first."""
        self.setup()
        seen = {w.technique.lower() for w in self.splits["train"].windows if w.label == 1}
        return [BENIGN] + sorted(seen - {BENIGN})

    def _loader(self, name: str, shuffle: bool) -> DataLoader:
        self.setup()
        return DataLoader(
            self.splits[name],
            batch_size=self.hparams.batch_size,
            shuffle=shuffle,
            num_workers=self.hparams.num_workers,
            persistent_workers=self.hparams.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        self.setup()
        if not self.splits["train"].windows:
            raise DataError(
                f"data.path={self.hparams.path}: no training windows: with data.split=null a file other "
                "than the shipped Mordor data is evaluated whole (every window is a test window); give "
                "data.split=[0.7,0.1] or data.test_recordings=[...] to train on it"
            )
        frac = self.hparams.malicious_fraction
        if not frac:
            return self._loader("train", True)
        ds = self.splits["train"]
        return DataLoader(
            ds,
            batch_size=self.hparams.batch_size,
            num_workers=self.hparams.num_workers,
            sampler=balanced_sampler([w.label for w in ds.windows], frac, self.hparams.seed),
            persistent_workers=self.hparams.num_workers > 0,
        )

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", False)
