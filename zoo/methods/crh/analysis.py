"""The CRH correlation tests (§6.2 Implication 2, §6.3 Implication 3): Pearson/Spearman coefficients from
torchmetrics with scipy p-values, the exponent grid with a permutation test for its maximum, the LRH contrast
(partial correlation given |mu_c|), and a t-interval of a coefficient over seeds."""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
from scipy import stats
from torchmetrics.functional import pearson_corrcoef, spearman_corrcoef

GRID_A = (0.0, 1.0, 2.0, 3.0)
GRID_P = (0.5, 1.0, 2.0, 3.0)
GRID_T = (-2.0, -1.0, -0.5, 0.0, 0.5, 1.0)


def sin_cos(sin: np.ndarray, cos: np.ndarray, p: float = 2.0, t: float = -1.0) -> np.ndarray:
    """The CRH predictor ``sin^p(theta) cos^t(theta)`` (defaults p = 2, t = -1: ``sin^2 / cos``)."""
    cos = np.where(np.abs(cos) < 1e-10, 1e-10, cos)
    return np.abs(sin) ** p * np.sign(cos) * np.abs(cos) ** t


def correlate(x, y) -> dict[str, float | int | None]:
    """Pearson and Spearman coefficients of ``x, y [N]`` (torchmetrics) with two-sided scipy p-values.

    Returns:
        ``{"n", "pearson_r", "pearson_p", "spearman_rho", "spearman_p"}``; coefficients ``None`` for n < 3 or a
        constant input.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    out: dict[str, float | int | None] = {
        "n": len(x),
        "pearson_r": None,
        "pearson_p": None,
        "spearman_rho": None,
        "spearman_p": None,
    }
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return out
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    out["pearson_r"] = float(pearson_corrcoef(tx, ty))
    out["spearman_rho"] = float(spearman_corrcoef(tx, ty))
    out["pearson_p"] = float(stats.pearsonr(x, y).pvalue)
    out["spearman_p"] = float(stats.spearmanr(x, y).pvalue)
    return out


def partial_correlation(x, y, z) -> dict[str, float | int | None]:
    """Correlation of ``x`` and ``y`` after regressing each linearly on ``z`` (with an intercept): the LRH contrast
    (does the angle predict steerability beyond the axis length ``z = |mu_c|``?). Same keys as :func:`correlate`;
    the p-values use the residuals (n - 1 dof would be exact; the difference is negligible at n >= 30)."""
    z1 = np.column_stack([np.ones(len(z)), np.asarray(z, float)])

    def resid(v):
        v = np.asarray(v, float)
        return v - z1 @ np.linalg.lstsq(z1, v, rcond=None)[0]

    return correlate(resid(x), resid(y))


def _grid_r(y_over_mu: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """Pearson r of each row of ``y_over_mu [A, N]`` with each row of ``xs [X, N]`` -> ``[A, X]``."""

    def z(a):
        a = a - a.mean(axis=-1, keepdims=True)
        return a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-300)

    return z(y_over_mu) @ z(xs).T


def exponent_grid(steer, mu_norm, sin, cos, group, n_perm: int = 200, seed: int = 0) -> dict:
    """Pearson r of ``steer / |mu|^a`` with ``sin^p cos^t`` over the grid ``GRID_A x GRID_P x GRID_T``, and a
    permutation test of the grid maximum.

    Args:
        steer, mu_norm: per point (concept-level values repeated over its questions) ``[N]``.
        sin, cos: per point (the question's angle) ``[N]``.
        group: concept label per point ``[N]``; the permutation shuffles concepts' (steerability, |mu|) pairs
            among concepts, keeping each concept's questions together (the null: angle unrelated to steerability).

    Returns:
        ``{"best": {"a", "p", "t", "pearson_r"}, "perm_p": P(max r under the null >= observed), "n_perm", "cells"}``
        (``None`` values when ``steer`` is constant).
    """
    steer, mu_norm = np.asarray(steer, float), np.asarray(mu_norm, float)
    sin, cos, group = np.asarray(sin, float), np.asarray(cos, float), np.asarray(group)
    if np.ptp(steer) == 0:  # a constant steerability correlates with nothing: undefined, not 0
        return {
            "best": {"a": None, "p": None, "t": None, "pearson_r": None},
            "perm_p": None,
            "n_perm": n_perm,
            "cells": len(GRID_A) * len(GRID_P) * len(GRID_T),
        }
    pt = list(itertools.product(GRID_P, GRID_T))
    xs = np.stack([sin_cos(sin, cos, p, t) for p, t in pt])

    def max_r(s, m):
        ys = np.stack([s / m**a for a in GRID_A])
        return _grid_r(ys, xs)

    obs = max_r(steer, mu_norm)
    i, j = np.unravel_index(np.nanargmax(obs), obs.shape)
    uniq = list(dict.fromkeys(group.tolist()))
    first = {g: int(np.flatnonzero(group == g)[0]) for g in uniq}
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n_perm):
        perm = rng.permutation(len(uniq))
        src = {g: first[uniq[k]] for g, k in zip(uniq, perm)}
        idx = np.array([src[g] for g in group.tolist()])
        hits += bool(np.nanmax(max_r(steer[idx], mu_norm[idx])) >= obs[i, j])
    return {
        "best": {"a": GRID_A[i], "p": pt[j][0], "t": pt[j][1], "pearson_r": float(obs[i, j])},
        "perm_p": (hits + 1) / (n_perm + 1),
        "n_perm": n_perm,
        "cells": int(obs.size),
    }


def seed_interval(values, level: float = 0.95) -> dict[str, float | None]:
    """Mean and two-sided t-interval over seeds of a coefficient (``None`` entries dropped)."""
    v = np.asarray([x for x in values if x is not None], float)
    if len(v) == 0:
        return {"mean": None, "low": None, "high": None, "n": 0}
    if len(v) == 1:
        return {"mean": float(v[0]), "low": None, "high": None, "n": 1}
    half = stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return {"mean": float(v.mean()), "low": float(v.mean() - half), "high": float(v.mean() + half), "n": len(v)}


def implication_tests(
    points: list[dict],
    a: float = 2.0,
    p: float = 2.0,
    t: float = -1.0,
    n_perm: int = 200,
    seed: int = 0,
    measure: str = "steerability",
) -> dict:
    """All correlation tests on per-question points.

    Args:
        points: rows with ``cid``, ``steerability`` (the concept's), ``mu_norm``, ``sin``, ``cos`` (the question's),
            ``sim`` (mean cosine of d_q to the train diffs), ``question_steerability``, ``excluded`` (bool).
        measure: the steerability column (``steerability``, the paper's label slope, or ``soft_steerability``);
            the per-question column is ``question_<measure>``.

    Returns:
        ``implication2`` (correlate at the defaults), ``grid`` (:func:`exponent_grid`), ``lrh_partial`` (partial
        correlation of steerability with ``sin^p cos^t`` given ``|mu_c|``), ``implication3`` (Spearman of the
        per-question steerability with ``sim``; CRH predicts about 0), each with ``n``.
    """
    kept = [r for r in points if not r["excluded"] and r[measure] is not None]
    if len(kept) < 3:
        return {"n_points": len(kept)}
    steer = np.array([r[measure] for r in kept])
    mu = np.array([r["mu_norm"] for r in kept])
    sin, cos = np.array([r["sin"] for r in kept]), np.array([r["cos"] for r in kept])
    x = sin_cos(sin, cos, p, t)
    q3 = [r for r in kept if r.get(f"question_{measure}") is not None]
    return {
        "n_points": len(kept),
        "n_concepts": len({r["cid"] for r in kept}),
        "implication2": correlate(x, steer / mu**a),
        "grid": exponent_grid(steer, mu, sin, cos, [r["cid"] for r in kept], n_perm, seed),
        "lrh_partial": partial_correlation(x, steer, mu),
        "implication3": correlate([r["sim"] for r in q3], [r[f"question_{measure}"] for r in q3]),
    }


def correlation_rows(
    points: dict[str, list[dict]],
    layers: list[int],
    seeds: list[int],
    n_perm: int = 200,
    a: float = 2.0,
    p: float = 2.0,
    t: float = -1.0,
) -> tuple[list[dict], dict]:
    """:func:`implication_tests` per (measure, layer, seed) as table rows, and the t-interval over seeds.

    Args:
        points: ``{measure: per-question points}`` (the rows :func:`implication_tests` takes, with the measure's own
            ``excluded`` flags); layers, seeds: the cells to test.

    Returns:
        ``(rows, ci)``: one row per cell with enough points (Pearson / Spearman of Implication 2, the exponent grid's
        best cell and permutation p, the LRH partial r, Implication 3's Spearman), and ``ci["<measure> layer <l>"]
        [coefficient] = seed_interval(...)``.
    """
    rows = []
    for measure, layer, seed in itertools.product(points, layers, seeds):
        sub = [r for r in points[measure] if r["layer"] == layer and r["seed"] == seed]
        tm = implication_tests(sub, a, p, t, n_perm=n_perm, seed=seed, measure=measure) if sub else {}
        if "implication2" not in tm:
            continue
        grid = tm["grid"]
        rows.append(
            {
                "measure": measure,
                "layer": layer,
                "seed": seed,
                "n_concepts": tm["n_concepts"],
                "n_points": tm["n_points"],
                "pearson_r": tm["implication2"]["pearson_r"],
                "pearson_p": tm["implication2"]["pearson_p"],
                "spearman_rho": tm["implication2"]["spearman_rho"],
                "spearman_p": tm["implication2"]["spearman_p"],
                "grid_best_r": grid["best"]["pearson_r"],
                "grid_best_apt": None
                if grid["perm_p"] is None
                else f"{grid['best']['a']:g},{grid['best']['p']:g},{grid['best']['t']:g}",
                "grid_perm_p": grid["perm_p"],
                "lrh_partial_r": tm["lrh_partial"]["pearson_r"],
                "lrh_partial_p": tm["lrh_partial"]["pearson_p"],
                "impl3_spearman": tm["implication3"]["spearman_rho"],
                "impl3_p": tm["implication3"]["spearman_p"],
            }
        )
    ci = {
        f"{m} layer {layer}": {
            k: seed_interval([r[k] for r in rows if r["layer"] == layer and r["measure"] == m])
            for k in ("pearson_r", "spearman_rho", "lrh_partial_r", "impl3_spearman")
        }
        for m in points
        for layer in layers
    }
    return rows, ci
