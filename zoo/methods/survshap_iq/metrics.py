"""Evaluation measures: local accuracy of an explanation (Sec. 4) and what it reduces to for efficient indices,
Harrell's C-index and the integrated Brier score."""

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
    return np.sqrt((resid**2).mean(axis=0) / np.maximum((F**2).mean(axis=0), 1e-300))


def centring_gap(predictions: np.ndarray, baselines: np.ndarray) -> np.ndarray:
    """What :func:`local_accuracy` equals for every efficient explanation (ours; the reason it is not a test of the
    explainer).

    An efficient index (SV, k-SII, FSII, STII; exact values) sums to ``F(t|x_i) - b_i(t)`` with ``b_i(t) = v(t|∅)``
    the mean prediction over point ``i``'s background, so the authors' residual is
    ``F - mean_j F - (F - b_i) = b_i(t) - mean_j F(t|x_j)``, the gap between two sample means, whatever the
    attributions are:

    ``LA(t) = sqrt( mean_i (b_i(t) - mean_j F(t|x_j))^2 / mean_i F(t|x_i)^2 )``.

    It is 0 when the background is the explained set, and of the order of
    ``sd_x F(t|x) * sqrt(1/n_explained + 1/n_background) / rms F`` for disjoint samples.

    Args:
        predictions: ``(n, T)`` ``F(t|x_i)`` of the explained points.
        baselines: ``(T,)`` one background mean for all points, or ``(n, T)`` one per point (shapiq's imputer draws
            its own replacement rows per explainer).
    Returns:
        ``(T,)``.
    """
    F = np.asarray(predictions, dtype=float)
    gap = np.broadcast_to(np.asarray(baselines, dtype=float), F.shape) - F.mean(axis=0, keepdims=True)
    return np.sqrt((gap**2).mean(axis=0) / np.maximum((F**2).mean(axis=0), 1e-300))


def structured_y(time: np.ndarray, event: np.ndarray) -> np.ndarray:
    """scikit-survival's ``(event bool, time float)`` record array."""
    y = np.empty(len(time), dtype=[("event", bool), ("time", float)])
    y["event"], y["time"] = np.asarray(event, bool), np.asarray(time, float)
    return y


def c_index(time: np.ndarray, event: np.ndarray, risk: np.ndarray) -> float:
    """Harrell's concordance index (higher risk should fail earlier); scikit-survival's implementation."""
    from sksurv.metrics import concordance_index_censored

    return float(concordance_index_censored(np.asarray(event, bool), np.asarray(time, float), np.asarray(risk))[0])


def evaluation_times(train_time: np.ndarray, test_time: np.ndarray, n: int = 50, q: tuple = (0.1, 0.9)) -> np.ndarray:
    """``n`` times between the ``q`` quantiles of the test times, clipped inside the training follow-up
    (the IBS estimator's censoring model needs them there)."""
    lo, hi = np.quantile(test_time, q)
    hi = min(hi, np.max(train_time) * 0.999)
    lo = max(lo, np.min(test_time))
    return np.linspace(lo, hi, n)


def integrated_brier_score(
    train_time, train_event, test_time, test_event, survival: np.ndarray, times: np.ndarray
) -> float:
    """IPCW integrated Brier score (Graf et al. 1999) of ``survival (n_test, T)`` at ``times (T,)``; lower is better.
    Uses scikit-survival's estimator (censoring distribution from the training split)."""
    from sksurv.metrics import integrated_brier_score as ibs

    return float(ibs(structured_y(train_time, train_event), structured_y(test_time, test_event), survival, times))
