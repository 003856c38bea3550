"""Generated single-index data for each response space (ours, after the designs of E2M's DenSimu/SPDSimu/NetSimu;
GENERATED, not real data).

``X ~ N(0, I_p)``, ``β ∝ (1, 1, 1, 0, …, 0)`` (three non-zeros, unit norm), ``t = βᵀx``, and the conditional Fréchet
mean ``m(x) = g(t)`` is non-linear in ``t``:

* distribution: ``Y = N(μ_i, σ_i²)`` quantiles on ``u ∈ [0.005, 0.995]`` (m points), ``μ_i ~ N(2 sin(πt/2), 0.3²)``,
  ``σ_i = exp(0.4 t) · Gamma(25, 1/25)``; ``m(x)`` = quantiles of ``N(2 sin(πt/2), exp(0.8 t))``.
* spd (3×3): ``log Y = t S₁ + (t²/2 − ½) S₂ + E``, symmetric Gaussian ``E`` (sd 0.2); ``m(x) = exp(tS₁ + (t²/2−½)S₂)``.
* composition (4 parts): ``clr Y = t a₁ + sin(πt/2) a₂ + e`` (sd 0.2, projected to zero sum); ``m(x)`` without ``e``.
* laplacian (5 nodes): edge weights ``w_jk = sigmoid(c_jk t) · U_i`` with ``U_i ~ U(0.5, 1.5)``; ``m(x) = L(E w)``.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from zoo.methods.desi.spaces import Space

SIM_SIZES = {"distribution": 51, "spd": 9, "composition": 4, "laplacian": 25}


def planted_beta(p: int) -> np.ndarray:
    """``(p,)`` unit vector with three equal non-zeros."""
    b = np.zeros(p)
    b[:3] = 1.0
    return b / np.linalg.norm(b)


def _sym(A):
    return (A + np.swapaxes(A, -1, -2)) / 2


def _laplacian(W):
    W = _sym(W) * (1 - np.eye(W.shape[-1]))
    return np.eye(W.shape[-1]) * W.sum(-1)[..., None] - W


def simulate(space: str, n: int, p: int, seed: int) -> dict:
    """One generated sample.

    Returns:
        ``{"X": (n, p), "Y": objects, "Z": (n, m) embeddings, "Z_true": (n, m) embeddings of m(x), "beta": (p,),
        "space": Space}``.
    Raises:
        ValueError: an unknown space or ``p < 3``.
    """
    if space not in SIM_SIZES:
        raise ValueError(f"space must be one of {tuple(SIM_SIZES)}, got {space!r}")
    if p < 3:
        raise ValueError(f"simulations plant three non-zeros: need p >= 3, got {p}")
    rng = np.random.default_rng(seed)
    fixed = np.random.default_rng(12345)  # the link's constants are the same in every replication
    X = rng.normal(size=(n, p))
    beta = planted_beta(p)
    t = X @ beta
    sp = Space(space, SIM_SIZES[space])
    if space == "distribution":
        u = np.linspace(0.005, 0.995, sp.m)
        mu, sd = 2 * np.sin(np.pi * t / 2), np.exp(0.4 * t)
        Y = (mu + rng.normal(0, 0.3, n))[:, None] + (sd * rng.gamma(25, 1 / 25, n))[:, None] * norm.ppf(u)
        Z, Z_true = Y, mu[:, None] + sd[:, None] * norm.ppf(u)
    elif space == "spd":
        S1, S2 = (_sym(fixed.normal(size=(3, 3))) for _ in range(2))
        S1, S2 = S1 / np.linalg.norm(S1), S2 / np.linalg.norm(S2)
        M = t[:, None, None] * S1 + (t**2 / 2 - 0.5)[:, None, None] * S2
        E = _sym(rng.normal(0, 0.2, (n, 3, 3)))
        Y = sp.to_object((M + E).reshape(n, -1))
        Z, Z_true = sp.embed(Y), M.reshape(n, -1)
    elif space == "composition":
        a1, a2 = fixed.normal(size=4), fixed.normal(size=4)
        a1, a2 = a1 - a1.mean(), a2 - a2.mean()
        C = t[:, None] * a1 + np.sin(np.pi * t / 2)[:, None] * a2
        e = rng.normal(0, 0.2, (n, 4))
        Y = sp.to_object(C + e - e.mean(1, keepdims=True))
        Z, Z_true = sp.embed(Y), C
    else:
        c = _sym(fixed.normal(0, 2, (5, 5)))
        Wm = 1 / (1 + np.exp(-c[None] * t[:, None, None]))
        Y = _laplacian(Wm * rng.uniform(0.5, 1.5, (n, 1, 1)))
        Z, Z_true = Y.reshape(n, -1), _laplacian(Wm).reshape(n, -1)
    return {"X": X, "Y": Y, "Z": Z, "Z_true": Z_true, "beta": beta, "space": sp}
