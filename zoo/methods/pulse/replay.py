"""The replay analysis shared by ``model.stage=replay`` and ``experiments.py``: trend rows, alarm rows, plots."""

from __future__ import annotations

import numpy as np
import statsmodels.api as sm
from scipy.stats import norm

from zoo.methods.pulse.monitor import ARCHIVES, accuracy_test, feature_test
from zoo.methods.pulse.series import FeatureSeries
from zoo.methods.pulse.trend import bootstrap_stability, select_changepoints

#: The paper's seven emotional-engagement features (clusters.json, narrative group ``emotional_engagement``).
EMOTIONAL = [9, 22, 65, 119, 41, 101, 112]


def hac_lags(T: int) -> int:
    """Newey–West bandwidth ``L = max(floor(4 (T/100)^(2/9)), 30)`` (notes §4.4)."""
    return max(int(np.floor(4 * (T / 100) ** (2 / 9))), 30)


def slope_test(frac: np.ndarray, theta: float = 1.10) -> dict[str, float]:
    """OLS ``y_t = a + b t`` (``t = 0..T-1`` days) with Newey–West HAC errors (statsmodels, ``maxlags = L``).

    Returns ``ratio`` ``r = (a + bT)/a`` (the paper's OLS ratio) and one-sided p-values of ``r > theta``
    (``p_up``: the linear contrast ``(1 - theta) a + b T > 0``) and of ``r < 1/theta`` (``p_down``).
    """
    T = len(frac)
    fit = sm.OLS(frac, sm.add_constant(np.arange(T, dtype=float))).fit(
        cov_type="HAC", cov_kwds={"maxlags": hac_lags(T)}
    )
    a, b = fit.params
    out = {"ols_ratio": float((a + b * T) / a), "hac_lags": hac_lags(T)}
    for key, c, side in (("p_up", [1 - theta, T], "larger"), ("p_down", [1 - 1 / theta, T], "smaller")):
        tt = fit.t_test(np.array([c]))
        z = float(np.asarray(tt.tvalue).ravel()[0])
        out[key] = float(norm.sf(z) if side == "larger" else norm.cdf(z))
    return out


def trend_rows(
    series: FeatureSeries,
    features: list[int],
    name: str,
    search: str = "exact",
    n_boot: int = 100,
    seeds: tuple[int, ...] = (0,),
    eta: float = 0.01,
    v_min: float = 0.05,
    alpha: float = 0.05,
    n_tests: int | None = None,
) -> tuple[list[dict], dict]:
    """Per feature and bootstrap seed: changepoints, fitted-trend and OLS ratios, slope test (Bonferroni over
    ``n_tests`` features, default ``len(features)``), bootstrap stability. Returns ``(rows, fits)``."""
    rows, fits = [], {}
    n_tests = n_tests or len(features)
    for f in features:
        fit = select_changepoints(series, f, search=search, eta=eta, v_min=v_min)
        greedy = select_changepoints(series, f, search="greedy", eta=eta, v_min=v_min) if search == "exact" else fit
        fits[f] = fit
        slope = slope_test(series.fractions[series.row(f)])
        p = min(slope["p_up"], slope["p_down"])
        for seed in seeds:
            stab = bootstrap_stability(series, f, n_boot=n_boot, seed=seed, eta=eta, v_min=v_min) if n_boot else {}
            rows.append(
                {
                    "series": name,
                    "feature": f,
                    "label": series.labels[series.row(f)],
                    "seed": seed,
                    "changepoints": fit.changepoints,
                    "greedy_changepoints": greedy.changepoints,
                    "greedy_equals_exact": greedy.changepoints == fit.changepoints,
                    "pruned": fit.pruned,
                    "ratio": fit.ratio,
                    "ols_ratio": slope["ols_ratio"],
                    "slope_p": p,
                    "slope_significant": bool(p * n_tests < alpha),
                    "direction": "up" if slope["p_up"] <= slope["p_down"] else "down",
                    "stable_changepoints": [d for d, s in stab.items() if s >= 0.5],
                    "stability": {d: s for d, s in stab.items() if s > 0},
                    "first_day": series.dates[0],
                    "last_day": series.dates[-1],
                }
            )
    return rows, fits


def alarm_rows(
    archives: dict[str, FeatureSeries],
    feature: int = 57,
    archive: str = "c2",
    start: str = "2024-04-04",
    rs: tuple[int, ...] = (14, 28, 42),
    monitored: tuple[int, ...] = (1, 3, 7),
    alpha: float = 0.1,
    beta: float = 1.05,
    end: str = "2025-11-30",
) -> tuple[list[dict], dict]:
    """Feature alarms (per ``r`` and Bonferroni size) and the accuracy tests of every archive. Returns
    ``(rows, wealth)`` with ``wealth[name] = (dates, log_wealth, alpha, alarm_date)`` for the plot."""
    rows, wealth = [], {}
    for r in rs:
        for n in monitored:
            a = feature_test(archives[archive], feature, start, r=r, alpha=alpha, beta=beta, n_monitored=n, end=end)
            rows.append(
                {
                    "series": archive,
                    "test": "feature",
                    "feature": feature,
                    "r": r,
                    "n_monitored": n,
                    "alpha": a.alpha,
                    "mu0": a.mu0,
                    "start": a.start,
                    "alarm_date": a.alarm_date,
                }
            )
            wealth[f"feature {feature}, r={r}, n={n}"] = (a.dates, a.log_wealth, a.alpha, a.alarm_date)
    for s, (name, trained) in enumerate(ARCHIVES.items()):
        if name not in archives:
            continue
        a = accuracy_test(archives[name], trained, s, alpha=alpha, beta=beta, end=end)
        nxt = list(ARCHIVES.values())[s + 1] if s + 1 < len(ARCHIVES) else None
        rows.append(
            {
                "series": name,
                "test": "accuracy",
                "feature": None,
                "r": None,
                "n_monitored": 1,
                "alpha": a.alpha,
                "mu0": a.mu0,
                "start": a.start,
                "alarm_date": a.alarm_date,
                "paper_retrain": nxt,
            }
        )
        wealth[f"accuracy {name}"] = (a.dates, a.log_wealth, a.alpha, a.alarm_date)
    return rows, wealth
