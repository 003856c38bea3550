"""Run every detector (the four trace scores and the baselines) on one deployed model and score them.

The authors' evaluation filter (paper §3): *benign* = clean evaluation images the model classifies correctly,
*anomalous* = triggered copies the model sends to the target class; images whose true class is the target are left
out (BackdoorBench's ``bd_test`` omits them). The trusted references are the trusted images classified correctly.
Thresholds come from the held-out calibration part of the evaluation images (clean, filtered) at ``fpr``; every
metric is measured on the rest.
"""

from __future__ import annotations

import time

import torch
from torch import nn

from zoo.methods.mad.baselines import Mahalanobis, penultimate, spectral_scores, strip_scores
from zoo.methods.mad.datamodule import BackdoorDataModule
from zoo.methods.mad.metrics import auroc, best_der, der_backdoorbench, detector_der, rates, threshold_at_fpr
from zoo.methods.mad.scores import SCORES, anomaly_scores
from zoo.methods.mad.sgld import sample_traces

BASELINES = ("strip", "mahalanobis", "spectral")


@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor, batch: int = 512) -> torch.Tensor:
    """Predicted classes ``(N,)`` of ``x (N, C, H, W)``."""
    return torch.cat([model(x[i : i + batch]).argmax(1) for i in range(0, len(x), batch)])


def detector_metrics(score: torch.Tensor, parts: dict, fpr: float) -> dict:
    """AUROC, both DERs, TPR/FPR of one detector's anomaly scores over the evaluation parts (see module doc).

    Args:
        score: ``{"eval": (E,), "triggered": (E,), "ood": (O,) or None}`` anomaly scores, packed as a dict.
        parts: masks from :func:`evaluation_parts`.
    """
    clean, trig = score["eval"], score["triggered"]
    held = clean[parts["benign"] & parts["calib"]]
    benign, anomalous = clean[parts["benign"] & ~parts["calib"]], trig[parts["anomalous"] & ~parts["calib"]]
    if min(len(anomalous), len(benign), len(held)) == 0:  # e.g. an attack that never fired: nothing to detect
        return dict.fromkeys(("auroc", "der_fixed", "der_best", "der_backdoorbench", "tpr", "fpr", "threshold"))
    tau = threshold_at_fpr(held, fpr)
    tpr, fpr_test = rates(benign, anomalous, tau)
    test, non_target = ~parts["calib"], ~parts["calib"] & parts["non_target"]
    correct, hit = parts["correct"], parts["to_target"]
    acc0, asr0 = correct[test].double().mean(), hit[non_target].double().mean()
    acc1 = (correct & ~(clean > tau))[test].double().mean()
    asr1 = (hit & ~(trig > tau))[non_target].double().mean()
    out = {
        "auroc": auroc(benign, anomalous),
        "der_fixed": detector_der(tpr, fpr_test),
        "der_best": best_der(benign, anomalous),
        "der_backdoorbench": der_backdoorbench(float(acc0), float(acc1), float(asr0), float(asr1)),
        "tpr": tpr,
        "fpr": fpr_test,
        "threshold": tau,
    }
    if score.get("ood") is not None:
        out["auroc_ood"] = auroc(benign, score["ood"])
    return out


def evaluation_parts(dm: BackdoorDataModule, pred_eval: torch.Tensor, pred_trig: torch.Tensor) -> dict:
    """Boolean masks over the evaluation images ``(E,)``: correct, to_target, non_target, benign, anomalous, calib."""
    non_target = dm.eval.y != dm.target
    correct, to_target = pred_eval == dm.eval.y, pred_trig == dm.target
    return {
        "correct": correct,
        "to_target": to_target,
        "non_target": non_target,
        "calib": dm.calib,
        "benign": correct & non_target,
        "anomalous": to_target & non_target,
    }


