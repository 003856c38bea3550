"""Relational alignment between two paired representation sets: unbiased CKA, mutual k-NN and CKNNA.

Formulas as in our notes §4, transcribed from the Platonic Representation Hypothesis metrics (Huh et al., ICML 2024;
``minyoungg/platonic-rep`` ``metrics.py``, read, not copied: it is not a package) and used by Wang, Isola and
Cheung (2026). Rows of ``X [n, d1]`` and ``Y [n, d2]`` are paired; by default each row is L2-normalised first and
the kernels are linear (``K = X X^T``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def _prep(x: torch.Tensor, normalize: bool) -> torch.Tensor:
    x = x.double()
    return torch.nn.functional.normalize(x, dim=1) if normalize else x


def hsic_unbiased(K: torch.Tensor, L: torch.Tensor) -> torch.Tensor:
    """Unbiased HSIC (Song et al. 2012), kernels ``K, L [n, n]`` with ``n >= 4``; notes §4::

        HSIC_u = [tr(K~ L~) + (1^T K~ 1)(1^T L~ 1) / ((n-1)(n-2)) - 2/(n-2) 1^T K~ L~ 1] / (n (n-3))

    where ``K~, L~`` are ``K, L`` with zeroed diagonals. Returns a 0-d tensor.

    Raises:
        ValueError: fewer than 4 rows (the estimator divides by ``n - 3``).
    """
    n = K.shape[0]
    if n < 4:
        raise ValueError(f"unbiased HSIC needs n >= 4 rows, got {n}")
    Kt = K - torch.diag_embed(torch.diagonal(K))
    Lt = L - torch.diag_embed(torch.diagonal(L))
    # 1^T K~ L~ 1 = (K~^T 1) . (L~ 1): O(n^2) instead of forming K~ L~
    value = (Kt * Lt.T).sum() + Kt.sum() * Lt.sum() / ((n - 1) * (n - 2)) - 2.0 * (Kt.sum(0) @ Lt.sum(1)) / (n - 2)
    return value / (n * (n - 3))


def cka(X: torch.Tensor, Y: torch.Tensor, normalize: bool = True) -> float:
    """Unbiased ("debiased") linear CKA: ``HSIC_u(K, L) / sqrt(HSIC_u(K, K) HSIC_u(L, L))`` (notes §4; the
    reference code adds 1e-6 to the denominator, we do too). ``X [n, d1]``, ``Y [n, d2]``, ``n >= 4``."""
    X, Y = _prep(X, normalize), _prep(Y, normalize)
    K, L = X @ X.T, Y @ Y.T
    return float(hsic_unbiased(K, L) / (torch.sqrt(hsic_unbiased(K, K) * hsic_unbiased(L, L)) + 1e-6))


def knn_indices(X: torch.Tensor, k: int) -> torch.Tensor:
    """``[n, k]`` indices of each row's ``k`` largest inner products with the *other* rows.

    Raises:
        ValueError: ``k`` not in ``1..n-1``.
    """
    n = X.shape[0]
    if not 1 <= k < n:
        raise ValueError(f"k must be in 1..{n - 1} for {n} rows, got {k}")
    sim = X @ X.T
    sim.fill_diagonal_(float("-inf"))
    return sim.topk(k, dim=1).indices


def mutual_knn_scores(X: torch.Tensor, Y: torch.Tensor, k: int = 10, normalize: bool = True) -> torch.Tensor:
    """Per-row mutual k-NN overlap ``|N_k^X(i) ∩ N_k^Y(i)| / k`` (``[n]``); its mean is :func:`mutual_knn`."""
    a, b = knn_indices(_prep(X, normalize), k), knn_indices(_prep(Y, normalize), k)
    n = a.shape[0]
    ma = torch.zeros(n, n, dtype=torch.bool).scatter_(1, a, True)
    mb = torch.zeros(n, n, dtype=torch.bool).scatter_(1, b, True)
    return (ma & mb).sum(1).double() / k


def mutual_knn(X: torch.Tensor, Y: torch.Tensor, k: int = 10, normalize: bool = True) -> float:
    """Mutual k-NN alignment ``(1/n) Σ_i |N_k^X(i) ∩ N_k^Y(i)| / k`` (Huh et al. 2024; notes §4). Independent
    representations give about ``k / (n - 1)``."""
    return float(mutual_knn_scores(X, Y, k, normalize).mean())


def cknna(X: torch.Tensor, Y: torch.Tensor, k: int = 10, normalize: bool = True) -> float:
    """CKNNA (notes §4): unbiased-HSIC CKA computed on ``mask ⊙ K`` and ``mask ⊙ L``, ``mask`` = the intersection of
    the two k-NN graphs (each kernel with its own graph for the normalising terms)."""
    X, Y = _prep(X, normalize), _prep(Y, normalize)
    K, L = X @ X.T, Y @ Y.T
    n = K.shape[0]

    def graph(S):
        return torch.zeros(n, n, dtype=S.dtype).scatter_(1, knn_indices_from_sim(S, k), 1.0)

    gK, gL = graph(K), graph(L)

    def sim(A, B, mask):
        return hsic_unbiased(mask * A, mask * B)

    denom = torch.sqrt((sim(K, K, gK) * sim(L, L, gL)).clamp(min=0)) + 1e-6
    return float(sim(K, L, gK * gL) / denom)


def knn_indices_from_sim(S: torch.Tensor, k: int) -> torch.Tensor:
    """``[n, k]`` top-k column indices of a similarity matrix with its diagonal excluded."""
    S = S.clone()
    S.fill_diagonal_(float("-inf"))
    return S.topk(k, dim=1).indices


def bootstrap_ci(
    stat: Callable[[torch.Tensor], float], n: int, reps: int = 200, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat(idx)`` over items resampled with replacement (``idx [n]``).

    Returns:
        ``(low, high)`` at ``level`` (two-sided).
    """
    g = torch.Generator().manual_seed(seed)
    values = torch.tensor([stat(torch.randint(0, n, (n,), generator=g)) for _ in range(reps)], dtype=torch.float64)
    lo, hi = torch.quantile(values, torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64))
    return float(lo), float(hi)
