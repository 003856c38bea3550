"""SurvFD and SurvSHAP-IQ on the closed-form simulations: the paper's checks as tests (issue #16)."""

import numpy as np
import pytest
import shapiq

from zoo.methods.survshap_iq.decomposition import all_coalitions, classify_components, moebius_transform, survfd
from zoo.methods.survshap_iq.experiments import disjoint_split
from zoo.methods.survshap_iq.explain import survshap_iq, survshap_iq_separate
from zoo.methods.survshap_iq.metrics import centring_gap, local_accuracy
from zoo.methods.survshap_iq.survival_models import ClosedFormModel, SksurvModel
from zoo.methods.survshap_iq.synthetic import asymmetry_scenario, scenario, symmetric_background

TIMES = np.linspace(1.0, 69.0, 11)
BG = symmetric_background(64, seed=0)


def test_closed_form_cumulative_hazard_integrates_hazard():
    for k in (1, 5, 10):
        sc = scenario(k)
        X = np.random.default_rng(k).standard_normal((5, 3))
        grid = np.linspace(0, 40, 40001)
        H_num = np.trapezoid(sc.hazard(X, grid), grid, axis=1)
        assert np.allclose(sc.cumulative_hazard(X, [40.0])[:, 0], H_num, rtol=1e-6)


def test_sampled_times_follow_the_survival_function():
    sc = scenario(4)
    X, t, e = sc.sample(20000, seed=1)
    for s in (5.0, 20.0, 60.0):  # no censoring before 70: empirical P(T > s) = mean_i S(s|x_i)
        assert abs((t > s).mean() - sc.survival(X, [s]).mean()) < 0.015
    assert np.all(t[~e] == 70.0)


def test_scenarios_are_the_ten_of_the_corrections():
    names = [scenario(k).name for k in range(1, 11)]
    assert len(set(names)) == 10 and names[0] == "linear/ti-main" and names[9] == "additive/td-interaction"
    with pytest.raises(ValueError):
        scenario(11)


def test_moebius_matches_shapiq_and_reconstructs():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(8, 2))
    ours = moebius_transform(values, 3)
    coal = all_coalitions(3)
    lookup = {tuple(np.flatnonzero(c)): i for i, c in enumerate(coal)}
    for col in range(2):

        def game(C, col=col):
            return np.array([values[lookup[tuple(np.flatnonzero(c))], col] for c in C])

        mob = shapiq.ExactComputer(game, n_players=3)("Moebius", 3)
        for s, pos in mob.interaction_lookup.items():
            assert ours[lookup[s], col] == pytest.approx(mob.values[pos], abs=1e-12)
    sc = scenario(8)
    X = rng.standard_normal((3, 3))
    dec = survfd(lambda Z: sc.log_hazard(Z, TIMES), X, BG, TIMES)
    assert np.allclose(dec.reconstruct(), sc.log_hazard(X, TIMES), atol=1e-10)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6, 7])
def test_theorem_3_2_recovers_the_true_partition(k):
    sc = scenario(k)
    assert sc.theorem_3_2_applies
    X, _, _ = sc.sample(30, seed=k)
    dec = survfd(lambda Z: sc.log_hazard(Z, TIMES), X, BG, TIMES)
    assert classify_components(dec) == sc.true_partition()


def test_theorem_3_2_on_a_fitted_cox_model():
    """A Cox PH fit of scenario 1 (linear, time-independent) is additive in x with time only in h_0, so SurvFD of
    its log-hazard recovers the true partition at the fitted-model tolerance (it failed while H came from -log S,
    which saturates where S underflows)."""
    sc = scenario(1)
    X, t, e = sc.sample(1000, seed=0)
    model = SksurvModel("coxph").fit(X, t, e)
    times = np.linspace(1.0, 69.0, 41)
    dec = survfd(model.target("log_hazard", times), X[:8], symmetric_background(200, seed=0), times)
    assert classify_components(dec, rel_tol=0.01) == sc.true_partition()


def test_theorem_3_3_asymmetric_propagation():
    sc = asymmetry_scenario()  # Z = {x1, x3} time-dependent, {x1, x2, x3} time-independent
    X, _, _ = sc.sample(30, seed=0)
    part = classify_components(survfd(lambda Z: sc.log_hazard(Z, TIMES), X, BG, TIMES))
    assert sc.true_partition()[(0,)] == "ti" and part[(0,)] == "td"  # downward: subset of Z looks td
    assert part[(0, 2)] == "td" and part[(2,)] == "ti"
    assert part[(0, 1, 2)] == "ti"  # upward: superset stays ti
    # scenario 10 (outside Thm 3.2): the x1 x3^2 log(t+1) term propagates down to x1 the same way
    s10 = scenario(10)
    p10 = classify_components(survfd(lambda Z: s10.log_hazard(Z, TIMES), X, BG, TIMES))
    assert s10.true_partition()[(0,)] == "ti" and p10[(0,)] == "td"


@pytest.mark.parametrize("index,order", [("SV", 1), ("k-SII", 2), ("FSII", 2), ("STII", 2), ("k-SII", 3)])
def test_efficiency_at_every_time_point(index, order):
    model = ClosedFormModel(scenario(9))
    x = np.array([0.7, -1.2, 0.4])
    for scale in ("survival", "hazard", "log_hazard"):
        c = survshap_iq(model.target(scale, TIMES), x, BG, TIMES, index=index, max_order=order)
        scale_size = np.abs(c.prediction).max()
        assert np.abs(c.efficiency_gap()).max() < 1e-6 * max(1.0, scale_size)  # FSII: a least-squares solve