def run_detection(
    model: nn.Module,
    dm: BackdoorDataModule,
    detectors: list[str] | None = None,
    draws: int = 2000,
    burn_in: int = 250,
    chunk: int = 32,
    sgld: dict | None = None,
    fpr: float = 0.05,
    strip_overlays: int = 8,
    seed: int = 42,
) -> dict:
    """Score the evaluation images and their triggered copies (and OOD images when the datamodule has them).

    Args:
        model: the deployed classifier (eval mode is set here; weights are restored after sampling).
        dm: a set-up :class:`BackdoorDataModule`.
        detectors: names from :data:`scores.SCORES` and :data:`BASELINES` (default all).
        draws, burn_in, chunk, sgld, seed: settings of :func:`sgld.sample_traces`.
        fpr: target false-positive rate of the held-out threshold; strip_overlays: STRIP's blends per input.
    Returns:
        ``{"metrics": {detector: {...}}, "scores": {detector: {"eval", "triggered", "ood"}}, "clean_acc", "asr",
        "n_benign", "n_anomalous", "n_references", "seconds": {detector: s}, "split": {...}}``.
    Raises:
        ValueError: an unknown detector, or no correctly classified trusted image.
    """
    detectors = list(detectors or [*SCORES, *BASELINES])
    unknown = sorted(set(detectors) - set(SCORES) - set(BASELINES))
    if unknown:
        raise ValueError(f"unknown detectors {unknown}; choose from {[*SCORES, *BASELINES]}")
    model.eval()
    groups = {"trusted": dm.trusted.x, "eval": dm.eval.x, "triggered": dm.eval_triggered}
    if dm.ood is not None:
        groups["ood"] = dm.ood
    x_all = torch.cat(list(groups.values()))
    bounds, start = {}, 0
    for k, v in groups.items():
        bounds[k], start = slice(start, start + len(v)), start + len(v)
    y_hat = predict(model, x_all)
    ref = torch.where(y_hat[bounds["trusted"]] == dm.trusted.y)[0]
    if len(ref) == 0:
        raise ValueError("no trusted image is classified correctly: nothing to compare with")
    parts = evaluation_parts(dm, y_hat[bounds["eval"]], y_hat[bounds["triggered"]])
    scores, seconds = {}, {}
    trace_names = [d for d in detectors if d in SCORES]
    if trace_names:
        t0 = time.perf_counter()
        moments = sample_traces(
            model, dm.sampling_dataloader(seed), x_all, y_hat, ref, draws, burn_in, chunk, seed=seed, **(sgld or {})
        )
        for name, s in anomaly_scores(moments, y_hat[ref], trace_names).items():
            scores[name] = s
        seconds["sgld"] = time.perf_counter() - t0
    pool = slice(bounds["eval"].start, x_all.shape[0])  # the untrusted inputs
    feats = penultimate(model, x_all) if {"mahalanobis", "spectral"} & set(detectors) else None
    for name in (d for d in detectors if d in BASELINES):
        t0 = time.perf_counter()
        s = torch.zeros(len(x_all))
        if name == "strip":
            s[pool] = strip_scores(model, x_all[pool], dm.trusted.x, strip_overlays, seed)
        elif name == "mahalanobis":
            s[pool] = Mahalanobis(feats[ref], dm.trusted.y[ref]).score(feats[pool])
        else:
            s[pool] = spectral_scores(feats[pool], y_hat[pool])
        scores[name], seconds[name] = s, time.perf_counter() - t0
    split = {k: {g: s[b] for g, b in bounds.items() if g != "trusted"} for k, s in scores.items()}
    return {
        "metrics": {k: detector_metrics(split[k], parts, fpr) for k in detectors},
        "scores": split,
        "clean_acc": float(parts["correct"].double().mean()),
        "asr": float(parts["to_target"][parts["non_target"]].double().mean()),
        "n_benign": int((parts["benign"] & ~dm.calib).sum()),
        "n_anomalous": int((parts["anomalous"] & ~dm.calib).sum()),
        "n_references": len(ref),
        "seconds": seconds,
        "split": dm.split_summary(),
    }
