"""Evaluation measures: local accuracy of an explanation (Sec. 4), Harrell's C-index and the integrated Brier score."""
from __future__ import annotations

import numpy as np


def local_accuracy(predictions: np.ndarray, attributions: np.ndarray) -> np.ndarray:
    """The authors' local-accuracy residual per time point (``compute_local_accuracy`` in their simulation code).

    ``LA(t) = sqrt( mean_i (F(t|x_i) - mean_j F(t|x_j) - sum_K phi_K(t|x_i))^2 / mean_i F(t|x_i)^2 )``.

    Args:
        predictions: ``(n, T)`` model outputs ``F(t|x_i)`` of the explained points.
        attributions: ``(n, T)`` the sum of all non-empty interaction values of each point.
    Returns:
        ``(T,)`` residuals (0 = the explanations add up to the centred predictions).
    """
    F = np.asarray(predictions, dtype=float)
    resid = F - F.mean(axis=0, keepdims=True) - np.asarray(attributions, dtype=float)
    return np.sqrt((resid ** 2).mean(axis=0) / np.maximum((F ** 2).mean(axis=0), 1e-300))


def structured_y(time: np.ndarray, event: np.ndarray) -> np.ndarray:
    """scikit-survival's ``(event bool, time float)`` record array."""
    y = np.empty(len(time), dtype=[("event", bool), ("time", float)])
    y["event"], y["time"] = np.asarray(event, bool), np.asarray(time, float)
    return y


def c_index(time: np.ndarray, event: np.ndarray, risk: np.ndarray) -> float:
    """Harrell's concordance index (higher risk should fail earlier); scikit-survival's implementation."""
    from sksurv.metrics import concordance_index_censored

    return float(concordance_index_censored(np.asarray(event, bool), np.asarray(time, float), np.asarray(risk))[0])


def evaluation_times(train_time: np.ndarray, test_time: np.ndarray, n: int = 50, q: tuple = (0.1, 0.9)
                     ) -> np.ndarray:
    """``n`` times between the ``q`` quantiles of the test times, clipped inside the training follow-up
    (the IBS estimator's censoring model needs them there)."""
    lo, hi = np.quantile(test_time, q)
    hi = min(hi, np.max(train_time) * 0.999)
    lo = max(lo, np.min(test_time))
    return np.linspace(lo, hi, n)


def integrated_brier_score(train_time, train_event, test_time, test_event, survival: np.ndarray,
                           times: np.ndarray) -> float:
    """IPCW integrated Brier score (Graf et al. 1999) of ``survival (n_test, T)`` at ``times (T,)``; lower is better.
    Uses scikit-survival's estimator (censoring distribution from the training split)."""
    from sksurv.metrics import integrated_brier_score as ibs

    return float(ibs(structured_y(train_time, train_event), structured_y(test_time, test_event), survival, times))