def test_vectorised_pass_equals_separate_shapiq_runs():
    f = ClosedFormModel(scenario(3)).target("survival", TIMES)
    x = np.array([1.0, 0.5, -1.5])
    for approximator, index in (("exact", "k-SII"), ("kernel", "k-SII"), ("svarm", "k-SII")):
        a = survshap_iq(f, x, BG, TIMES, index=index, approximator=approximator, budget=6)
        b = survshap_iq_separate(f, x, BG, TIMES, index=index, approximator=approximator, budget=6)
        assert a.interactions == b.interactions
        assert np.allclose(a.values, b.values, atol=1e-12)
    assert a.model_rows == 6 * len(BG)  # approximators: each budgeted coalition evaluated once for all t


def test_shapley_values_from_moebius():
    """SV_i = sum_{S contains i} m(S) / |S|: an independent route to shapiq's SV."""
    sc = scenario(8)
    x = np.array([0.3, 1.1, -0.8])
    dec = survfd(lambda Z: sc.survival(Z, TIMES), x[None], BG, TIMES)
    sets = dec.sets()
    sv = np.array(
        [
            [sum(dec.components[0, m, t] / len(s) for m, s in enumerate(sets) if i in s) for i in range(3)]
            for t in range(len(TIMES))
        ]
    )
    c = survshap_iq(ClosedFormModel(sc).target("survival", TIMES), x, BG, TIMES, index="SV", max_order=1)
    assert np.allclose(c.values, sv, atol=1e-12)


def test_survival_scale_carries_interactions_log_hazard_does_not():
    model, x = ClosedFormModel(scenario(3)), np.array([1.0, 1.0, 1.0])  # G has only the x1 x3 interaction
    lh = survshap_iq(model.target("log_hazard", TIMES), x, BG, TIMES)
    s = survshap_iq(model.target("survival", TIMES), x, BG, TIMES)
    pair = {k: i for i, k in enumerate(lh.interactions)}
    assert np.abs(lh.values[:, pair[(0, 1)]]).max() < 1e-12 and np.abs(lh.values[:, pair[(1, 2)]]).max() < 1e-12
    assert np.abs(s.values[:, pair[(0, 1)]]).max() > 1e-3 and np.abs(s.values[:, pair[(1, 2)]]).max() > 1e-3


def test_local_accuracy_cannot_fail_when_the_background_is_the_explained_set():
    """The authors' LA centres by the mean over the explained points. With those points as the background, exact
    k-SII and a wrong but efficient attribution (everything on x2) both score exactly 0, so "LA = 0" checks nothing
    (issue 39). With a disjoint background both score the same non-zero value, centring_gap: the gap between the
    two sample means."""
    sc = scenario(3)
    X, t, e = sc.sample(400, seed=3)
    ip, ib = disjoint_split(len(X), 30, 60, seed=0)
    assert not set(ip) & set(ib)
    for model in (ClosedFormModel(sc), SksurvModel("coxph").fit(X, t, e)):
        f = model.target("survival", TIMES)
        pts = X[ip]
        F = f(pts)
        for background, zero in ((pts, True), (X[ib], False)):
            curves = [survshap_iq(f, x, background, TIMES) for x in pts]
            exact = local_accuracy(F, np.stack([c.values.sum(1) for c in curves]))
            wrong = local_accuracy(F, F - f(background).mean(axis=0))  # one player takes everything
            assert np.allclose(exact, wrong, atol=1e-12)
            assert np.allclose(exact, centring_gap(F, f(background).mean(axis=0)), atol=1e-12)
            assert (exact.max() < 1e-12) == zero
        assert exact.max() > 0.01


def test_centring_gap_by_hand_and_per_point_baselines():
    F = np.array([[1.0], [3.0]])
    assert centring_gap(F, np.array([2.0]))[0] == 0.0
    assert centring_gap(F, np.array([3.0]))[0] == pytest.approx(np.sqrt(1.0 / 5.0))
    assert centring_gap(F, np.array([[1.0], [3.0]]))[0] == pytest.approx(np.sqrt(1.0 / 5.0))  # gaps -1, +1


def test_disjoint_split_refuses_overlap():
    ip, ib = disjoint_split(10, 4, 6, seed=1)
    assert sorted(np.concatenate([ip, ib]).tolist()) == list(range(10))
    with pytest.raises(ValueError, match="do not fit"):
        disjoint_split(10, 5, 6, seed=1)


def test_local_accuracy_hand_values():
    F = np.array([[1.0], [3.0]])
    assert local_accuracy(F, np.array([[-1.0], [1.0]]))[0] == 0.0
    assert local_accuracy(F, np.zeros((2, 1)))[0] == pytest.approx(np.sqrt(1.0 / 5.0))


@pytest.mark.parametrize(
    "index,order", [("SV", 1), ("k-SII", 2), ("k-SII", 3), ("FSII", 2), ("STII", 2), ("SII", 2), ("Moebius", 4)]
)
def test_index_operator_equals_shapiq_on_a_random_game(index, order):
    from zoo.methods.survshap_iq.explain import index_operator

    rng = np.random.default_rng(1)
    v = rng.normal(size=16)
    v[0] = 0.0
    weights = 1 << np.arange(4)

    def game(C):
        return v[C.astype(int) @ weights]

    iv = shapiq.ExactComputer(game, n_players=4)(index, order)
    sets, W = index_operator(4, index, order)
    ours = W @ moebius_transform(v[:, None], 4)[:, 0]
    for K, val in zip(sets, ours):
        assert val == pytest.approx(iv[K], abs=1e-9)
