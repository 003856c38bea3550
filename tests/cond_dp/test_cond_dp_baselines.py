"""Baselines on hand cases: RR-on-Bins, noise-free sufficient statistics = OLS, Laplace scale."""

import math

import numpy as np
import pytest

from zoo.methods.cond_dp.baselines import (
    fit_rr_bins,
    laplace_labels,
    rr_expected_loss,
    rr_on_bins_labels,
    sufficient_statistics,
)


def test_rr_on_bins_two_atoms_by_hand():
    # labels {0, 1} with prior (1/2, 1/2), ε = ln 3: keep probability e^ε / (e^ε + 1) = 3/4.
    # Two bins: ŷ_0 = E[y | output ŷ_0] = (1/2·1/4·1) / (1/2) = 1/4, ŷ_1 = 3/4;
    # loss = 3/4 (1/4)² + 1/4 (3/4)² = 12/64 < 1/4 (one bin at 1/2).
    mech = fit_rr_bins(np.array([0.0, 1.0]), np.array([0.5, 0.5]), math.log(3))
    np.testing.assert_allclose(mech.outputs, [0.25, 0.75], atol=1e-9)
    assert mech.keep == pytest.approx(0.75)
    assert mech.expected_loss == pytest.approx(12 / 64)
    assert rr_expected_loss(np.array([0.0, 1.0]), np.array([0.5, 0.5]), np.array([0.5]), 1.0) == pytest.approx(0.25)
    out = mech.randomise(np.zeros(40_000), np.random.default_rng(0))
    assert np.mean(out == 0.25) == pytest.approx(0.75, abs=0.01)


def test_rr_on_bins_at_tiny_epsilon_outputs_the_mean():
    mech = fit_rr_bins(np.array([0.0, 1.0, 2.0]), np.array([0.2, 0.3, 0.5]), 1e-3)
    # almost no information survives: every output collapses onto the prior mean 1.3, loss -> the variance 0.61
    np.testing.assert_allclose(mech.outputs, 1.3, atol=1e-3)
    assert mech.expected_loss == pytest.approx(0.61, rel=1e-5)
    y = rr_on_bins_labels(np.full(1000, 2.0), 0.0, 8.0, 1e-3, np.random.default_rng(0))
    assert np.ptp(y) < 0.1


def test_noise_free_sufficient_statistics_is_ols():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4))
    y = np.clip(X @ [1.0, -2.0, 0.5, 0.0] + 3 + 0.1 * rng.standard_normal(200), 0, 8)
    w, b = sufficient_statistics(X, y, y_min=0, y_max=8, epsilon=float("inf"), delta=1e-5, ridge=0.0, rng=rng)
    coef, *_ = np.linalg.lstsq(np.hstack([X, np.ones((200, 1))]), y, rcond=None)
    np.testing.assert_allclose(np.append(w, b), coef, atol=1e-8)


def test_laplace_label_noise_scale():
    y = laplace_labels(np.zeros(50_000), 0.0, 8.0, 2.0, np.random.default_rng(0))
    assert np.mean(np.abs(y)) == pytest.approx(4.0, rel=0.03)  # E|Lap(b)| = b = R / ε
