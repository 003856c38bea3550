"""PuLSE's betting test (Algorithm 2): ONS wealth by hand, validity on null streams, the retrain levels, baselines."""

import math

import numpy as np
import pytest

from zoo.methods.pulse.baselines import calibrate_cusum, cusum, peeking_z_test
from zoo.methods.pulse.sequential import ONS_RATE, SequentialMeanTest, alpha_schedule, run_tests


def test_ons_wealth_by_hand():
    mu0, lam = 0.2, 0.5
    t = SequentialMeanTest(mu0, alpha=0.1, lam0=lam)
    # day 1: x = 0.6 -> d = 0.4, wealth 1 + 0.5*0.4 = 1.2, z = 0.4/1.2, S = z^2, lam += 2/(2-ln3) z/(1+S)
    t.update(0.6)
    z1 = 0.4 / 1.2
    lam1 = min(max(0.5 + 2 / (2 - math.log(3)) * z1 / (1 + z1**2), 0), 1)
    assert t.log_wealth == pytest.approx(math.log(1.2))
    assert t.lam == pytest.approx(lam1)
    # day 2: x = 0 -> d = -0.2
    t.update(0.0)
    z2 = -0.2 / (1 - lam1 * 0.2)
    assert t.log_wealth == pytest.approx(math.log(1.2) + math.log(1 - 0.2 * lam1))
    assert t.lam == pytest.approx(min(max(lam1 + ONS_RATE * z2 / (1 + z1**2 + z2**2), 0), 1))
    path, first = run_tests(np.array([[0.6, 0.0]]), mu0, 0.1, lam0=lam)
    assert path[0, -1] == pytest.approx(t.log_wealth) and first[0] == -1


def test_stream_at_mu0_never_rejects_and_strong_signal_rejects():
    t = SequentialMeanTest(0.3, 0.05)
    assert not any(t.update(0.3) for _ in range(5000)) and t.log_wealth == 0.0
    path, first = run_tests(np.full((1, 200), 0.9), 0.3, 0.05)
    assert first[0] >= 0 and path[0, first[0]] > math.log(20) >= path[0, first[0] - 1]


def test_type_one_error_on_null_binomial_streams():
    rng = np.random.default_rng(0)
    n = rng.integers(50, 150, size=400)
    x = rng.binomial(n[None, :], 0.05, size=(1000, 400)) / n[None, :]
    _, first = run_tests(x, 0.05, 0.1)
    assert (first >= 0).mean() <= 0.1
    peek = peeking_z_test(x * n[None, :], n, 0.05, 0.1)
    assert (peek >= 0).mean() > 0.2  # daily looks at a one-look level inflate type-I error


def test_input_checks():
    with pytest.raises(ValueError):
        SequentialMeanTest(1.2, 0.1)
    with pytest.raises(ValueError):
        SequentialMeanTest(0.2, 0.1).update(1.5)


def test_alpha_schedule_sums_below_alpha():
    s = np.arange(10**6)
    a = alpha_schedule(0.1, s)
    assert a[0] == pytest.approx(0.1 / 10.58) and a[1] == pytest.approx(0.1 * 2**-1.1 / 10.58)
    assert a.sum() <= 0.1 and np.all(np.diff(a) < 0)


def test_cusum_calibrated_on_pre_window_is_silent_there():
    rng = np.random.default_rng(1)
    n = np.full(100, 80)
    pre = rng.binomial(n, 0.1)
    h = calibrate_cusum(pre, n, 0.1)
    assert cusum(pre, n, 0.1, h)[0] == -1
    assert cusum(rng.binomial(n, 0.3), n, 0.1, h)[0] >= 0
