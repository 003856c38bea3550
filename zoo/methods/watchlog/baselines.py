"""WatchLog's baselines (all ours; the paper names no peers): a transformer over the serialised event tokens, a
logistic regression on the window's bag of event tokens, and the labelling heuristic applied directly.

``TokenEncoder`` is what ``WatchLogModule(encoder={"kind": "tokens", ...})`` builds in place of the video encoder
(same detection head, same training); :class:`BagOfEvents` and :func:`label_heuristic_scores` need no training
loop. ``experiments.py detection`` scores all three beside WatchLog on the same windows.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from zoo.methods.watchlog.datamodule import WindowDataset, serialise_tokens


class TokenEncoder(nn.Module):
    """Baseline (ours, after LcaLLM-style serialised-log models): a transformer over all serialised event tokens.

    The ``T`` events' token rows are concatenated into one sequence of ``T * L`` tokens with learned positions;
    full self-attention runs over the whole window (what a text LLM over serialised logs pays); each event's
    tokens are then mean-pooled into one vector.

    Args:
        vocab_size, dim, depth, heads: embedding table and transformer sizes.
        max_tokens: longest ``T * L``.
    """

    def __init__(self, vocab_size: int = 8192, dim: int = 48, depth: int = 2, heads: int = 2, max_tokens: int = 4096):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.pos = nn.Parameter(torch.zeros(max_tokens, dim))
        nn.init.trunc_normal_(self.pos, std=0.02)
        layer = nn.TransformerEncoderLayer(
            dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True, activation="gelu"
        )
        self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.dim = dim

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Per-event vectors ``(B, T, 1, D)`` from token ids ``(B, T, L)`` (0 = padding).

        Raises:
            ValueError: ``T * L`` longer than ``max_tokens``.
        """
        B, T, L = tokens.shape
        if T * L > self.pos.shape[0]:
            raise ValueError(f"token window {T}x{L} exceeds max_tokens {self.pos.shape[0]}")
        flat = tokens.reshape(B, T * L)
        pad = flat == 0
        pad_all = pad.all(1, keepdim=True)  # an all-padding row attends anyway
        x = self.embed(flat) + self.pos[: T * L]
        x = self.norm(self.blocks(x, src_key_padding_mask=pad & ~pad_all))
        keep = (~pad).to(x.dtype).view(B, T, L, 1)
        pooled = (x.view(B, T, L, -1) * keep).sum(2) / keep.sum(2).clamp(min=1)
        return pooled[:, :, None, :]


class BagOfEvents:
    """Baseline (ours): logistic regression on a window's bag of serialised event tokens.

    Features: each event of the window serialised as for :class:`TokenEncoder` (:func:`serialise_tokens`, up to
    10,000 tokens, hashed into ``vocab_size`` ids), token counts summed over the window, ``log(1 + count)``; a
    scikit-learn ``LogisticRegression(C=1, class_weight="balanced")``.
    """

    def __init__(self, vocab_size: int = 8192):
        self.vocab_size = vocab_size
        self.clf = None

    def features(self, ds: WindowDataset):
        """Sparse ``(n_windows, vocab_size)`` log-count matrix of ``ds`` (scipy CSR)."""
        from scipy.sparse import csr_matrix

        rows, cols, vals = [], [], []
        for r, w in enumerate(ds.windows):
            counts: dict[int, int] = {}
            for e in w.event_idx:
                for t in serialise_tokens(ds.log.events[e], self.vocab_size, 10_000):
                    counts[t] = counts.get(t, 0) + 1
            rows += [r] * len(counts)
            cols += list(counts)
            vals += [math.log1p(c) for c in counts.values()]
        return csr_matrix((vals, (rows, cols)), shape=(len(ds.windows), self.vocab_size))

    def fit(self, ds: WindowDataset) -> BagOfEvents:
        """Fit on the labelled windows of ``ds``; returns ``self``."""
        from sklearn.linear_model import LogisticRegression

        y = np.array([w.label for w in ds.windows])
        self.clf = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000).fit(self.features(ds), y)
        return self

    def predict_proba(self, ds: WindowDataset) -> np.ndarray:
        """``(n_windows,)`` attack probability of each window of ``ds`` (featurising included).

        Raises:
            RuntimeError: called before :meth:`fit`.
        """
        if self.clf is None:
            raise RuntimeError("BagOfEvents.predict_proba before fit")
        return self.clf.predict_proba(self.features(ds))[:, 1]


def label_heuristic_scores(ds: WindowDataset) -> list[float]:
    """Reference, not a detector: 1.0 for a window where any event's acting image is powershell.exe, else 0.0.

    The event labels are *defined* from PowerShell process trees (SOURCE.md), so this shows how much of the task
    the labelling heuristic itself gives away.
    """
    return [
        float(
            any(
                "powershell" in str(ds.log.events[e].get("image") or ds.log.events[e].get("source_image") or "").lower()
                for e in w.event_idx
            )
        )
        for w in ds.windows
    ]
