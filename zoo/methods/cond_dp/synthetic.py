"""The generated power-law regression problem of the paper's theory (labelled *generated*, not real data).

``X = Z diag(j^{-α})`` with Z standard normal (n × d), so the j-th singular value of X decays like j^{-α};
``y = X w* + noise`` with w*_j = j^{α} z_j (z standard normal), so every direction carries the same share of the
signal (the case where plain gradient descent is slow in the small-σ directions), scaled so that Var(X w*) = 1.
Public features, private labels.
"""

from __future__ import annotations

import numpy as np


def power_law_problem(
    n: int = 10_000, d: int = 100, alpha: float = 1.0, noise: float = 0.1, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X (n, d), y (n,), w* (d,)) with σ_j(X) ∝ j^{-α} (in expectation) and label noise std ``noise``."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.arange(1, d + 1, dtype=float) ** -alpha
    w = rng.standard_normal(d) * np.arange(1, d + 1, dtype=float) ** alpha
    w /= np.std(X @ w)
    return X, X @ w + noise * rng.standard_normal(n), w
