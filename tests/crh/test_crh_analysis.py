"""Correlation tests against scipy / numpy on hand-made data."""

import numpy as np
import pytest
from scipy import stats

from zoo.methods.crh.analysis import (
    correlate,
    exponent_grid,
    implication_tests,
    partial_correlation,
    seed_interval,
    sin_cos,
)


def test_correlate_matches_scipy():
    x = np.array([1.0, 2.0, 3.0, 4.0, 6.0])
    y = np.array([2.0, 1.0, 4.0, 3.0, 7.0])
    out = correlate(x, y)
    assert out["pearson_r"] == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-6)
    assert out["spearman_rho"] == pytest.approx(0.8, abs=1e-5)  # 1 - 6 * 4 / (5 * 24)
    assert correlate([1, 1, 1], [1, 2, 3])["pearson_r"] is None


def test_sin_cos_default_is_sin2_over_cos():
    assert sin_cos(np.array([0.8]), np.array([0.6]))[0] == pytest.approx(0.64 / 0.6)


def test_partial_correlation_removes_the_confounder():
    rng = np.random.default_rng(0)
    z = rng.normal(size=200)
    x, y = z + 0.1 * rng.normal(size=200), z + 0.1 * rng.normal(size=200)
    assert correlate(x, y)["pearson_r"] > 0.9
    assert abs(partial_correlation(x, y, z)["pearson_r"]) < 0.2


def test_exponent_grid_finds_the_true_exponents_and_a_small_p():
    rng = np.random.default_rng(0)
    n_c = 30
    cos = rng.uniform(0.3, 0.95, size=n_c)
    sin = np.sqrt(1 - cos**2)
    mu = rng.uniform(1, 3, size=n_c)
    steer = mu**2 * sin**2 / cos
    out = exponent_grid(steer, mu, sin, cos, list(range(n_c)), n_perm=50)
    assert out["best"]["pearson_r"] == pytest.approx(1.0, abs=1e-9)
    assert (out["best"]["a"], out["best"]["p"], out["best"]["t"]) == (2.0, 2.0, -1.0)
    assert out["perm_p"] < 0.05
    assert exponent_grid(np.zeros(n_c), mu, sin, cos, list(range(n_c)), n_perm=5)["perm_p"] is None


def test_implication_tests_drop_excluded_points():
    pts = [
        {
            "cid": c,
            "steerability": 0.1 * c,
            "mu_norm": 1.0,
            "sin": 0.1 * c,
            "cos": 0.9,
            "sim": 0.5,
            "question_steerability": 0.1 * c,
            "excluded": c == 0,
        }
        for c in range(6)
    ]
    out = implication_tests(pts, n_perm=5)
    assert out["n_points"] == 5 and out["implication2"]["pearson_r"] > 0.9


def test_seed_interval():
    out = seed_interval([0.1, 0.2, 0.3])
    half = stats.t.ppf(0.975, 2) * 0.1 / np.sqrt(3)
    assert out["mean"] == pytest.approx(0.2) and out["low"] == pytest.approx(0.2 - half)
    assert seed_interval([None, 0.5]) == {"mean": 0.5, "low": None, "high": None, "n": 1}
