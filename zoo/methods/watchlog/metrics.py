"""Window-detection metrics of WatchLog's tables: precision / recall / F1 at a threshold and the F1-best threshold.

Both are thin wrappers over scikit-learn (``precision_recall_fscore_support``, ``precision_recall_curve``) so the
numbers in ``results/watchlog/*.json`` come from a library, not from our own counting.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.metrics import accuracy_score, precision_recall_curve, precision_recall_fscore_support


def _np(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def classification_metrics(prob: torch.Tensor, label: torch.Tensor, threshold: float = 0.5) -> dict[str, float]:
    """Accuracy, precision, recall and F1 of the malicious class (label 1) when ``prob >= threshold`` flags a window.

    Args:
        prob: ``(n,)`` predicted probabilities (or any score); label: ``(n,)`` 0/1.
        threshold: a window is called malicious when its probability is at least this.
    Returns:
        ``{"accuracy", "precision", "recall", "f1"}`` as floats; an undefined ratio (no predicted or no actual
        positives) is 0, and all four are 0 for empty input.
    """
    p, y = _np(prob), _np(label).astype(int)
    if y.size == 0:
        return {"accuracy": 0.0, "precision": 0.0, "recall": 0.0, "f1": 0.0}
    pred = (p >= threshold).astype(int)
    prec, rec, f1, _ = precision_recall_fscore_support(
        y, pred, labels=[1], average="binary", pos_label=1, zero_division=0
    )
    return {"accuracy": float(accuracy_score(y, pred)), "precision": float(prec), "recall": float(rec), "f1": float(f1)}


def best_f1_threshold(prob: torch.Tensor, label: torch.Tensor) -> float:
    """The predicted probability that, used as the threshold (``prob >= t``), maximises F1 on ``(prob, label)``.

    Args:
        prob: ``(n,)`` predicted probabilities; label: ``(n,)`` 0/1; n >= 1.
    Returns:
        One of the values of ``prob``: the lowest of those reaching the highest F1 (the lowest value when no window
        is malicious, where F1 is 0 at every threshold). O(n log n) through ``precision_recall_curve``.
    Raises:
        ValueError: empty input.
    """
    p, y = _np(prob), _np(label).astype(int)
    if p.size == 0:
        raise ValueError("best_f1_threshold: no predictions")
    if not y.any():
        return float(p.min())
    precision, recall, thresholds = precision_recall_curve(y, p, drop_intermediate=False)
    precision, recall = precision[:-1], recall[:-1]  # the last point (recall 0) has no threshold
    denom = precision + recall
    f1 = np.divide(2 * precision * recall, denom, out=np.zeros_like(denom), where=denom > 0)
    # thresholds are ascending, so argmax (first maximum) is the lowest F1-best threshold; a threshold above every
    # positive is missing from the curve, but its F1 is 0 and one of the curve's thresholds has recall > 0
    return float(thresholds[int(np.argmax(f1))])
