"""Metric spaces of Fréchet regression, each as an embedding in R^m with a weighted squared distance.

Every space here is (isometric to) a convex subset of a weighted Euclidean space, so the weighted Fréchet mean
``argmin_ω Σ_i w_i d²(Y_i, ω)`` (weights summing to one, possibly negative) is the projection of the weighted
average of the embeddings onto that subset (Petersen & Müller 2019 §3; DeSI notes §8.2):

* ``distribution`` — 1-D distributions under Wasserstein-2, embedded as quantile functions on a grid of ``m``
  probabilities; ``d²`` is the trapezoid integral of the squared difference; the projection is isotonic regression
  (pool-adjacent-violators, scikit-learn ``IsotonicRegression``) optionally clipped to a support ``[lo, hi]``.
* ``spd`` — r×r SPD matrices under the log-Euclidean metric ``‖log A − log B‖_F``, embedded as ``vec(log A)``; the
  set of symmetric matrices is a subspace, so no projection is needed; ``to_object`` is ``exp``.
* ``composition`` — compositions (parts > 0 summing to 1) under the Aitchison metric, embedded by the centred
  log-ratio (CLR); the zero-sum subspace is closed under averaging; ``to_object`` is ``softmax``.
* ``laplacian`` — graph Laplacians under the Frobenius metric, embedded as ``vec(L)``; the projection onto
  {symmetric, zero row sums, off-diagonal ≤ 0} is a QP solved by cvxpy/OSQP (Zhou & Müller 2022).

Arrays: ``Z (n, m)`` embeddings, ``w (m,)`` quadrature weights of the distance. Torch versions of ``dist2`` keep
gradients (the training loss is the distance to the unprojected mean).
"""

from __future__ import annotations

import math

import numpy as np
import torch

SPACES = ("distribution", "spd", "composition", "laplacian")


class Space:
    """One response space: ``embed`` objects -> ``(n, m)``, ``project`` rows onto the space, ``to_object`` back.

    Args:
        kind: one of ``SPACES``.
        m: embedding size (grid points; r*r for matrices; parts for compositions).
        support: ``(lo, hi)`` bounds of a distribution's support (``None`` = unbounded).

    Raises:
        ValueError: an unknown kind or a size that does not fit it.
    """

    def __init__(self, kind: str, m: int, support: tuple[float, float] | None = None):
        if kind not in SPACES:
            raise ValueError(f"space must be one of {SPACES}, got {kind!r}")
        if kind in ("spd", "laplacian") and math.isqrt(m) ** 2 != m:
            raise ValueError(f"{kind}: embedding size {m} is not r*r")
        if m < 2:
            raise ValueError(f"{kind}: embedding size must be >= 2, got {m}")
        self.kind, self.m, self.support = kind, int(m), tuple(support) if support is not None else None
        self.r = math.isqrt(m) if kind in ("spd", "laplacian") else None
        if kind == "distribution":
            u = np.linspace(0.0, 1.0, m)
            w = np.full(m, u[1] - u[0])
            w[[0, -1]] /= 2  # trapezoid rule on [0, 1]
        else:
            w = np.ones(m)
        self.weights = w
        self.grid = np.linspace(0.0, 1.0, m) if kind == "distribution" else None

    # ---- distances -----------------------------------------------------------------------------------------------
    def dist2(self, A, B):
        """Squared distance between rows of embeddings ``A (.., m)`` and ``B (.., m)`` (numpy or torch, broadcast)."""
        if isinstance(A, torch.Tensor) or isinstance(B, torch.Tensor):
            w = torch.as_tensor(
                self.weights,
                dtype=A.dtype if isinstance(A, torch.Tensor) else B.dtype,
                device=A.device if isinstance(A, torch.Tensor) else B.device,
            )
            return ((A - B) ** 2 * w).sum(-1)
        return ((np.asarray(A) - np.asarray(B)) ** 2 * self.weights).sum(-1)

    def pairwise_dist2(self, A, B=None) -> torch.Tensor:
        """All squared distances ``(n_a, n_b)`` in one batched call (Gram trick on the weighted embedding)."""
        A = torch.as_tensor(A, dtype=torch.float64)
        B = A if B is None else torch.as_tensor(B, dtype=torch.float64)
        sw = torch.as_tensor(np.sqrt(self.weights), dtype=A.dtype)
        return torch.cdist(A * sw, B * sw).pow(2)

    # ---- embedding ---------------------------------------------------------------------------------------------
    def embed(self, objects) -> np.ndarray:
        """Objects -> embeddings ``(n, m)``: quantile rows as they are; SPD ``(n, r, r)`` -> vec(log A);
        compositions ``(n, m)`` -> CLR; Laplacians ``(n, r, r)`` -> vec(L)."""
        Y = np.asarray(objects, dtype=np.float64)
        if self.kind == "spd":
            vals, vecs = np.linalg.eigh(Y)
            return ((vecs * np.log(vals)[..., None, :]) @ np.swapaxes(vecs, -1, -2)).reshape(len(Y), -1)
        if self.kind == "composition":
            L = np.log(Y)
            return L - L.mean(1, keepdims=True)
        return Y.reshape(len(Y), -1)

    def to_object(self, Z) -> np.ndarray:
        """Projected embeddings -> objects (inverse of ``embed``)."""
        Z = np.asarray(Z, dtype=np.float64)
        if self.kind == "spd":
            S = Z.reshape(-1, self.r, self.r)
            S = (S + np.swapaxes(S, -1, -2)) / 2
            vals, vecs = np.linalg.eigh(S)
            return (vecs * np.exp(vals)[..., None, :]) @ np.swapaxes(vecs, -1, -2)
        if self.kind == "composition":
            E = np.exp(Z - Z.max(1, keepdims=True))
            return E / E.sum(1, keepdims=True)
        if self.kind == "laplacian":
            return Z.reshape(-1, self.r, self.r)
        return Z

    # ---- projection --------------------------------------------------------------------------------------------
    def project(self, Z) -> np.ndarray:
        """Nearest point of the space to each row of ``Z (n, m)`` in this space's embedding metric."""
        Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))
        if self.kind == "distribution":
            return project_monotone(Z, self.support, self.weights)
        if self.kind == "spd":
            S = Z.reshape(-1, self.r, self.r)
            return ((S + np.swapaxes(S, -1, -2)) / 2).reshape(len(Z), -1)
        if self.kind == "composition":
            return Z - Z.mean(1, keepdims=True)
        return project_laplacian(Z.reshape(-1, self.r, self.r)).reshape(len(Z), -1)

    def frechet_mean(self, weights, Z) -> np.ndarray:
        """Weighted Fréchet means: ``weights (k, n)`` rows summing to 1, ``Z (n, m)`` -> projected ``(k, m)``."""
        W = np.atleast_2d(np.asarray(weights, dtype=np.float64))
        return self.project(W @ np.asarray(Z, dtype=np.float64))


