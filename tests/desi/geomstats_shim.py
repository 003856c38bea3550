"""geomstats 2.8 under numpy 2 (tests and benchmarks only; ``zoo/`` never imports geomstats).

geomstats 2.8 imports ``numpy.trapz``, removed in numpy 2; the shim restores the name before importing it.
Raises ImportError when geomstats is not installed (tests skip).
"""

import numpy as np

if not hasattr(np, "trapz"):
    np.trapz = np.trapezoid

from geomstats.geometry.spd_matrices import SPDLogEuclideanMetric, SPDMatrices
from geomstats.learning.frechet_mean import FrechetMean


def spd_space(r: int):
    """geomstats' SPD manifold of r×r matrices with the log-Euclidean metric."""
    space = SPDMatrices(r, equip=False)
    space.equip_with_metric(SPDLogEuclideanMetric)
    return space


def log_euclidean_mean(Y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """geomstats' weighted Fréchet mean of ``Y (n, r, r)``."""
    fm = FrechetMean(spd_space(Y.shape[-1]))
    fm.fit(Y, weights=w)
    return np.asarray(fm.estimate_)


def log_euclidean_dist(a: np.ndarray, b: np.ndarray) -> float:
    return float(spd_space(a.shape[-1]).metric.dist(a, b))


def log_euclidean_pairwise(Y: np.ndarray) -> np.ndarray:
    return np.asarray(spd_space(Y.shape[-1]).metric.dist_pairwise(Y))
