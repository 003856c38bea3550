"""The additive baseline: SurvSHAP(t) (Krzyzinski et al. 2023), first-order Shapley curves of the survival function.

The ``survshap`` package is not used (it is unmaintained and pins old dependencies); this is a clearly labelled
equivalent (ours): shapiq's exact Shapley values of the same marginal game at every time point, i.e. SurvSHAP-IQ
with ``index="SV", max_order=1``. To show where additivity misses interactions we measure, per point and time,
how well each explanation's surrogate game reproduces the true coalition values (Sec. 3.3's motivation):

``R^2 = 1 - sum_M (v(t|M) - v_hat(t|M))^2 / sum_M (v(t|M) - mean_M v(t|M))^2`` over all ``2**p`` coalitions, where
the SV surrogate is ``v_hat(M) = sum_{i in M} phi_i`` and the order-2 Faithful Shapley interaction surrogate is
``v_hat(M) = sum_{K subset M, |K| <= 2} phi_K``.
"""

from __future__ import annotations

import numpy as np

from zoo.methods.survshap_iq.decomposition import Predict, all_coalitions, coalition_values
from zoo.methods.survshap_iq.explain import InteractionCurves, survshap_iq


def survshap_t(predict: Predict, x: np.ndarray, background: np.ndarray, times: np.ndarray) -> InteractionCurves:
    """SurvSHAP(t)-equivalent first-order curves ``phi_i(t|x)``: ``(T, p)`` values in the returned curves."""
    return survshap_iq(predict, x, background, times, index="SV", max_order=1)


def surrogate_r2(curves: InteractionCurves, predict: Predict, x: np.ndarray, background: np.ndarray) -> np.ndarray:
    """``(T,)`` R^2 of the explanation's additive-in-its-terms surrogate game against the exact coalition values."""
    p = len(x)
    coal = all_coalitions(p)
    v = coalition_values(predict, x, background, coal)
    v = v - v[0]  # centred: v(empty) = 0
    member = np.array([[set(K) <= set(np.flatnonzero(c)) for K in curves.interactions] for c in coal], float)
    v_hat = member @ curves.values.T  # (2**p, T)
    ss_res = ((v - v_hat) ** 2).sum(axis=0)
    ss_tot = ((v - v.mean(axis=0)) ** 2).sum(axis=0)
    return 1.0 - ss_res / np.maximum(ss_tot, 1e-300)


def interaction_share(curves: InteractionCurves) -> float:
    """Share of the explanation's total absolute mass carried by terms of order >= 2 (0 for SV)."""
    absval = np.abs(curves.values)
    order = np.array([len(k) for k in curves.interactions])
    return float(absval[:, order >= 2].sum() / max(absval.sum(), 1e-300))
