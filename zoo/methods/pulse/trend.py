"""Release-anchored Poisson trend fit with changepoint selection (paper App. B.2, D; notes §4.4).

    lambda(t) = beta_0 + sum_{j in S} gamma_j (t - tau_j)_+

``lambda`` is the daily fraction of posts with the feature. The paper's objective (``objective="fraction"``, the
default) is on that fraction ``f_t``: ``min sum_t lambda(t) - f_t log lambda(t)``, every day with posts weighted
alike and no constant. ``objective="count"`` (ours before 2026-12-01) is the exposure model ``y_t ~ Poisson(n_t
lambda(t))`` on counts, ``sum_t n_t lambda_t - y_t log(n_t lambda_t) + log y_t!``: it weights days by their posts and
its NLL has another scale, so the relative-gain stop (eta) can select other changepoints. Time is in years from
the window's first day. Fits are batched Newton steps with a backtracking line search that keeps
``lambda >= 1e-8`` (the paper's cvxpy constraint): every subset of the release columns is fitted at once from the
full design, ``H_b = (y/mu_b^2) @ (z z^T)`` in one matrix product, which is what the benchmark times against
statsmodels' GLM.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from zoo.methods.pulse.series import RELEASES, FeatureSeries

YEAR = 365.25
LAMBDA_MIN = 1e-8


def anchors_inside(series: FeatureSeries, releases: dict[str, str] | None = None, min_after: int = 7) -> list[str]:
    """Release dates strictly after the first day with at least ``min_after`` days of the window after them."""
    days = series.days()
    first = np.datetime64(series.dates[0])
    out = []
    for d in sorted(releases or RELEASES):
        t = (np.datetime64(d) - first).astype(int)
        if 0 < t <= days[-1] - min_after:
            out.append(d)
    return out


def anchor_times(series: FeatureSeries, anchors: list[str]) -> np.ndarray:
    """Anchor times in years from the first day ``(J,)``."""
    first = np.datetime64(series.dates[0])
    return np.array([(np.datetime64(a) - first).astype(int) / YEAR for a in anchors])


def knot_rows(series: FeatureSeries, anchors: list[str]) -> np.ndarray:
    """Design rows at the window's ends and the anchors ``(J + 2, 1 + J)``: where a fitted ``lambda`` is extreme."""
    t = np.concatenate([[0.0], anchor_times(series, anchors), [series.days()[-1] / YEAR]])
    taus = anchor_times(series, anchors)
    return np.column_stack([np.ones_like(t)] + [np.maximum(t - tau, 0.0) for tau in taus])


def hinge_design(series: FeatureSeries, anchors: list[str]) -> np.ndarray:
    """``(T, 1 + J)``: a column of ones and ``(t - tau_j)_+`` in years for each anchor date."""
    t = series.days() / YEAR
    return np.column_stack([np.ones_like(t)] + [np.maximum(t - tau, 0.0) for tau in anchor_times(series, anchors)])


