"""Release-anchored Poisson trends: planted breaks, statsmodels' GLM, V_j and the HAC bandwidth by hand, real data."""

import numpy as np
import pytest

from zoo.methods.pulse.replay import hac_lags, slope_test
from zoo.methods.pulse.series import FeatureSeries, read_series
from zoo.methods.pulse.trend import (
    all_masks,
    anchors_inside,
    fit_subsets,
    hinge_design,
    knot_rows,
    poisson_nll,
    salience,
    select_changepoints,
)


def _series(lam, n, start="2023-01-01"):
    """Generated (not real): Poisson counts with rate n * lam per day."""
    dates = [str(np.datetime64(start) + i) for i in range(len(lam))]
    rng = np.random.default_rng(0)
    y = rng.poisson(n * lam)
    return FeatureSeries(dates, n, y[None, :], [0], ["planted"], np.full(len(lam), np.nan), "generated")


def _planted(break_day="2024-05-13"):
    t = np.arange(1065)
    tau = (np.datetime64(break_day) - np.datetime64("2023-01-01")).astype(int)
    lam = 0.01 + 0.00004 * np.maximum(t - tau, 0)
    return _series(lam, np.full(1065, 400))


@pytest.mark.parametrize("search", ["exact", "greedy"])
def test_planted_break_is_found(search):
    s = _planted()
    anchors = anchors_inside(s)[3:9]  # six releases around the planted one: 64 subsets keep the test fast
    fit = select_changepoints(s, 0, search=search, anchors=anchors)
    assert fit.changepoints == ["2024-05-13"]
    assert fit.ratio == pytest.approx(s.fractions[0, -60:].mean() / s.fractions[0, :200].mean(), rel=0.25)


def test_no_break_in_a_flat_series():
    s = _series(np.full(500, 0.02), np.full(500, 100))
    assert select_changepoints(s, 0, search="greedy").changepoints == []


def test_fit_matches_statsmodels_glm_and_nll():
    sm = pytest.importorskip("statsmodels.api")
    s = _planted()
    anchors = anchors_inside(s)
    X, y, n = hinge_design(s, anchors), s.counts[0].astype(float), s.n_posts.astype(float)
    masks = all_masks(len(anchors))[[1, 37, 200]]
    theta, nll = fit_subsets(X, y, n, masks, knots=knot_rows(s, anchors))
    assert np.allclose(nll, poisson_nll(theta, X, y, n), rtol=1e-10)
    for k, m in enumerate(masks):
        glm = sm.GLM(y, (n[:, None] * X)[:, m], family=sm.families.Poisson(sm.families.links.Identity()))
        ref = glm.fit(start_params=np.r_[y.sum() / n.sum(), np.zeros(m.sum() - 1)], tol=1e-12, maxiter=300)
        assert np.allclose(theta[k, m], ref.params, atol=1e-4, rtol=1e-4)
        assert -ref.llf == pytest.approx(nll[k], rel=1e-6)


def test_salience_by_hand():
    # anchors at 1 and 2 years in a 3-year window: gaps (1, 1) and (1, 1); |gamma| (0.02, 0.01); range 0.04
    v = salience(np.array([0.02, -0.01]), np.array([1.0, 2.0]), 3.0, 0.04)
    assert np.allclose(v, [0.5, 0.25])
    # one anchor at 0.5 in a 3-year window: min(0.5, 2.5) = 0.5
    assert salience(np.array([0.01]), np.array([0.5]), 3.0, 0.1)[0] == pytest.approx(0.05)


def test_hac_bandwidth_and_slope_test():
    assert hac_lags(1065) == 30  # 4 (10.65)^(2/9) = 6.77 -> 6, floor at 30
    assert hac_lags(10**7) == int(np.floor(4 * 1e5 ** (2 / 9))) == 51
    y = 0.01 + 0.00003 * np.arange(1000)  # r = (a + bT)/a = 1 + 0.03/0.01 = 4
    out = slope_test(y + 1e-5 * np.random.default_rng(0).standard_normal(1000))
    assert out["ols_ratio"] == pytest.approx(4.0, rel=0.01) and out["p_up"] < 1e-6 and out["p_down"] > 0.5


def test_real_therapy_series_breaks_at_gpt4o():
    s = read_series("data/pulse-aggregates/feature_series_historical.json").window("2023-01-01", "2025-11-30")
    fit = select_changepoints(s, 9, search="greedy")
    assert fit.changepoints[0] == "2024-05-13" and 3.0 < fit.ratio < 8.0


def test_default_objective_is_the_papers_on_the_fraction():
    """``select_changepoints`` minimises sum_t lambda_t - f_t log lambda_t on the daily fraction (paper App. B.2),
    not the count likelihood with exposure and log y! (whose scale moves the eta stop)."""
    s = _planted()
    anchors = anchors_inside(s)[3:9]
    fit = select_changepoints(s, 0, search="exact", anchors=anchors)
    f = s.counts[0] / s.n_posts
    lam = fit.fitted
    assert fit.path[len(fit.changepoints)] == pytest.approx(float(np.sum(lam - f * np.log(lam))), rel=1e-9)
    count = select_changepoints(s, 0, search="exact", anchors=anchors, objective="count")
    X = hinge_design(s, anchors)
    theta = np.r_[count.beta0, np.zeros(len(anchors))]
    theta[1 + anchors.index("2024-05-13")] = count.gamma[0]
    assert count.path[1] == pytest.approx(
        float(poisson_nll(theta[None], X, s.counts[0].astype(float), s.n_posts.astype(float))[0]), rel=1e-9
    )
    with pytest.raises(ValueError, match="objective"):
        select_changepoints(s, 0, objective="counts")


def test_attachment_selects_gpt5_only_under_the_count_objective():
    s = read_series("data/pulse-aggregates/feature_series_historical.json").window("2023-01-01", "2025-11-30")
    assert select_changepoints(s, 119, search="greedy").changepoints == ["2024-05-13"]
    assert select_changepoints(s, 119, search="greedy", objective="count").changepoints == ["2024-05-13", "2025-08-07"]
