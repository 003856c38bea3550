"""Detection metrics: AUROC, BackdoorBench's DER and its detector form (paper §3 "DER").

- ``der_backdoorbench``: ``DER = [max(0, dASR) - max(0, dACC) + 1] / 2`` (Zhu et al. 2023, FT-SAM; BackdoorBench v2),
  with ``dASR = ASR_before - ASR_after`` and ``dACC = ACC_before - ACC_after``.
- For an input-level detector that rejects flagged inputs at threshold ``tau``, on the evaluation filter's sets
  (benign inputs all correct, anomalous ones all sent to the target, so ASR_0 = ACC_0 = 1):
  ``DER(tau) = (1 + TPR - FPR) / 2`` (*ours*: derived in the notes). ``tau`` is chosen on held-out clean data at a
  target false-positive rate (the deployable number); ``best_der`` is ``(1 + max_tau (TPR - FPR)) / 2`` (the
  post-hoc best threshold, labelled as such wherever it is reported).
"""

from __future__ import annotations

import torch


def auroc(benign: torch.Tensor, anomalous: torch.Tensor) -> float:
    """Area under the ROC curve of anomaly scores (higher = anomalous): ``P(s_anom > s_benign) + 0.5 P(tie)``.

    Raises:
        ValueError: an empty set.
    """
    if len(benign) == 0 or len(anomalous) == 0:
        raise ValueError("AUROC needs at least one benign and one anomalous score")
    b, a = benign.double().flatten(), anomalous.double().flatten()
    greater = (a[:, None] > b[None, :]).double().mean()
    ties = (a[:, None] == b[None, :]).double().mean()
    return float(greater + 0.5 * ties)


def der_backdoorbench(acc_before: float, acc_after: float, asr_before: float, asr_after: float) -> float:
    """BackdoorBench's Defense Effectiveness Rating in ``[0, 1]`` (accuracies and ASRs as fractions)."""
    return (max(0.0, asr_before - asr_after) - max(0.0, acc_before - acc_after) + 1) / 2


def detector_der(tpr: float, fpr: float) -> float:
    """``(1 + TPR - FPR) / 2``: DER of rejecting flagged inputs on the filtered evaluation sets."""
    return (1 + tpr - fpr) / 2


def threshold_at_fpr(held_out_benign: torch.Tensor, fpr: float = 0.05) -> float:
    """The threshold flagging (``score > tau``) about ``fpr`` of held-out clean scores: their ``1 - fpr`` quantile."""
    return float(torch.quantile(held_out_benign.double(), 1 - fpr))


def rates(benign: torch.Tensor, anomalous: torch.Tensor, tau: float) -> tuple[float, float]:
    """``(TPR, FPR)`` of flagging ``score > tau``."""
    return float((anomalous > tau).double().mean()), float((benign > tau).double().mean())


def best_der(benign: torch.Tensor, anomalous: torch.Tensor) -> float:
    """``(1 + max_tau (TPR - FPR)) / 2`` over every threshold (post hoc: uses the labels it is scored on)."""
    taus = torch.cat([benign, anomalous, torch.tensor([-float("inf")])]).unique()
    best = max(t - f for t, f in (rates(benign, anomalous, float(tau)) for tau in taus))
    return detector_der(best, 0.0)
