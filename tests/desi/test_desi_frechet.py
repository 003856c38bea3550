"""Known answers for the spaces and the Fréchet weights (DeSI building blocks)."""

import numpy as np
import pytest
import torch
from scipy.stats import norm

from zoo.methods.desi.frechet import cross_fitted_risk, global_weights, local_linear_weights
from zoo.methods.desi.spaces import Space, project_laplacian, quantiles_from_pmf


def _gauss_q(mu, sd, m=201):
    u = np.linspace(0.0005, 0.9995, m)  # interior grid: Gaussian quantiles are infinite at 0 and 1
    return norm.ppf(u, mu, sd)


def test_w2_of_gaussians_matches_closed_form():
    m = 2001
    sp = Space("distribution", m)
    u = np.linspace(0, 1, m)[1:-1]
    q1, q2 = norm.ppf(u, 1.0, 2.0), norm.ppf(u, -0.5, 1.0)
    pad = lambda q, mu: np.concatenate([[mu - 10], q, [mu + 10]])
    d2 = sp.dist2(pad(q1, 1.0), pad(q2, -0.5))
    assert d2 == pytest.approx((1.0 + 0.5) ** 2 + (2.0 - 1.0) ** 2, rel=0.02)


def test_w2_matches_pot():
    ot = pytest.importorskip("ot")
    rng = np.random.default_rng(0)
    a, b = np.sort(rng.normal(size=400)), np.sort(rng.normal(1, 2, size=400))
    m = 400
    # empirical quantile functions on the midpoint grid: equal-weight rectangle rule = W2 between the samples
    sp = Space("distribution", m)
    sp.weights = np.full(m, 1.0 / m)
    assert sp.dist2(a, b) == pytest.approx(ot.wasserstein_1d(a, b, p=2), rel=1e-9)


@pytest.mark.parametrize("kind,m", [("distribution", 11), ("spd", 9), ("composition", 4), ("laplacian", 9)])
def test_one_hot_weights_return_that_sample(kind, m):
    rng = np.random.default_rng(1)
    sp = Space(kind, m, support=(0, 10) if kind == "distribution" else None)
    if kind == "distribution":
        Y = np.sort(rng.uniform(0, 10, (5, m)), 1)
    elif kind == "spd":
        A = rng.normal(size=(5, 3, 3))
        Y = A @ A.transpose(0, 2, 1) + np.eye(3)
    elif kind == "composition":
        Y = rng.dirichlet(np.ones(m), 5)
    else:
        W = rng.uniform(0, 1, (5, 3, 3))
        W = (W + W.transpose(0, 2, 1)) / 2
        Y = np.stack([np.diag(w.sum(1) - np.diag(w)) - (w - np.diag(np.diag(w))) for w in W])
    Z = sp.embed(Y)
    out = sp.to_object(sp.frechet_mean(np.eye(5)[2], Z))[0]
    np.testing.assert_allclose(out, Y[2], atol=1e-6)


def test_local_linear_weights_sum_to_one_and_reproduce_affine():
    g = torch.Generator().manual_seed(0)
    t = torch.randn(50, generator=g, dtype=torch.float64)
    tq = torch.linspace(-1.5, 1.5, 7, dtype=torch.float64)
    for kernel in ("gaussian", "epanechnikov"):
        W = local_linear_weights(t, tq, 0.7, kernel=kernel)
        torch.testing.assert_close(W.sum(1), torch.ones(7, dtype=torch.float64))
        Y = torch.stack([2.0 + 3.0 * t, -1.0 * t], 1)
        torch.testing.assert_close(W @ Y, torch.stack([2.0 + 3.0 * tq, -1.0 * tq], 1))
    W = local_linear_weights(t, t[:5], 0.5, exclude=torch.arange(5))
    assert torch.all(W[torch.arange(5), torch.arange(5)] == 0)
    torch.testing.assert_close(W.sum(1), torch.ones(5, dtype=torch.float64))


