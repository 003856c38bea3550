"""Label-DP regression baselines at equal ε (the paper's comparison set; implementations *ours*).

- DP-SGD: :func:`zoo.methods.cond_dp.training.fit` with ``mode="none"`` (C = I), same clip, loader and tuning.
- RR-on-Bins (Ghazi et al., ICLR 2023): randomised response over k label values ŷ_1..ŷ_k, chosen to minimise the
  expected squared error under a prior; 0.1ε buys a Laplace-noised label histogram as the prior, 0.9ε the response.
  Ghazi et al. solve for the bins exactly by dynamic programming; we use Lloyd-style alternation per k (ours).
- Laplace label noise: y + Lap(R/ε), R = y_max − y_min.
- Sufficient statistics (Krichene et al., AISTATS 2024): XᵀX is public; release Xᵀy with the Gaussian mechanism
  (σ from opacus' RDP accountant for one full-batch step) and solve the ridge system.
- Non-private: ``fit(private=False)``, the ceiling.

All are calibrated to label substitution (one label changed anywhere in [y_min, y_max]).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from zoo.methods.cond_dp.privacy import calibrate_noise


@dataclass
class RRBins:
    """An RR-on-Bins randomiser: output values ŷ (k,) ascending, keep probability ``a``, expected loss under the
    prior it was fitted to."""

    outputs: np.ndarray
    epsilon: float
    expected_loss: float

    @property
    def keep(self) -> float:
        """P[output = ŷ_Φ(y)] = e^ε / (e^ε + k − 1); every other value has 1 / (e^ε + k − 1)."""
        k = len(self.outputs)
        return 1.0 if k == 1 else math.exp(self.epsilon) / (math.exp(self.epsilon) + k - 1)

    def bin_of(self, y: np.ndarray) -> np.ndarray:
        """Φ(y): index of the nearest output value (bins are intervals between midpoints)."""
        return np.abs(np.asarray(y, float)[:, None] - self.outputs[None, :]).argmin(1)

    def randomise(self, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """(n,) labels -> (n,) randomised labels (each ε-label-DP)."""
        k, j = len(self.outputs), self.bin_of(y)
        if k == 1:
            return np.full(len(j), self.outputs[0])
        other = rng.integers(0, k - 1, size=len(j))
        other = other + (other >= j)  # uniform over the k - 1 other values
        return self.outputs[np.where(rng.random(len(j)) < self.keep, j, other)]


def rr_expected_loss(values: np.ndarray, prior: np.ndarray, outputs: np.ndarray, epsilon: float) -> float:
    """E_{y~prior} E[(M(y) − y)²] for RR over ``outputs`` with nearest-value bins (values, prior: (m,))."""
    k = len(outputs)
    a = 1.0 if k == 1 else math.exp(epsilon) / (math.exp(epsilon) + k - 1)
    b = 0.0 if k == 1 else 1.0 / (math.exp(epsilon) + k - 1)
    sq = (outputs[None, :] - values[:, None]) ** 2  # (m, k)
    own = sq[np.arange(len(values)), np.abs(values[:, None] - outputs[None, :]).argmin(1)]
    return float(prior @ (a * own + b * (sq.sum(1) - own)))


def fit_rr_bins(values: np.ndarray, prior: np.ndarray, epsilon: float, max_bins: int = 16, iters: int = 50) -> RRBins:
    """The RR-on-Bins randomiser minimising the expected squared error under ``prior``.

    Args:
        values: (m,) label atoms; prior: (m,) their probabilities (sum 1).
        epsilon: the response's ε; max_bins: largest k tried.
    """
    values, prior = np.asarray(values, float), np.asarray(prior, float) / np.sum(prior)
    best = RRBins(np.array([float(prior @ values)]), epsilon, float(prior @ (values - prior @ values) ** 2))
    for k in range(2, min(max_bins, len(values)) + 1):
        a = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
        b = 1.0 / (math.exp(epsilon) + k - 1)
        cdf = np.cumsum(prior)
        outputs = np.interp((np.arange(k) + 0.5) / k, cdf, values)
        for _ in range(iters):
            j = np.abs(values[:, None] - outputs[None, :]).argmin(1)
            w = prior[:, None] * (b + (a - b) * (j[:, None] == np.arange(k)[None, :]))  # (m, k)
            new = (w * values[:, None]).sum(0) / np.maximum(w.sum(0), 1e-300)
            if np.allclose(new, outputs):
                break
            outputs = new
        outputs = np.sort(outputs)
        loss = rr_expected_loss(values, prior, outputs, epsilon)
        if loss < best.expected_loss:
            best = RRBins(outputs, epsilon, loss)
    return best


def rr_on_bins_labels(
    y: np.ndarray, y_min: float, y_max: float, epsilon: float, rng: np.random.Generator, n_atoms: int = 32
) -> np.ndarray:
    """RR-on-Bins labels: 0.1ε for a Laplace histogram prior over ``n_atoms`` equal bins, 0.9ε for the response.

    The histogram changes by 2 in L1 when one label moves, so its Laplace scale is 2 / (0.1ε).
    """
    edges = np.linspace(y_min, y_max, n_atoms + 1)
    counts = np.histogram(np.clip(y, y_min, y_max), edges)[0].astype(float)
    noisy = np.clip(counts + rng.laplace(0.0, 2.0 / (0.1 * epsilon), size=n_atoms), 0.0, None)
    prior = noisy / noisy.sum() if noisy.sum() > 0 else np.full(n_atoms, 1.0 / n_atoms)
    mech = fit_rr_bins((edges[:-1] + edges[1:]) / 2, prior, 0.9 * epsilon)
    return mech.randomise(y, rng)


def laplace_labels(y: np.ndarray, y_min: float, y_max: float, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """y + Lap((y_max − y_min) / ε) (ε-label-DP under substitution; unbiased, so left unclipped)."""
    return np.asarray(y, float) + rng.laplace(0.0, (y_max - y_min) / epsilon, size=len(y))


#: Label randomisers usable from a recipe (``data.label_mechanism``).
LABEL_MECHANISMS = {"rr-bins": rr_on_bins_labels, "laplace": laplace_labels}


def sufficient_statistics(
    X: np.ndarray,
    y: np.ndarray,
    *,
    y_min: float,
    y_max: float,
    epsilon: float,
    delta: float,
    ridge: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, float]:
    """Linear regression from public XᵀX and a Gaussian-noised Xᵀ(y − m), m = (y_min + y_max) / 2.

    Args:
        X: (n, d) public features (an intercept column is added here); y: (n,) labels in [y_min, y_max].
        ridge: λ; the system solved is (XᵀX + λ n I) w = noisy Xᵀ(y − m). ``epsilon = inf`` adds no noise.

    Returns:
        ``(w, b)``: weights (d,) and intercept, predicting ``X @ w + b``.
    """
    n = len(y)
    Xa = np.hstack([X, np.ones((n, 1))])
    m = (y_min + y_max) / 2
    xty = Xa.T @ (np.asarray(y, float) - m)
    sigma = calibrate_noise(epsilon, delta, sample_rate=1.0, steps=1)
    sensitivity = float(np.linalg.norm(Xa, axis=1).max()) * (y_max - y_min)
    xty = xty + rng.normal(0.0, sigma * sensitivity, size=xty.shape)
    w = np.linalg.solve(Xa.T @ Xa + ridge * n * np.eye(Xa.shape[1]), xty)
    return w[:-1], float(w[-1] + m)
