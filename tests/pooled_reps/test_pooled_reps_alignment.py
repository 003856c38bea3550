"""Alignment metrics on small cases with known answers (notes §4 formulas)."""

import itertools

import pytest
import torch

from zoo.methods.pooled_reps.alignment import bootstrap_ci, cka, cknna, hsic_unbiased, mutual_knn

X52 = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [2.0, -1.0], [-1.0, 1.0]])
Y52 = torch.tensor([[0.0, 1.0], [1.0, 1.0], [2.0, 0.0], [1.0, -2.0], [0.0, 3.0]])


def _hsic_u_statistic(K, L):
    """Song et al. (2012) as a U-statistic: the mean over ordered distinct (i, j, q, r) of
    k_ij l_ij + k_ij l_qr - 2 k_ij l_iq (an independent route to the closed form)."""
    n = K.shape[0]
    total, count = 0.0, 0
    for i, j, q, r in itertools.permutations(range(n), 4):
        total += K[i, j] * L[i, j] + K[i, j] * L[q, r] - 2 * K[i, j] * L[i, q]
        count += 1
    return total / count


def test_unbiased_hsic_hand_case_5x2():
    K, L = X52.double() @ X52.double().T, Y52.double() @ Y52.double().T
    # by hand: K~ and L~ (diagonals zeroed) each sum to 4; tr(K~ L~) = 2 * sum_{i<j} k_ij l_ij = 2 * 25 = 50;
    # row sums K~ 1 = (2, 2, 4, -2, -2), L~ 1 = (2, 5, 4, -7, 0), so 1^T K~ L~ 1 = 4 + 10 + 16 + 14 + 0 = 44;
    # HSIC_u = [50 + 4 * 4 / (4 * 3) - 2 * 44 / 3] / (5 * 2) = 22 / 10
    assert float(hsic_unbiased(K, L)) == pytest.approx(2.2, abs=1e-12)
    assert float(hsic_unbiased(K, L)) == pytest.approx(float(_hsic_u_statistic(K, L)), abs=1e-12)


def test_hsic_needs_four_rows():
    with pytest.raises(ValueError, match="n >= 4"):
        hsic_unbiased(torch.eye(3), torch.eye(3))


def test_cka_identity_rotation_and_scaling():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(40, 6, generator=g, dtype=torch.float64)
    assert cka(X, X) == pytest.approx(1.0, abs=1e-5)
    Q, _ = torch.linalg.qr(torch.randn(6, 6, generator=g, dtype=torch.float64))
    Y = torch.randn(40, 3, generator=g, dtype=torch.float64) + X[:, :3]
    base = cka(X, Y, normalize=False)
    assert cka(X @ Q, Y, normalize=False) == pytest.approx(base, abs=1e-9)
    assert cka(3.7 * X, 0.2 * Y, normalize=False) == pytest.approx(base, abs=1e-6)
    assert cka(X @ Q * 5.0, Y) == pytest.approx(cka(X, Y), abs=1e-9)


def test_mutual_knn_independent_gaussians_near_chance():
    n, k = 300, 10
    g = torch.Generator().manual_seed(1)
    vals = [mutual_knn(torch.randn(n, 8, generator=g), torch.randn(n, 8, generator=g), k) for _ in range(3)]
    assert sum(vals) / 3 == pytest.approx(k / (n - 1), abs=0.012)


def test_mutual_knn_and_cknna_of_identical_sets():
    X = torch.randn(30, 5, generator=torch.Generator().manual_seed(2))
    assert mutual_knn(X, X, 5) == pytest.approx(1.0)
    assert cknna(X, X, 5) == pytest.approx(1.0, abs=1e-4)  # the reference 1e-6 in the denominator
    with pytest.raises(ValueError, match="k must be"):
        mutual_knn(X, X, 30)


def test_bootstrap_ci_of_a_mean():
    x = torch.arange(100, dtype=torch.float64)
    lo, hi = bootstrap_ci(lambda idx: float(x[idx].mean()), 100, reps=300, seed=0)
    assert lo < 49.5 < hi and hi - lo < 25
