"""Fréchet regression weights: global (Petersen & Müller 2019, eq. 2.5) and local linear along a scalar index
(ibid. eq. 3.1; Bhattacharjee & Müller 2023 for the single index), plus the cross-fitted (leave-one-out) risk
that DeSI minimises (reconstruction, ours: DeSI notes §8.3).

All weight functions return ``(k, n)``: one row per query point, summing to one over the ``n`` reference points;
the regression estimate at a query is ``space.frechet_mean(row, Z)``. Torch versions are differentiable in the index
values and the bandwidth.
"""

from __future__ import annotations

import numpy as np
import torch

from zoo.methods.desi.spaces import Space


def global_weights(X: np.ndarray, Xq: np.ndarray) -> np.ndarray:
    """Global Fréchet regression weights ``s_in(x)/n = (1 + (X_i − X̄)ᵀ Σ̂⁻¹ (x − X̄)) / n``.

    Args:
        X: ``(n, p)`` training inputs; ``Σ̂`` is their covariance with divisor ``n`` (pseudo-inverse if singular).
        Xq: ``(k, p)`` query inputs.
    Returns:
        ``(k, n)`` weights, each row summing to 1.
    """
    X, Xq = np.asarray(X, dtype=np.float64), np.atleast_2d(np.asarray(Xq, dtype=np.float64))
    xbar = X.mean(0)
    S = np.atleast_2d(np.cov(X, rowvar=False, ddof=0))
    return (1.0 + (Xq - xbar) @ np.linalg.pinv(S) @ (X - xbar).T) / len(X)


def local_linear_weights(
    t: torch.Tensor,
    tq: torch.Tensor,
    h: torch.Tensor | float,
    exclude: torch.Tensor | None = None,
    kernel: str = "gaussian",
) -> torch.Tensor:
    """Local linear Fréchet weights ``s_in(t, h)/n = K_h(T_i−t)[μ2 − μ1(T_i−t)] / (n σ0²)`` along a scalar index.

    Args:
        t: ``(..., n)`` reference index values ``T_i`` (leading dimensions batch several indices at once).
        tq: ``(..., k)`` query index values.
        h: bandwidth (> 0), a float or a tensor broadcasting to ``(..., 1, 1)`` (gradients flow to it).
        exclude: optional ``(k,)`` long tensor (query ``j`` gets weight 0 on reference ``exclude[j]``: leave-one-out)
            or ``(k, n)`` bool mask of the references each query must not use (leave-one-group-out).
        kernel: ``gaussian`` (every point keeps some weight) or ``epanechnikov``.
    Returns:
        ``(..., k, n)`` weights, rows summing to 1 (they reproduce any response affine in the index exactly).
    Raises:
        ValueError: an unknown kernel.
    """
    D = t[..., None, :] - tq[..., :, None]  # (..., k, n): T_i − t
    u = D / h
    if kernel == "gaussian":
        u2 = u**2  # cut at 10 sd: denormal floats are ~50x slower on CPUs
        K = torch.where(u2 < 100.0, torch.exp(-0.5 * u2.clamp(max=100.0)), torch.zeros_like(u2))
    elif kernel == "epanechnikov":
        K = torch.clamp(1 - u**2, min=0.0)
    else:
        raise ValueError(f"kernel must be gaussian or epanechnikov, got {kernel!r}")
    if exclude is not None and exclude.dtype == torch.bool:
        K = K.masked_fill(exclude, 0.0)
    elif exclude is not None:
        K = K.scatter(-1, exclude[:, None].expand(*K.shape[:-1], 1), 0.0)
    mu1, mu2 = (K * D).mean(-1, keepdim=True), (K * D**2).mean(-1, keepdim=True)
    s = K * (mu2 - mu1 * D)
    denom = s.sum(-1, keepdim=True)  # = n σ0² = n (μ0 μ2 − μ1²) up to rounding
    tiny = torch.finfo(s.dtype).tiny ** 0.5
    return s / torch.where(denom.abs() > tiny, denom, torch.full_like(denom, tiny))


def cross_fitted_risk(
    t: torch.Tensor,
    Z: torch.Tensor,
    h: torch.Tensor | float,
    space: Space,
    rows: torch.Tensor | None = None,
    kernel: str = "gaussian",
    groups: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(1/|B|) Σ_{i∈B} d²(Y_i, m̂⁽⁻ⁱ⁾(t_i))`` with the unprojected leave-one-out local linear mean.

    Args:
        t: ``(n,)`` index values; Z: ``(n, m)`` embeddings; rows: the minibatch ``B`` (default: all).
        groups: optional ``(n,)`` group ids; then ``m̂⁽⁻ⁱ⁾`` leaves out i's whole group (e.g. every year of one
            country: with near-duplicate rows, leave-one-out rewards memorising a group — ours).
    Returns:
        0-dim tensor; projection at prediction can only lower it when every ``Y_i`` lies in the (convex) space.
    """
    rows = torch.arange(len(t), device=t.device) if rows is None else rows
    exclude = rows if groups is None else groups[rows][:, None] == groups[None, :]
    W = local_linear_weights(t, t[rows], h, exclude=exclude, kernel=kernel)
    return space.dist2(W @ Z, Z[rows]).mean()


def select_bandwidth(
    t: np.ndarray,
    Z: np.ndarray,
    space: Space,
    grid: np.ndarray | None = None,
    kernel: str = "gaussian",
    groups: np.ndarray | None = None,
) -> tuple[float, float]:
    """Bandwidth minimising the leave-one-out (or leave-one-group-out) risk over ``grid`` (default: 12 values,
    0.03–2 × sd(t)).

    Returns:
        ``(h, risk)``.
    """
    t_ = torch.as_tensor(np.asarray(t, dtype=np.float64))
    Z_ = torch.as_tensor(np.asarray(Z, dtype=np.float64))
    sd = float(t_.std()) or 1.0
    grid = np.geomspace(0.03, 2.0, 12) * sd if grid is None else grid
    g_ = None if groups is None else torch.as_tensor(np.unique(groups, return_inverse=True)[1])
    risks = [float(cross_fitted_risk(t_, Z_, float(h), space, kernel=kernel, groups=g_)) for h in grid]
    k = int(np.nanargmin(risks))
    return float(grid[k]), risks[k]
