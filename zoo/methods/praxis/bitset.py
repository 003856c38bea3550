"""Sample bitsets: sets of training rows packed 64 to a ``numpy.uint64`` word.

Bit ``i % 64`` of word ``i // 64`` stands for row ``i``; the padding bits of the last word are always zero, so
``popcount`` of a bitset is the number of rows in the set. PRAXIS (Heile et al., ICML 2026, §3) represents every
subproblem as such a bitset; counting a class or a feature inside a subproblem is an ``AND`` followed by a popcount,
which numpy 2 vectorises with ``np.bitwise_count``.
"""

from __future__ import annotations

import hashlib

import numpy as np

WORD = 64


def n_words(n: int) -> int:
    """Words needed for ``n`` rows (``ceil(n / 64)``, at least 1)."""
    return max(1, (n + WORD - 1) // WORD)


def pack_columns(bits: np.ndarray) -> np.ndarray:
    """Pack a boolean matrix column by column.

    Args:
        bits: ``(n, F)`` array of 0/1 (any integer or bool dtype); column ``f`` is the set of rows where it is 1.

    Returns:
        ``(F, W)`` uint64 with ``W = n_words(n)``.

    Raises:
        ValueError: ``bits`` is not 2-D or holds values other than 0 and 1.
    """
    bits = np.asarray(bits)
    if bits.ndim != 2:
        raise ValueError(f"pack_columns expects a 2-D (n, F) array, got shape {bits.shape}")
    if bits.size and not _only_zeros_and_ones(bits):
        raise ValueError("pack_columns expects only 0/1 values")
    n, n_feat = bits.shape
    w = n_words(n)
    padded = np.zeros((n_feat, w * WORD), dtype=np.uint8)
    padded[:, :n] = bits.T.astype(np.uint8)
    # little-endian bit order inside each byte, bytes little-endian inside each word -> bit i of word i//64
    packed = np.packbits(padded, axis=1, bitorder="little")
    return packed.view("<u8").astype(np.uint64, copy=False).reshape(n_feat, w)


def _only_zeros_and_ones(a: np.ndarray) -> bool:
    """Whether every entry of ``a`` is 0 or 1. Integer and bool arrays are checked by their min and max, which makes
    no temporary: ``np.isin`` made a ~1 MiB one for COMPAS's 6,907 x 12 uint8 columns, the whole of a fit's Python
    peak there (the praxis memory benchmark)."""
    if a.dtype == np.bool_:
        return True
    if np.issubdtype(a.dtype, np.integer):
        return bool(a.min() >= 0 and a.max() <= 1)
    return bool(((a == 0) | (a == 1)).all())


def pack_vector(bits: np.ndarray) -> np.ndarray:
    """Pack a 0/1 vector of length ``n`` into a ``(W,)`` uint64 bitset."""
    return pack_columns(np.asarray(bits).reshape(-1, 1))[0]


def full_mask(n: int) -> np.ndarray:
    """The bitset of all ``n`` rows: ``(W,)`` uint64 with the padding bits cleared."""
    return pack_vector(np.ones(n, dtype=np.uint8))


def unpack(mask: np.ndarray, n: int) -> np.ndarray:
    """Inverse of ``pack_vector``/``pack_columns``: ``(..., W)`` uint64 -> ``(..., n)`` bool."""
    mask = np.ascontiguousarray(mask, dtype=np.uint64)
    as_bytes = mask.astype("<u8", copy=False).view(np.uint8).reshape(*mask.shape[:-1], -1)
    return np.unpackbits(as_bytes, axis=-1, bitorder="little")[..., :n].astype(bool)


def popcount(masks: np.ndarray) -> np.ndarray:
    """Number of set bits along the last axis: ``(..., W)`` uint64 -> ``(...)`` int64."""
    return np.bitwise_count(masks).sum(axis=-1, dtype=np.int64)


def mask_key(mask: np.ndarray) -> bytes:
    """Cache key of a ``(W,)`` bitset: its bytes when at most 16, else their 128-bit BLAKE2b digest.

    A 128-bit digest keeps the key small (the raw bytes of a 10,000-row subproblem take 1,256 bytes) while a
    collision among even 10^9 subproblems has probability below 10^-20 (ours; the reference uses a 64-bit hash).
    """
    raw = mask.tobytes()
    return raw if len(raw) <= 16 else hashlib.blake2b(raw, digest_size=16).digest()
