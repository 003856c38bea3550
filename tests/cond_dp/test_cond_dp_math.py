"""Cond-DP math on small cases with known answers: C, the preconditioned step, accounting, noise, sampling."""

import numpy as np
import pytest
import scipy.linalg
import torch
from opacus.accountants import RDPAccountant

from zoo.methods.cond_dp.conditioning import conditioning_matrix, psd_sqrt, spectrum
from zoo.methods.cond_dp.privacy import calibrate_noise, make_private


def test_conditioning_is_inverse_sqrt_of_gram_at_zero_ridge():
    X = np.random.default_rng(0).standard_normal((50, 6)) * np.array([5.0, 3, 2, 1, 0.5, 0.1])
    C = conditioning_matrix(X, ridge=0.0, normalize=False)
    expected = np.real(scipy.linalg.inv(scipy.linalg.sqrtm(X.T @ X)))
    np.testing.assert_allclose(C, expected, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(psd_sqrt(C) @ psd_sqrt(C), C, atol=1e-10)
    # the conditioned features X C^{1/2} have singular values sqrt(σ_j): the spectrum is flattened
    np.testing.assert_allclose(spectrum(X, C), np.sqrt(spectrum(X)), rtol=1e-6)


def test_conditioning_options():
    X = np.random.default_rng(1).standard_normal((40, 5)) @ np.diag([4.0, 2, 1, 1, 0])  # rank 4
    with pytest.raises(ValueError, match="rank-deficient"):
        conditioning_matrix(X, ridge=0.0)
    C = conditioning_matrix(X, ridge=0.1)
    assert np.linalg.norm(C, 2) == pytest.approx(1.0)
    s = spectrum(X)
    Cr = conditioning_matrix(X, ridge=0.1, rank=2, normalize=False)
    w = np.sort(np.linalg.eigvalsh(Cr))
    np.testing.assert_allclose(w, sorted([1 / (s[0] * 1.1)] + [1 / (s[1] + 0.1 * s[0])] * 4), rtol=1e-6)


def _linear_problem():
    X = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    y = torch.tensor([1.0, -1.0, 0.5])
    return X, y


def test_noise_free_unclipped_cond_dp_is_preconditioned_gd():
    X, y = _linear_problem()
    C = torch.tensor([[2.0, 0.5], [0.5, 1.0]])
    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.5, -0.25]]))
    w0 = model.weight.detach().clone().reshape(-1)
    dp = make_private(
        model,
        torch.optim.SGD(model.parameters(), lr=0.1),
        sample_rate=1.0,
        expected_batch_size=3,
        noise_multiplier=0.0,
        max_grad_norm=1e9,
        preconditioner=(model, C),
    )
    loss = torch.mean((model(X).squeeze(-1) - y) ** 2)
    loss.backward()
    dp.optimizer.step()
    # by hand: residuals r = X w0 - y = (-0.5, 0.5, -0.25); gradient (2/3) Xᵀ r = (2/3)(-0.75, 0.75) = (-0.5, 0.5)
    grad = torch.tensor([-0.5, 0.5])
    np.testing.assert_allclose(model.weight.detach().reshape(-1), w0 - 0.1 * C @ grad, atol=1e-6)
    np.testing.assert_allclose(model.weight.detach().reshape(-1), [0.5 + 0.075, -0.25 - 0.025], atol=1e-6)


def _steps(precondition: bool, sigma: float, q: float, T: int) -> float:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    C = torch.eye(4) * 0.5
    dp = make_private(
        model,
        torch.optim.SGD(model.parameters(), lr=0.01),
        sample_rate=q,
        expected_batch_size=8,
        noise_multiplier=sigma,
        max_grad_norm=1.0,
        preconditioner=(model, C) if precondition else None,
    )
    before = dp.epsilon(1e-5)
    for _ in range(T):
        dp.optimizer.zero_grad()
        torch.mean(model(torch.randn(8, 4)) ** 2).backward()
        dp.optimizer.step()
    assert dp.steps == T and dp.epsilon(1e-5) > before  # the accountant's hook ran every step
    return dp.epsilon(1e-5)


