"""Functional couplings between loss traces and the normality scores built on them (paper §3 "Method", steps 3-4).

- Pearson ``rho_ij = cov_ij / (sd_i sd_j)`` (the normalised Bayesian influence function of Kreer et al. 2025);
- Lin's concordance ``CCC_ij = 2 cov_ij / (var_i + var_j + (mu_i - mu_j)^2)``;
- *Mean* scores average an input's couplings over the trusted references, *class* scores (CLC, Class-CCC) take the
  best class-wise average ``max_c mean_{j: y_hat_j = c} C_ij``. The anomaly score is ``-score``.

Denominators carry ``+ EPS`` as in the authors' code, so flat traces (an enormous localisation) give couplings of 0,
never NaN.
"""

from __future__ import annotations

import torch

from zoo.methods.mad.sgld import TraceMoments

EPS = 1e-8
#: score name -> (coupling, aggregation)
SCORES = {
    "mean-corr": ("pearson", "mean"),
    "clc": ("pearson", "class"),
    "mean-ccc": ("ccc", "mean"),
    "class-ccc": ("ccc", "class"),
}


def couplings(m: TraceMoments, kind: str = "pearson") -> torch.Tensor:
    """Coupling of every traced input with every reference, ``(N, R)`` float64.

    Raises:
        ValueError: unknown ``kind`` (``pearson`` | ``ccc``) or no draws folded.
    """
    if m.n == 0:
        raise ValueError("no draws were folded into the trace moments")
    cov, var = m.cov(), m.var()
    if kind == "pearson":
        return cov / (var.sqrt()[:, None] * var[m.ref].sqrt()[None, :] + EPS)
    if kind == "ccc":
        mu = m.mean()
        return 2 * cov / (var[:, None] + var[m.ref][None, :] + (mu[:, None] - mu[m.ref][None, :]) ** 2 + EPS)
    raise ValueError(f"unknown coupling {kind!r}; pearson or ccc")


def aggregate(c: torch.Tensor, how: str, ref_classes: torch.Tensor | None = None) -> torch.Tensor:
    """Normality score per input ``(N,)`` from couplings ``c (N, R)``.

    Args:
        how: ``mean`` (average over references) or ``class`` (best class-wise average; needs ``ref_classes (R,)``,
            the references' predicted classes).
    Raises:
        ValueError: unknown ``how`` or missing ``ref_classes``.
    """
    if how == "mean":
        return c.mean(1)
    if how != "class" or ref_classes is None:
        raise ValueError(f"aggregation {how!r}: use 'mean', or 'class' with ref_classes")
    per_class = [c[:, ref_classes == k].mean(1) for k in ref_classes.unique()]
    return torch.stack(per_class, 1).max(1).values


def anomaly_scores(m: TraceMoments, ref_classes: torch.Tensor, names=tuple(SCORES)) -> dict[str, torch.Tensor]:
    """``{score name: anomaly score (N,)}`` (higher = more anomalous) for each of ``names`` (keys of SCORES)."""
    cache = {}
    out = {}
    for name in names:
        kind, how = SCORES[name]
        if kind not in cache:
            cache[kind] = couplings(m, kind)
        out[name] = -aggregate(cache[kind], how, ref_classes).float()
    return out
