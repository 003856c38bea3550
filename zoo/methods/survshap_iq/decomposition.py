"""SurvFD: the exact marginal functional decomposition of a survival target at every time point (Sec. 3.1, Eq. 4-5).

A target is ``predict(X (n, p)) -> (n, T)`` (a survival, hazard or log-hazard curve on a fixed time grid). The value
of a coalition ``M`` at ``x`` is the interventional expectation ``v(t|M) = mean_b F(t | x_M, b_{-M})`` over one
background sample ``b`` shared by every coalition and every ``t`` (common random numbers), computed for all
coalitions and all ``t`` in one model call. The pure effects are the Moebius transform
``f_M(t|x) = sum_{L subset M} (-1)^{|M|-|L|} v(t|L)`` (Eq. 5, ``f_empty = v(empty)``), so ``sum_M f_M = F(t|x)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Predict = Callable[[np.ndarray], np.ndarray]


def all_coalitions(p: int) -> np.ndarray:
    """``(2**p, p)`` bool matrix; row ``m`` is the coalition whose bitmask is ``m`` (bit ``j`` = feature ``j``)."""
    masks = np.arange(2**p)
    return ((masks[:, None] >> np.arange(p)[None, :]) & 1).astype(bool)


def coalition_values(
    predict: Predict, x: np.ndarray, background: np.ndarray, coalitions: np.ndarray, chunk_rows: int = 200_000
) -> np.ndarray:
    """Interventional coalition values of one point for every time point at once.

    Args:
        predict: ``(n, p) -> (n, T)``.
        x: ``(p,)`` the explained point.
        background: ``(B, p)`` replacement rows (the same rows for every coalition: common random numbers).
        coalitions: ``(C, p)`` bool, True = feature taken from ``x``.
    Returns:
        ``(C, T)``: ``v(t|M) = mean_b predict(x_M, b_{-M})[t]``.
    """
    x = np.asarray(x, dtype=float).reshape(-1)
    coalitions = np.asarray(coalitions, dtype=bool)
    C, B = len(coalitions), len(background)
    out = []
    step = max(1, chunk_rows // max(B, 1))
    for start in range(0, C, step):
        mask = coalitions[start : start + step]  # (c, p)
        rows = np.where(mask[:, None, :], x[None, None, :], background[None, :, :])  # (c, B, p)
        pred = np.asarray(predict(rows.reshape(-1, len(x))), dtype=float)
        out.append(pred.reshape(len(mask), B, -1).mean(axis=1))
    return np.concatenate(out)


def moebius_transform(values: np.ndarray, p: int) -> np.ndarray:
    """Fast Moebius transform over subsets (rows indexed by bitmask), vectorised over the trailing time axis.

    ``values (2**p, T) -> (2**p, T)`` with ``m[M] = sum_{L subset M} (-1)^{|M|-|L|} values[L]``.
    """
    m = np.array(values, dtype=float, copy=True)
    idx = np.arange(2**p)
    for j in range(p):
        has = (idx >> j) & 1 == 1
        m[has] -= m[idx[has] ^ (1 << j)]
    return m


@dataclass
class Decomposition:
    """SurvFD of one or more points: ``components[i, m, t] = f_M(t|x_i)`` for coalition bitmask ``m``."""

    times: np.ndarray  # (T,)
    components: np.ndarray  # (n, 2**p, T)
    p: int

    def sets(self) -> list[tuple[int, ...]]:
        """Feature tuple of each bitmask, in bitmask order."""
        return [tuple(j for j in range(self.p) if m >> j & 1) for m in range(2**self.p)]

    def reconstruct(self) -> np.ndarray:
        """``(n, T)`` sum over all components = ``F(t|x)`` (exact by construction)."""
        return self.components.sum(axis=1)


def survfd(predict: Predict, X: np.ndarray, background: np.ndarray, times: np.ndarray) -> Decomposition:
    """Exact marginal functional decomposition of ``predict`` at each row of ``X`` (Eq. 4-5), cost ``2**p * B`` rows.

    Raises:
        ValueError: ``p > 16`` (use ``survshap_iq`` with an approximator instead).
    """
    X = np.atleast_2d(np.asarray(X, dtype=float))
    p = X.shape[1]
    if p > 16:
        raise ValueError(f"exact SurvFD enumerates 2**p coalitions; p = {p} is too many")
    coalitions = all_coalitions(p)
    comps = np.stack([moebius_transform(coalition_values(predict, x, background, coalitions), p) for x in X])
    return Decomposition(np.asarray(times, dtype=float), comps, p)


def classify_components(dec: Decomposition, rel_tol: float = 1e-6, abs_tol: float = 1e-9) -> dict[tuple[int, ...], str]:
    """Split the non-empty components into time-dependent ("td") and time-independent ("ti") ones (Eq. 8).

    The documented test (ours): a component's size is its root-mean-square over points and times,
    ``s_M = rms_{i,t} f_M(t|x_i)``; its time variation is ``d_M = rms_i sd_t f_M(t|x_i)``. With
    ``scale = max_M s_M``, a component with ``s_M <= abs_tol + rel_tol * scale`` is absent (left out);
    otherwise it is "td" when ``d_M > abs_tol + rel_tol * scale`` and "ti" else. Exact decompositions of
    closed-form targets are zero or constant up to float error, so the tolerances only absorb rounding; for fitted
    models raise ``rel_tol`` (e.g. 0.01).

    Returns:
        ``{features: "td" | "ti"}`` for the present components.
    """
    comps = dec.components
    size = np.sqrt((comps**2).mean(axis=(0, 2)))
    variation = np.sqrt((comps.std(axis=2) ** 2).mean(axis=0))
    sets = dec.sets()
    scale = size[1:].max(initial=0.0)
    thr = abs_tol + rel_tol * scale
    return {sets[m]: ("td" if variation[m] > thr else "ti") for m in range(1, len(sets)) if size[m] > thr}