def test_epsilon_identical_to_dp_sgd_and_to_standalone_accountant():
    sigma, q, T = 1.1, 0.05, 30
    eps_cond, eps_dpsgd = _steps(True, sigma, q, T), _steps(False, sigma, q, T)
    acc = RDPAccountant()
    for _ in range(T):
        acc.step(noise_multiplier=sigma, sample_rate=q)
    assert eps_cond == eps_dpsgd == pytest.approx(acc.get_epsilon(1e-5), rel=1e-12)
    assert calibrate_noise(eps_cond, 1e-5, q, T) == pytest.approx(sigma, rel=0.02)


@pytest.mark.parametrize("neighbouring,factor", [("substitution", 2.0), ("add_remove", 1.0)])
def test_noise_std_is_calibrated(neighbouring, factor):
    torch.manual_seed(0)
    model = torch.nn.Linear(200, 50, bias=False)
    sigma, c, B = 0.7, 0.3, 16
    dp = make_private(
        model,
        torch.optim.SGD(model.parameters(), lr=0.0),
        sample_rate=0.1,
        expected_batch_size=B,
        noise_multiplier=sigma,
        max_grad_norm=c,
        neighbouring=neighbouring,
    )
    (model(torch.zeros(B, 200)).sum() * 0.0).backward()  # zero per-example gradients: only noise remains
    dp.optimizer.step()
    std = float(model.weight.grad.std())
    assert std == pytest.approx(factor * sigma * c / B, rel=0.03)


def test_poisson_batches_average_q_n():
    from zoo.methods.cond_dp.datamodule import LabelDPDataModule

    dm = LabelDPDataModule(dataset="diabetes", batch_size=32)
    torch.manual_seed(0)
    sizes = [len(x) for _ in range(30) for x, _ in dm.train_dataloader()]
    assert len(set(sizes)) > 5  # sizes vary: Poisson, not fixed batches
    assert np.mean(sizes) == pytest.approx(dm.sample_rate * len(dm.y_train), rel=0.03)


def test_intercept_conditioning_covers_the_bias():
    from zoo.methods.cond_dp.privacy import precondition_grads

    X = np.random.default_rng(2).standard_normal((30, 3)) + 1.0
    C = conditioning_matrix(X, ridge=0.0, normalize=False, intercept=True)
    Xa = np.hstack([X, np.ones((30, 1))])
    np.testing.assert_allclose(C, np.real(scipy.linalg.inv(scipy.linalg.sqrtm(Xa.T @ Xa))), rtol=1e-6, atol=1e-9)
    layer = torch.nn.Linear(3, 2)
    layer.weight.grad, layer.bias.grad = torch.randn(2, 3), torch.randn(2)
    full = torch.cat([layer.weight.grad, layer.bias.grad[:, None]], 1) @ torch.as_tensor(C, dtype=torch.float32)
    precondition_grads(layer, torch.as_tensor(C, dtype=torch.float32))
    torch.testing.assert_close(torch.cat([layer.weight.grad, layer.bias.grad[:, None]], 1), full)


def test_substitution_pair_is_dominated_by_add_remove_at_twice_the_clip():
    # the card's accounting convention, checked numerically in 1-d: one example's clipped gradient u -> v
    # (|u|, |v| <= c = 1) under Poisson rate q has Rényi divergence <= the add/remove pair with sensitivity 2c
    from scipy.special import logsumexp

    x = np.linspace(-40, 40, 80_001)
    dx = x[1] - x[0]

    def log_normal(mu, s):
        return -0.5 * ((x - mu) / s) ** 2 - np.log(s * np.sqrt(2 * np.pi))

    def log_mix(q, mu, s):
        return np.logaddexp(np.log1p(-q) + log_normal(0.0, s), np.log(q) + log_normal(mu, s))

    def renyi(lp, lq, a):
        return logsumexp(a * lp + (1 - a) * lq + np.log(dx)) / (a - 1)

    for s in (0.8, 2.0):
        for q in (0.02, 0.3):
            for a in (2.0, 8.0):
                ar = max(
                    renyi(log_mix(q, 2.0, s), log_normal(0.0, s), a), renyi(log_normal(0.0, s), log_mix(q, 2.0, s), a)
                )
                for u, v in ((1.0, -1.0), (1.0, 0.0), (0.5, -1.0)):
                    sub = renyi(log_mix(q, u, s), log_mix(q, v, s), a)
                    assert sub <= ar + 1e-9, (s, q, a, u, v, sub, ar)
