"""``PulseDataModule``: daily feature series for ``replay``, embedded Reddit text for ``sae``.

Inputs (all paths may be a user's own):

* ``series_path``: daily series, the PuLSE site's JSON (``{dates[T], n_posts[T], day_error[T]?, features: [{idx,
  label, n_active[T]}]}``) or a CSV ``date, n_posts[, day_error], <one count column per feature>``. A bad, duplicate
  or unsorted date, or a count < 0 or > ``n_posts``, fails as ``file:line:column: key``; missing days are reported
  as gaps (``series.gaps``) and kept out of the fit, not filled. ``archive_dir`` holds the paper's four M = 64
  archives ``archive_c{0..3}_feature_series.json`` (same schema) for the accuracy and feature tests.
* ``posts_path``: posts JSONL, one object per line with ``title`` (str) and ``created_utc`` (int, Unix s);
  ``selftext`` (str), ``num_comments`` (int), ``subreddit`` (str) optional. A bad line fails as ``file:line: key``.
  ``comments_path``: optional CSV with ``comment_id, created_time_str (YYYY-mm-dd HH:MM:SS, UTC), body, reply_to,
  subreddit``. Text = title + body (posts) or body (comments); texts under ``min_words`` words are dropped (the
  paper's < 10 words rule); weight = ``log(2 + comments)`` (posts: ``num_comments``; comments: direct replies; ours).
* ``embeddings_path``: instead of text, a ``(N, d)`` float ``.npy`` of precomputed embeddings (the paper's
  137k x 1,536 OpenAI embeddings), weights ``weights_path`` ``(N,)`` ``.npy`` optional (uniform otherwise).

``sae`` batches are ``(embedding (B, d) float32, weight (B,) float32)``; ``replay`` has one placeholder batch (the
analysis reads ``self.series`` and ``self.archives``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import math
from pathlib import Path
from typing import Annotated

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo.core.constraints import DataFile, Fraction, NonNegativeInt, OneOf, PositiveInt
from zoo.core.data import DataError, read_csv_rows, seeded_split
from zoo.methods.pulse.monitor import ARCHIVES
from zoo.methods.pulse.series import SERIES, read_posts, read_series

STAGES = ("sae", "replay")
#: The columns a comments CSV needs (``comments_path``).
COMMENT_COLUMNS = ("comment_id", "created_time_str", "body", "reply_to")


def load_texts(posts_path: str, comments_path: str | None = None, min_words: int = 10, limit: int = 0) -> list[dict]:
    """Texts with ``text``, ``date`` (ISO day, UTC), ``subreddit``, ``weight`` and ``kind`` (post | comment).

    Raises:
        DataError: from the readers (``file:line: key``), or a comment with a bad timestamp.
    """
    out = []
    for p in read_posts(posts_path):
        text = (p["title"] + "\n" + (p.get("selftext") or "")).strip()
        out.append(
            {
                "text": text,
                "date": dt.datetime.fromtimestamp(p["created_utc"], dt.UTC).date().isoformat(),
                "subreddit": p.get("subreddit", ""),
                "weight": math.log(2 + int(p.get("num_comments", 0))),
                "kind": "post",
            }
        )
    if comments_path:
        _, rows = read_csv_rows(comments_path, required=COMMENT_COLUMNS)
        replies: dict[str, int] = {}
        for r in rows:
            replies[r["reply_to"]] = replies.get(r["reply_to"], 0) + 1
        for line, r in enumerate(rows, 2):
            try:
                day = dt.datetime.strptime(r["created_time_str"].strip(), "%Y-%m-%d %H:%M:%S").date().isoformat()
            except ValueError:
                raise DataError(
                    f"{comments_path}:{line}: created_time_str: bad timestamp {r['created_time_str']!r}"
                ) from None
            out.append(
                {
                    "text": r["body"].strip(),
                    "date": day,
                    "subreddit": r.get("subreddit", ""),
                    "weight": math.log(2 + replies.get(r["comment_id"], 0)),
                    "kind": "comment",
                }
            )
    out = [t for t in out if len(t["text"].split()) >= min_words]
    return out[:limit] if limit else out


log = logging.getLogger(__name__)
SHIPPED_SERIES = "data/pulse-aggregates/feature_series_historical.json"
SHIPPED_ARCHIVES = "data/pulse-aggregates"


class PulseDataModule(L.LightningDataModule):
    """See the module docstring for the schemas.

    Args:
        stage: ``sae`` | ``replay`` (the recipe ties it to ``model.stage``).
        series_path, archive_dir: the daily series and the archives folder (``replay``).
        window: ``[first, last]`` ISO days of the analysis (the paper's 2023-01-01 … 2025-11-30).
        posts_path, comments_path, min_words, limit_texts: the text (``sae``); ``limit_texts`` > 0 keeps the first n.
        embeddings_path, weights_path: precomputed embeddings instead of text (``sae``, paper scale).
        embedding_cache: where MiniLM embeddings of the texts are cached (keyed by a hash of the texts).
        val_fraction, batch_size, seed: the ``sae`` split and loader.
    Raises:
        ValueError: an unknown stage. DataError: bad input rows (from ``setup``).
    """

    def __init__(
        self,
        stage: Annotated[str, OneOf(STAGES)] = "replay",
        series_path: Annotated[str | None, SERIES] = SHIPPED_SERIES,
        archive_dir: str | None = SHIPPED_ARCHIVES,
        window: list[str] | None = None,
        posts_path: Annotated[str | None, DataFile("jsonl", ("title", "created_utc"), text=("title",))] = (
            "data/reddit-chatgpt/posts.jsonl"
        ),
        comments_path: Annotated[str | None, DataFile("csv", COMMENT_COLUMNS)] = "data/reddit-chatgpt/comments.csv",
        min_words: NonNegativeInt = 10,
        limit_texts: NonNegativeInt = 0,
        embeddings_path: str | None = None,
        weights_path: str | None = None,
        embedding_cache: str = "runs/.cache/pulse",
        val_fraction: Fraction = 0.1,
        batch_size: PositiveInt = 256,
        seed: NonNegativeInt = 0,
    ):
        super().__init__()
        if stage not in STAGES:
            raise ValueError(f"data.stage: {stage!r} is not one of {STAGES}")
        if series_path != SHIPPED_SERIES and archive_dir == SHIPPED_ARCHIVES:
            # a user's own series: the shipped archives' alarms would describe r/ChatGPT, not it
            log.info(
                "data.series_path is the user's: the shipped archives are not replayed (set data.archive_dir "
                "to replay archives of the same features)"
            )
            archive_dir = None
        self.stage, self.series_path, self.archive_dir = stage, series_path, archive_dir
        self.window = list(window) if window else [None, None]
        self.posts_path, self.comments_path, self.min_words, self.limit_texts = (
            posts_path,
            comments_path,
            min_words,
            limit_texts,
        )
        self.embeddings_path, self.weights_path, self.embedding_cache = embeddings_path, weights_path, embedding_cache
        self.val_fraction, self.batch_size, self.seed = val_fraction, batch_size, seed
        self.series = self.full_series = None
        self.archives: dict = {}
        self.texts: list[dict] = []
        self.X = self.w = None

    def _warn_short_series(self) -> None:
        """Warn (naming ``data.series_path`` and ``data.window``) when the series covers only part of the window: the
        replay then tests the days it has, and a breakpoint or alarm date outside them cannot be found."""
        first, last = self.window
        have = self.full_series.dates
        gaps = [
            f"ends {have[-1]}, before the window's end {last}" if last and have[-1] < last else "",
            f"starts {have[0]}, after the window's start {first}" if first and have[0] > first else "",
        ]
        if any(gaps):
            log.warning(
                "data.series_path %s %s (data.window %s): the replay covers %s to %s only",
                self.series_path,
                " and ".join(g for g in gaps if g),
                self.window,
                self.series.dates[0],
                self.series.dates[-1],
            )

    def setup(self, stage: str | None = None) -> None:
        if self.series is not None or self.X is not None:
            return
        if self.stage == "replay":
            self.full_series = read_series(self.series_path)
            self.series = self.full_series.window(*self.window)
            self._warn_short_series()
            if self.archive_dir:
                self.archives = {
                    k: read_series(Path(self.archive_dir) / f"archive_{k}_feature_series.json") for k in ARCHIVES
                }
            return
        if self.embeddings_path:
            self.X = torch.from_numpy(np.load(self.embeddings_path).astype(np.float32))
            w = np.load(self.weights_path) if self.weights_path else np.ones(len(self.X))
            if len(w) != len(self.X):
                raise DataError(f"{self.weights_path}: {len(w)} weights for {len(self.X)} embeddings")
            self.w = torch.from_numpy(np.asarray(w, np.float32))
            return
        if not self.posts_path:
            raise DataError("data.posts_path: the sae stage needs posts (or data.embeddings_path)")
        self.texts = load_texts(self.posts_path, self.comments_path, self.min_words, self.limit_texts)
        if len(self.texts) < 8:
            raise DataError(f"{self.posts_path}: only {len(self.texts)} texts with >= {self.min_words} words")
        self.X = self._embed([t["text"] for t in self.texts])
        self.w = torch.tensor([t["weight"] for t in self.texts], dtype=torch.float32)

    def _embed(self, texts: list[str]) -> torch.Tensor:
        from zoo.models.text_embedding import embed_texts

        key = hashlib.sha256("\x1e".join(texts).encode()).hexdigest()[:16]
        path = Path(self.embedding_cache) / f"minilm-{key}.npy"
        if path.is_file():
            return torch.from_numpy(np.load(path))
        X = embed_texts(texts)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, X.numpy())
        return X

    def _split(self) -> tuple[list[int], list[int]]:
        if self.val_fraction <= 0:
            return list(range(len(self.X))), []
        tr, va = seeded_split(len(self.X), [1 - self.val_fraction, self.val_fraction], self.seed)
        return tr, va

    def train_dataloader(self):
        if self.stage == "replay":
            return DataLoader(TensorDataset(torch.zeros(1)), batch_size=1)
        tr, _ = self._split()
        g = torch.Generator().manual_seed(self.seed)
        return DataLoader(TensorDataset(self.X[tr], self.w[tr]), batch_size=self.batch_size, shuffle=True, generator=g)

    def val_dataloader(self):
        if self.stage == "replay":
            return []
        _, va = self._split()
        return DataLoader(TensorDataset(self.X[va], self.w[va]), batch_size=max(len(va), 1)) if va else []
