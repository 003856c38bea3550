"""Readouts of a generation: single tokens, pools of the first ``m`` tokens, segment means, their convex mixtures and
the token-shuffle control (Wang, Isola and Cheung 2026, §3 as summarised in our notes §4).

Inputs are the per-position states ``H [n, T, D]`` at one readout layer with ``lengths [n]`` (zero past the length),
as :func:`zoo.models.generation_pool.pooled_generate` returns them. A position ``t`` past a row's length reads the
row's last position (clamped), so every readout has all ``n`` rows (*ours*; the paper does not say).
"""

from __future__ import annotations

import itertools

import torch


def single_token(H: torch.Tensor, lengths: torch.Tensor, t: int) -> torch.Tensor:
    """``h_t`` (1-based ``t``, clamped to each row's length): ``[n, D]``."""
    idx = (torch.clamp(lengths, max=t) - 1).clamp(min=0)
    return H[torch.arange(H.shape[0]), idx]


def prefix_mean(H: torch.Tensor, lengths: torch.Tensor, m: int) -> torch.Tensor:
    """Mean of the first ``min(m, length)`` positions, ``(1/m) Σ_{t<=m} h_t``: ``[n, D]``."""
    upto = torch.clamp(lengths, max=m)
    mask = torch.arange(H.shape[1])[None, :] < upto[:, None]
    return (H * mask[..., None]).sum(1) / upto[:, None].float()


def segment_bounds(length: int, n_segments: int = 3) -> list[tuple[int, int]]:
    """Contiguous ``[start, end)`` position ranges splitting ``length`` positions into ``n_segments`` near-equal
    parts (``floor(k * length / S)``); a part that would be empty (``length < S``) takes the nearest position."""
    out = []
    for k in range(n_segments):
        a, b = (k * length) // n_segments, ((k + 1) * length) // n_segments
        if b <= a:
            a = min(a, length - 1)
            b = a + 1
        out.append((a, b))
    return out


def segment_means(H: torch.Tensor, lengths: torch.Tensor, n_segments: int = 3) -> torch.Tensor:
    """Segment means ``r_1..r_S`` (first, middle, last part of each row's generation): ``[S, n, D]``."""
    out = torch.zeros(n_segments, H.shape[0], H.shape[2], dtype=H.dtype)
    for i, n in enumerate(lengths.tolist()):
        for k, (a, b) in enumerate(segment_bounds(int(n), n_segments)):
            out[k, i] = H[i, a:b].mean(0)
    return out


def simplex_grid(step: float = 0.1, n: int = 3) -> list[tuple[float, ...]]:
    """All ``α`` on the simplex ``Δ^{n-1}`` with coordinates on a ``step`` grid (66 points for 0.1 and n = 3)."""
    m = round(1 / step)
    pts = [c for c in itertools.product(range(m + 1), repeat=n - 1) if sum(c) <= m]
    return [tuple(x / m for x in (*c, m - sum(c))) for c in pts]


def mixture(segments: torch.Tensor, alpha: tuple[float, ...]) -> torch.Tensor:
    """``r_α = Σ_k α_k r_k`` from ``segments [S, n, D]``: ``[n, D]``."""
    a = torch.tensor(alpha, dtype=segments.dtype)
    return (a[:, None, None] * segments).sum(0)


def is_interior(alpha: tuple[float, ...]) -> bool:
    """True when every coordinate of ``α`` is positive (not on an edge or vertex of the simplex)."""
    return all(x > 1e-9 for x in alpha)


def token_shuffle(H: torch.Tensor, lengths: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Control (*ours*, from the issue): row ``i`` pools ``lengths[i]`` positions drawn uniformly from *other* rows'
    generated positions, so it averages as many tokens as the real mean pool but none of its own. ``[n, D]``."""
    g = torch.Generator().manual_seed(seed)
    n = H.shape[0]
    rows = torch.repeat_interleave(torch.arange(n), lengths)
    pos = torch.cat([torch.arange(int(m)) for m in lengths])
    out = torch.zeros(n, H.shape[2], dtype=H.dtype)
    for i, m in enumerate(lengths.tolist()):
        pick = torch.randint(0, len(rows), (4 * int(m) + 8,), generator=g)
        pick = pick[rows[pick] != i][: int(m)]
        out[i] = H[rows[pick], pos[pick]].mean(0)
    return out