def poisson_nll(theta: np.ndarray, X: np.ndarray, y: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Full negative log-likelihood ``sum_t mu - y log mu + log y!`` with ``mu = n (X theta)``.

    ``theta (B, p)``, ``X (T, p)``, ``y, n (T,)`` -> ``(B,)`` (``inf`` where some ``lambda < 1e-8``).
    """
    lam = theta @ X.T
    mu = n[None, :] * np.maximum(lam, LAMBDA_MIN)
    out = (mu - y[None, :] * np.log(mu) + gammaln(y + 1.0)[None, :]).sum(1)
    return np.where((lam < LAMBDA_MIN).any(1), np.inf, out)


def fit_subsets(
    X: np.ndarray,
    y: np.ndarray,
    n: np.ndarray,
    masks: np.ndarray,
    max_iter: int = 100,
    tol: float = 1e-12,
    knots: np.ndarray | None = None,
    constant: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-likelihood fits of every column subset at once.

    In ``lambda`` space the NLL is ``(n @ X) theta - sum_{y_t > 0} y_t log(x_t theta) + const``, so only days with
    counts enter the logarithm, the gradient and the Hessian ``sum_t y_t x_t x_t^T / lambda_t^2``; ``lambda`` is
    piecewise linear, so ``lambda >= 1e-8`` is checked at the rows ``knots`` (default: every day).

    Args:
        X: ``(T, p)`` full design; y: ``(T,)`` counts; n: ``(T,)`` exposures (posts per day).
        masks: ``(B, p)`` bool, which columns each fit uses (column 0, the intercept, should be on).
        knots: ``(K, p)`` design rows where ``lambda`` can be smallest (the window's ends and the anchors).
        constant: add the count likelihood's ``sum log y! - sum y log n``; ``False`` (with ``y`` the daily
            fraction and ``n`` 1 on days with posts) gives the paper's ``sum n_t lambda_t - y_t log lambda_t``.
    Returns:
        ``theta (B, p)`` (zeros outside the mask) and ``nll (B,)``, equal to :func:`poisson_nll` when ``constant``.
    Raises:
        ValueError: shapes disagree or all counts are zero.
    """
    masks = np.asarray(masks, bool)
    B, p = masks.shape
    if X.shape != (len(y), p) or len(n) != len(y):
        raise ValueError(f"fit_subsets: X {X.shape}, y {len(y)}, n {len(n)}, masks {masks.shape} disagree")
    if y.sum() <= 0:
        raise ValueError("fit_subsets: every count is zero; the Poisson fit has no interior optimum")
    pos = y > 0
    Xp, yp = X[pos], y[pos]
    lin = n @ X
    const = gammaln(y + 1.0).sum() - yp @ np.log(n[pos]) if constant else 0.0
    iu = np.triu_indices(p)
    XX = Xp[:, iu[0]] * Xp[:, iu[1]]  # upper triangle of x x^T: the Hessian is symmetric
    Xk = X if knots is None else knots

    def nll_of(th):
        lam = th @ Xp.T
        out = th @ lin - np.log(np.maximum(lam, LAMBDA_MIN)) @ yp + const
        return np.where((th @ Xk.T < LAMBDA_MIN).any(1), np.inf, out)

    theta = np.zeros((B, p))
    theta[:, 0] = y.sum() / n.sum()
    nll = nll_of(theta)
    eye = np.eye(p)
    active = np.ones(B, bool)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if not len(idx):
            break
        th, m = theta[idx], masks[idx]
        r = yp[None, :] / (th @ Xp.T)
        grad = (lin[None, :] - r @ Xp) * m
        H = np.zeros((len(idx), p, p))
        H[:, iu[0], iu[1]] = (r * r / yp[None, :]) @ XX
        H = H + np.triu(H, 1).transpose(0, 2, 1)
        H = np.where(m[:, :, None] & m[:, None, :], H, eye[None]) + 1e-12 * eye[None]
        step = -np.linalg.solve(H, grad[:, :, None])[:, :, 0] * m
        decrement = -(grad * step).sum(1)
        done = decrement < tol * np.maximum(1.0, np.abs(nll[idx]))
        size = np.ones(len(idx))
        new = nll_of(th + step)
        for _ in range(60):  # backtrack until feasible and Armijo
            bad = ~(new <= nll[idx] - 1e-4 * size * decrement) & ~done
            if not bad.any():
                break
            size[bad] *= 0.5
            new[bad] = nll_of(th[bad] + size[bad, None] * step[bad])
        moved = ~done & (new <= nll[idx])
        theta[idx[moved]] = th[moved] + size[moved, None] * step[moved]
        nll[idx[moved]] = new[moved]
        active[idx[done | ~moved]] = False
    return theta, nll


def all_masks(J: int) -> np.ndarray:
    """``(2**J, 1 + J)`` bool: intercept on, every subset of the J anchors (in ``itertools.product`` order)."""
    sub = np.array(list(itertools.product([False, True], repeat=J)), bool).reshape(-1, J)
    return np.column_stack([np.ones(len(sub), bool), sub])


def _stop(nlls: list[float], eta: float) -> int:
    """Smallest size ``s`` whose best fit is not improved by more than ``eta`` (relative NLL) at size ``s + 1``."""
    for s in range(len(nlls) - 1):
        if (nlls[s] - nlls[s + 1]) / abs(nlls[s]) < eta:
            return s
    return len(nlls) - 1


def rolling_mean(x: np.ndarray, w: int = 30) -> np.ndarray:
    """Trailing ``w``-day mean (shorter at the start) of ``x (T,)``."""
    c = np.concatenate([[0.0], np.cumsum(x)])
    i = np.arange(1, len(x) + 1)
    return (c[i] - c[np.maximum(i - w, 0)]) / np.minimum(i, w)


def salience(gamma: np.ndarray, taus: np.ndarray, t_end: float, y_range: float) -> np.ndarray:
    """``V_j = |gamma_j| min(tau_j - tau_prev, tau_next - tau_j) / (y_max - y_min)`` with the window's ends as the
    outer neighbours (notes §4.4). ``gamma, taus (J,)`` in years; ``taus`` sorted."""
    edges = np.concatenate([[0.0], taus, [t_end]])
    gap = np.minimum(edges[1:-1] - edges[:-2], edges[2:] - edges[1:-1])
    return np.abs(gamma) * gap / max(y_range, 1e-12)


@dataclass
class TrendFit:
    """Selected anchors ``changepoints`` (dates), coefficients (``beta0``, ``gamma`` per changepoint, per year),
    best NLL per subset size ``path``, the pruned anchors and their ``V_j``, the fitted trend's ratio
    ``lambda(end)/lambda(start)`` and the fitted daily fraction ``fitted (T,)``."""

    changepoints: list[str]
    beta0: float
    gamma: list[float]
    path: list[float]
    pruned: list[str]
    salience: list[float]
    ratio: float
    fitted: np.ndarray


def select_changepoints(
    series: FeatureSeries,
    feature: int,
    counts: np.ndarray | None = None,
    search: str = "exact",
    eta: float = 0.01,
    v_min: float = 0.05,
    anchors: list[str] | None = None,
    objective: str = "fraction",
) -> TrendFit:
    """Best subset per size (``exact`` over all ``2**J`` subsets, or ``greedy`` forward selection), stopping at the
    smallest size whose successor improves the NLL by less than ``eta`` (relative), then pruning anchors with
    ``V_j <= v_min`` and refitting (ours: one refit). ``counts (T,)`` replaces the feature's counts (bootstrap);
    ``objective`` is ``fraction`` (the paper's) or ``count`` (module docstring).

    Raises:
        ValueError: an unknown ``search`` or ``objective``.
    """
    anchors = anchors_inside(series) if anchors is None else anchors
    X, K = hinge_design(series, anchors), knot_rows(series, anchors)
    counts = (series.counts[series.row(feature)] if counts is None else counts).astype(float)
    posts = series.n_posts.astype(float)
    frac = counts / np.maximum(posts, 1)
    if objective == "fraction":
        y, n, constant = frac, (posts > 0).astype(float), False
    elif objective == "count":
        y, n, constant = counts, posts, True
    else:
        raise ValueError(f"objective must be fraction | count, got {objective!r}")

    def fit(masks):
        return fit_subsets(X, y, n, masks, knots=K, constant=constant)

    J = len(anchors)
    if search == "exact":
        masks = all_masks(J)
        theta, nll = fit(masks)
        sizes = masks[:, 1:].sum(1)
        best = [int(np.flatnonzero(sizes == s)[np.argmin(nll[sizes == s])]) for s in range(J + 1)]
        path = [float(nll[b]) for b in best]
        chosen = masks[best[_stop(path, eta)]]
    elif search == "greedy":
        chosen = np.zeros(J + 1, bool)
        chosen[0] = True
        path = [float(fit(chosen[None])[1][0])]
        while not chosen.all():
            cand = [j for j in range(1, J + 1) if not chosen[j]]
            trial = np.repeat(chosen[None], len(cand), 0)
            trial[np.arange(len(cand)), cand] = True
            nll = fit(trial)[1]
            k = int(np.argmin(nll))
            if (path[-1] - nll[k]) / abs(path[-1]) < eta:
                break
            chosen, path = trial[k], path + [float(nll[k])]
    else:
        raise ValueError(f"search must be exact | greedy, got {search!r}")
    theta = fit(chosen[None])[0][0]
    taus = anchor_times(series, anchors)
    sel = np.flatnonzero(chosen[1:])
    t_end = series.days()[-1] / YEAR
    y_range = np.ptp(rolling_mean(frac))
    v = salience(theta[1 + sel], taus[sel], t_end, y_range)
    keep = sel[v > v_min]
    final = np.zeros_like(chosen)
    final[0], final[1 + keep] = True, True
    theta = fit(final[None])[0][0]
    lam = X @ theta
    return TrendFit(
        [anchors[j] for j in keep],
        float(theta[0]),
        [float(theta[1 + j]) for j in keep],
        path,
        [anchors[j] for j in sel if j not in keep],
        [float(x) for x in v],
        float(lam[-1] / lam[0]),
        lam,
    )


def bootstrap_stability(
    series: FeatureSeries, feature: int, n_boot: int = 100, seed: int = 0, search: str = "greedy", **kw
) -> dict[str, float]:
    """Share of ``n_boot`` per-day binomial resamples (``y*_t ~ Bin(n_t, y_t / n_t)``, ours: the posts are not
    public) in which each anchor is selected. Returns ``{date: share}`` for every anchor inside the window."""
    rng = np.random.default_rng(seed)
    n = series.n_posts
    p = series.counts[series.row(feature)] / np.maximum(n, 1)
    anchors = anchors_inside(series)
    hits = dict.fromkeys(anchors, 0)
    for _ in range(n_boot):
        fit = select_changepoints(series, feature, counts=rng.binomial(n, p), search=search, anchors=anchors, **kw)
        for c in fit.changepoints:
            hits[c] += 1
    return {a: h / n_boot for a, h in hits.items()}
