"""The conditioning matrix C built from public features only (Cond-DP, paper §3; variants are *ours*).

For the public training features ``X = U Σ Vᵀ`` (n × d), the paper conditions DP-SGD with ``C = V Σ⁻¹ Vᵀ``, i.e.
``C = (XᵀX)^{-1/2}``. Because C is a function of public data only, using it is post-processing and costs no
privacy. Three practical knobs (our reconstruction, notes papers-2.md §7.2):

- ridge ``λ``: ``C = V (Σ + λ σ₁ I)⁻¹ Vᵀ`` with λ relative to the largest singular value σ₁ (so one λ means the
  same thing for 309 diabetes rows and 18k OD pairs). Needed for rank-deficient X (the OD table has rank 261/271).
- rank ``r``: keep the top-r directions and give every other direction the r-th one's factor (a flat tail; the
  matrix stays invertible, so no direction is frozen).
- ``normalize``: divide by ``‖C‖₂`` so that no direction moves faster than under DP-SGD (C = I has norm 1).
"""

from __future__ import annotations

import numpy as np


def conditioning_matrix(
    X: np.ndarray, ridge: float = 0.0, rank: int | None = None, normalize: bool = True, intercept: bool = False
) -> np.ndarray:
    """C = V (Σ + λσ₁)⁻¹ Vᵀ from public features.

    Args:
        X: (n, d) public training features (already standardised as the model sees them).
        intercept: build C for ``[X, 1]`` ((d + 1) × (d + 1)), so the first layer's bias is conditioned with its
            weights (*ours*: left unconditioned, the bias would keep the full step size and diverge at the step
            sizes Cond-DP needs).
        ridge: λ >= 0, relative to the largest singular value σ₁ of X.
        rank: None for all d directions, else 1 <= r <= d (flat tail beyond r, see the module docstring).
        normalize: scale C so that its spectral norm is 1.

    Returns:
        (d, d) (or (d + 1, d + 1) with ``intercept``) symmetric positive definite float64 matrix.

    Raises:
        ValueError: negative ridge, rank out of range, or a singular X with ridge 0 (C would be infinite).
    """
    X = np.asarray(X, float)
    if intercept:
        X = np.hstack([X, np.ones((len(X), 1))])
    d = X.shape[1]
    if ridge < 0:
        raise ValueError(f"ridge must be >= 0, got {ridge}")
    if rank is not None and not 1 <= rank <= d:
        raise ValueError(f"rank must be in [1, {d}], got {rank}")
    s, vt = singular_directions(X)
    shifted = s + ridge * s[0]
    if rank is not None:
        shifted[rank:] = shifted[rank - 1]
    if shifted.min() <= 1e-6 * s[0]:  # eigh of XᵀX resolves σ to ~1e-8 σ₁
        raise ValueError("X is rank-deficient: C = (XᵀX)^(-1/2) is infinite; set a ridge > 0 or a rank")
    factor = 1.0 / shifted
    if normalize:
        factor = factor / factor.max()
    return (vt.T * factor) @ vt


def singular_directions(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All d singular values of (n, d) X, descending (zeros where n < d), and Vᵀ (d, d), from the
    eigendecomposition of XᵀX (d × d; never forms the n × n U)."""
    w, v = np.linalg.eigh(X.T @ X)
    order = np.argsort(w)[::-1]
    return np.sqrt(np.clip(w[order], 0.0, None)), v[:, order].T


def psd_sqrt(C: np.ndarray) -> np.ndarray:
    """Symmetric square root of a symmetric positive semi-definite (d, d) matrix (eigendecomposition)."""
    w, v = np.linalg.eigh((C + C.T) / 2)
    return (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T


def spectrum(X: np.ndarray, C: np.ndarray | None = None) -> np.ndarray:
    """Singular values of X (or of the conditioned X C^{1/2}, what the first layer sees under ``reparam``),
    descending. A C one larger than X's width conditions ``[X, 1]``."""
    X = np.asarray(X, float)
    if C is not None and C.shape[0] == X.shape[1] + 1:
        X = np.hstack([X, np.ones((len(X), 1))])
    return np.linalg.svd(X if C is None else X @ psd_sqrt(C), compute_uv=False)