def project_monotone(
    Q: np.ndarray, support: tuple[float, float] | None = None, weights: np.ndarray | None = None
) -> np.ndarray:
    """Rows of ``Q (n, m)`` projected onto non-decreasing vectors within ``support`` by weighted PAV.

    With ``weights`` the W2 grid's trapezoid weights this is the exact projection in the W2 metric (the authors'
    R code solves the unweighted QP with OSQP; the two differ only through the two end points' half weights)."""
    from sklearn.isotonic import IsotonicRegression

    lo, hi = support if support is not None else (None, None)
    iso = IsotonicRegression(y_min=lo, y_max=hi, increasing=True)
    x = np.arange(Q.shape[1], dtype=np.float64)
    return np.stack([iso.fit_transform(x, q, sample_weight=weights) for q in Q])


def project_laplacian(L: np.ndarray) -> np.ndarray:
    """Frobenius projection of each ``(r, r)`` matrix onto graph Laplacians (symmetric, zero row sums,
    off-diagonal ≤ 0), a QP solved by cvxpy with OSQP. ``L (n, r, r)`` -> ``(n, r, r)``."""
    import cvxpy as cp

    r = L.shape[-1]
    out = np.empty_like(L)
    P = cp.Variable((r, r), symmetric=True)
    target = cp.Parameter((r, r))
    off = ~np.eye(r, dtype=bool)
    prob = cp.Problem(
        cp.Minimize(cp.sum_squares(P - target)), [cp.sum(P, axis=1) == 0, cp.multiply(off.astype(float), P) <= 0]
    )
    for k, M in enumerate(L):
        target.value = (M + M.T) / 2
        prob.solve(solver=cp.OSQP, eps_abs=1e-9, eps_rel=1e-9, max_iter=20000)
        out[k] = P.value
    return out


def quantiles_from_pmf(ages: np.ndarray, pmf: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Quantile function on ``grid ⊂ [0, 1]`` of a distribution spread uniformly within each age interval.

    Args:
        ages: ``(k+1,)`` interval edges (years), increasing.
        pmf: ``(n, k)`` probability of death in each interval (rows are renormalised to sum to 1).
        grid: ``(m,)`` probabilities.
    Returns:
        ``(n, m)`` quantiles (years), non-decreasing in each row; ``q(0) = ages[0]``, ``q(1) = ages[-1]``.
    """
    P = np.asarray(pmf, dtype=np.float64)
    P = P / P.sum(1, keepdims=True)
    cdf = np.concatenate([np.zeros((len(P), 1)), np.cumsum(P, 1)], 1)
    cdf[:, -1] = 1.0
    out = np.empty((len(P), len(grid)))
    for i, c in enumerate(cdf):
        keep = np.concatenate([[True], np.diff(c) > 0])  # flat CDF pieces (no deaths) carry no quantile
        out[i] = np.interp(grid, c[keep], ages[keep])
    return out


def density_from_quantiles(q: np.ndarray, grid: np.ndarray, ages: np.ndarray, bw: float = 2.0) -> np.ndarray:
    """A smooth density on ``ages`` from quantiles ``q (m,)`` at probabilities ``grid`` (Gaussian smoothing of the
    quantile-implied CDF's increments; for plots only)."""
    cdf = np.interp(ages, q, grid, left=0.0, right=1.0)
    dens = np.gradient(cdf, ages)
    k = np.exp(-0.5 * ((ages[:, None] - ages[None, :]) / bw) ** 2)
    dens = k @ dens / k.sum(1)
    return dens / max(np.trapezoid(dens, ages), 1e-12)
