"""KGW and Unigram watermarks on token ids: green lists, HF ``LogitsProcessor``s and z-score detectors.

Notes §3.2 (MarkLLM ``watermark/kgw``, ``watermark/unigram``); the seeding follows MarkLLM's, the code is ours:

* **KGW** (Kirchenbauer et al. 2023), ``f_scheme="time"``, ``window_scheme="left"``: a permutation
  ``prf = randperm(V, seed=key)``; before token t the seed is ``(key * prf[(x_{t-1} x_{t-2} ... x_{t-h}) mod V]) mod
  V`` (MarkLLM's ``_get_greenlist_ids_left``; so at most V distinct green lists) and the green list is the first ``⌊γV⌋`` entries of ``randperm(V, seed)`` (torch CPU generator).
* **Unigram** (Zhao et al. 2023): one fixed mask, ``⌊γV⌋`` True entries shuffled by
  ``numpy.random.default_rng(sha256(int64(key))[:4] little-endian)``.

Generation adds δ to the green logits. Detection over the T scored tokens (KGW skips the first h, whose prefix is
incomplete): ``z = (|s|_G − γT) / sqrt(T γ (1 − γ))``; the text is flagged when ``z > threshold``.
"""

from __future__ import annotations

import abc
import hashlib
import math
from collections.abc import Sequence

import numpy as np
import torch
from transformers import LogitsProcessor

KEY = 15485863
"""MarkLLM's default ``hash_key`` (the millionth prime)."""


class Watermark(abc.ABC):
    """Shared parts of both schemes (γ, δ, key, threshold, vocabulary size V); a scheme defines :meth:`green_mask`."""

    name = ""
    skip = 0  # leading tokens that have no green list (KGW: the prefix length)

    def __init__(self, vocab_size: int, gamma: float = 0.5, delta: float = 2.0, key: int = KEY, threshold: float = 4.0):
        if not 0 < gamma < 1:
            raise ValueError(f"gamma must lie in (0, 1), got {gamma}")
        self.vocab_size, self.gamma, self.delta, self.key, self.threshold = vocab_size, gamma, delta, key, threshold
        self.green_size = int(gamma * vocab_size)

    @abc.abstractmethod
    def green_mask(self, prefix: Sequence[int]) -> torch.Tensor:
        """``[V]`` bool: the green list for the token that follows ``prefix`` (token ids)."""

    def green_flags(self, ids: Sequence[int]) -> list[bool]:
        """Whether each scored token (``ids[skip:]``) is green under the list its prefix selects."""
        ids = [int(i) for i in ids]
        return [bool(self.green_mask(ids[:t])[ids[t]]) for t in range(self.skip, len(ids))]

    def z_score(self, ids: Sequence[int]) -> float:
        """z of a token-id sequence (``nan`` when no token is scored)."""
        flags = self.green_flags(ids)
        t = len(flags)
        if t == 0:
            return float("nan")
        return (sum(flags) - self.gamma * t) / math.sqrt(t * self.gamma * (1 - self.gamma))

    def detect(self, ids: Sequence[int]) -> bool:
        """``z > threshold``."""
        return self.z_score(ids) > self.threshold

    def processor(self) -> LogitsProcessor:
        """A logits processor adding δ to the green logits of every row of a ``generate`` batch."""
        return GreenBias(self)


class Unigram(Watermark):
    """One fixed green list (Zhao et al. 2023, "Provable robust watermarking"), all tokens scored."""

    name = "unigram"

    def __init__(self, vocab_size: int, **kw):
        super().__init__(vocab_size, **kw)
        seed = int.from_bytes(hashlib.sha256(np.int64(self.key).tobytes()).digest()[:4], "little")
        mask = np.array([True] * self.green_size + [False] * (vocab_size - self.green_size))
        np.random.default_rng(seed).shuffle(mask)
        self.mask = torch.from_numpy(mask)

    def green_mask(self, prefix: Sequence[int]) -> torch.Tensor:
        return self.mask


class KGW(Watermark):
    """Green list seeded by the previous ``prefix_length`` tokens (Kirchenbauer et al. 2023), "time" scheme."""

    name = "kgw"

    def __init__(self, vocab_size: int, prefix_length: int = 4, **kw):
        super().__init__(vocab_size, **kw)
        if prefix_length < 1:
            raise ValueError(f"prefix_length must be >= 1, got {prefix_length}")
        self.skip = self.prefix_length = prefix_length
        self.prf = torch.randperm(vocab_size, generator=torch.Generator().manual_seed(self.key))
        self._cache: dict[int, torch.Tensor] = {}  # seed -> mask; at most V distinct seeds

    def seed(self, prefix: Sequence[int]) -> int:
        """``(key * prf[Π last h tokens mod V]) mod V``, MarkLLM's leftHash seed.

        Raises:
            ValueError: fewer than ``prefix_length`` tokens in ``prefix``.
        """
        if len(prefix) < self.prefix_length:
            raise ValueError(f"KGW needs {self.prefix_length} prefix tokens, got {len(prefix)}")
        product = 1
        for i in range(1, self.prefix_length + 1):
            product *= int(prefix[-i])
        return self.key * int(self.prf[product % self.vocab_size]) % self.vocab_size

    def green_mask(self, prefix: Sequence[int]) -> torch.Tensor:
        seed = self.seed(prefix)
        if seed not in self._cache:
            perm = torch.randperm(self.vocab_size, generator=torch.Generator().manual_seed(seed))
            mask = torch.zeros(self.vocab_size, dtype=torch.bool)
            mask[perm[: self.green_size]] = True
            self._cache[seed] = mask
        return self._cache[seed]


class GreenBias(LogitsProcessor):
    """``scores[b, green(b)] += δ``; rows whose prefix is shorter than the scheme needs are left unchanged.

    Vocabulary rows past the watermark's V (a model whose head is wider than its tokenizer) are never green.
    """

    def __init__(self, watermark: Watermark):
        self.watermark = watermark

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        wm = self.watermark
        bias = torch.zeros_like(scores)
        for b in range(input_ids.shape[0]):
            if input_ids.shape[1] >= wm.skip:
                mask = wm.green_mask(input_ids[b].tolist()).to(scores.device)
                bias[b, : wm.vocab_size] = mask.to(scores.dtype) * wm.delta
        return scores + bias


def build_watermark(
    name: str,
    vocab_size: int,
    gamma: float = 0.5,
    delta: float = 2.0,
    key: int = KEY,
    threshold: float = 4.0,
    prefix_length: int = 4,
) -> Watermark:
    """A watermark by name (``unigram`` or ``kgw``; ``prefix_length`` is KGW's h).

    Raises:
        ValueError: an unknown name.
    """
    common = {"gamma": gamma, "delta": delta, "key": key, "threshold": threshold}
    if name == "unigram":
        return Unigram(vocab_size, **common)
    if name == "kgw":
        return KGW(vocab_size, prefix_length=prefix_length, **common)
    raise ValueError(f"watermark must be 'unigram' or 'kgw', got {name!r}")