def test_gfr_on_euclidean_responses_is_ols():
    rng = np.random.default_rng(2)
    X, Xq = rng.normal(size=(40, 3)), rng.normal(size=(6, 3))
    Y = X @ rng.normal(size=(3, 2)) + rng.normal(size=(40, 2))
    D = np.c_[np.ones(40), X]
    coef = np.linalg.lstsq(D, Y, rcond=None)[0]
    np.testing.assert_allclose(global_weights(X, Xq) @ Y, np.c_[np.ones(6), Xq] @ coef, atol=1e-10)


def test_log_euclidean_mean_matches_geomstats():
    gs = pytest.importorskip("geomstats_shim", reason="geomstats not installed")
    rng = np.random.default_rng(3)
    A = rng.normal(size=(4, 3, 3))
    Y = A @ A.transpose(0, 2, 1) + 0.5 * np.eye(3)
    w = np.array([0.1, 0.2, 0.3, 0.4])
    sp = Space("spd", 9)
    ours = sp.to_object(sp.frechet_mean(w, sp.embed(Y)))[0]
    np.testing.assert_allclose(ours, gs.log_euclidean_mean(Y, w), atol=1e-8)
    np.testing.assert_allclose(
        np.sqrt(sp.dist2(sp.embed(Y[:1]), sp.embed(Y[1:2]))[0]), gs.log_euclidean_dist(Y[0], Y[1]), rtol=1e-8
    )


def test_projection_never_raises_the_loss():
    rng = np.random.default_rng(4)
    sp = Space("distribution", 51, support=(0, 1))
    Y = np.sort(rng.uniform(0, 1, (30, 51)), 1)
    W = local_linear_weights(torch.as_tensor(rng.normal(size=30)), torch.tensor([2.5, -2.5, 0.0]), 0.3).numpy()
    raw = W @ Y
    assert (np.diff(raw, axis=1) < 0).any()  # extrapolation with negative weights leaves the space
    proj = sp.project(raw)
    assert (np.diff(proj, axis=1) >= -1e-12).all()
    for y in Y:
        assert (sp.dist2(proj, y) <= sp.dist2(raw, y) + 1e-12).all()
    L = rng.normal(size=(3, 4, 4))
    P = project_laplacian(L)
    np.testing.assert_allclose(P.sum(2), 0, atol=1e-6)
    assert (P[:, ~np.eye(4, dtype=bool)] <= 1e-6).all()


def test_cross_fitted_risk_is_leave_one_out():
    rng = np.random.default_rng(5)
    t = torch.as_tensor(rng.normal(size=20))
    Z = torch.as_tensor(rng.normal(size=(20, 3)))
    sp = Space("composition", 3)
    r = cross_fitted_risk(t, Z, 0.5, sp)
    by_hand = np.mean(
        [
            sp.dist2(
                (local_linear_weights(t[np.arange(20) != i], t[i : i + 1], 0.5) @ Z[np.arange(20) != i])[0].numpy(),
                Z[i].numpy(),
            )
            for i in range(20)
        ]
    )
    assert float(r) == pytest.approx(by_hand, rel=1e-9)


def test_quantiles_from_pmf_uniform():
    q = quantiles_from_pmf(np.array([0.0, 1.0, 2.0]), np.array([[0.5, 0.5]]), np.linspace(0, 1, 5))
    np.testing.assert_allclose(q[0], [0, 0.5, 1.0, 1.5, 2.0])


def test_leave_one_group_out_uses_no_row_of_the_group():
    rng = np.random.default_rng(6)
    t = torch.as_tensor(rng.normal(size=12))
    groups = torch.arange(12) // 3
    mask = groups[:, None] == groups[None, :]
    W = local_linear_weights(t, t, 0.8, exclude=mask)
    assert torch.all(W[mask] == 0)
    torch.testing.assert_close(W.sum(1), torch.ones(12, dtype=torch.float64))
    Z = torch.as_tensor(rng.normal(size=(12, 2)))
    sp = Space("composition", 2)
    r = cross_fitted_risk(t, Z, 0.8, sp, groups=groups)
    assert float(r) == pytest.approx(float(sp.dist2(W @ Z, Z).mean()), rel=1e-12)
    assert float(r) != pytest.approx(float(cross_fitted_risk(t, Z, 0.8, sp)), rel=1e-6)
