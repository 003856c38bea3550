"""SurvSHAP-IQ: Shapley interaction curves ``phi_K(t|x)`` over time (Sec. 3.3, Eq. 10), one pass for all ``t``.

The game at time ``t`` is ``v(t|M) = E_b[F(t | x_M, b_{-M})] - E_b[F(t|b)]`` (marginal imputation over a fixed
background: common random numbers). The authors run one shapiq explainer per time point, so every time point
re-evaluates the model on every coalition. Here (ours) a :class:`TimeIndexedGame` evaluates each coalition once for
the whole time grid.

- Exact: every index shapiq offers here is linear and symmetric in the game, so
  ``phi_K(t) = sum_S c(|S|, |K|, |K & S|) m_S(t)`` with ``m`` the Moebius transform (SurvFD's components). The
  coefficients ``c`` are read off shapiq's ``ExactComputer`` on one unanimity game per size (:func:`index_operator`,
  p calls, cached), then one matrix product gives all ``t`` at once.
- Approximators: shapiq's approximator is run per ``t`` on the cached column with the same ``random_state``, so
  every ``t`` samples the same coalitions and no coalition reaches the model twice.

Either way the values and the budget are those of T separate shapiq runs; the model cost is that of one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations

import numpy as np
import shapiq

from zoo.methods.survshap_iq.decomposition import Predict, all_coalitions, coalition_values, moebius_transform

APPROXIMATORS = {
    "kernel": lambda n, order, index, seed: shapiq.KernelSHAPIQ(n, max_order=order, index=index, random_state=seed),
    "regression": lambda n, order, index, seed: shapiq.RegressionFSII(n, max_order=order, random_state=seed),
    "svarm": lambda n, order, index, seed: shapiq.SVARMIQ(n, max_order=order, index=index, random_state=seed),
    "permutation": lambda n, order, index, seed: shapiq.PermutationSamplingSII(
        n, max_order=order, index=index, random_state=seed
    ),
    "montecarlo": lambda n, order, index, seed: shapiq.SHAPIQ(n, max_order=order, index=index, random_state=seed),
}


class TimeIndexedGame:
    """Coalition values of one point for all time points, each coalition evaluated once.

    Args:
        predict: ``(n, p) -> (n, T)`` target on a fixed time grid.
        x: ``(p,)`` explained point; background: ``(B, p)`` replacement rows.
    Attributes:
        empty: ``(T,)`` ``v(t|empty)`` (the baseline curve); model_rows: rows sent to ``predict`` so far.
    """

    def __init__(self, predict: Predict, x: np.ndarray, background: np.ndarray):
        self.predict, self.x, self.background = predict, np.asarray(x, dtype=float), np.asarray(background, float)
        self.n_players = self.x.shape[0]
        self._cache: dict = {}
        self.model_rows = 0
        self.empty = self.values(np.zeros((1, self.n_players), dtype=bool))[0]

    def values(self, coalitions: np.ndarray) -> np.ndarray:
        """``(C, p)`` bool -> ``(C, T)`` uncentred values; uncached coalitions go to the model in one batch."""
        coalitions = np.asarray(coalitions, dtype=bool)
        keys = (
            (coalitions.astype(np.int64) @ (1 << np.arange(self.n_players, dtype=np.int64))).tolist()
            if self.n_players < 63
            else [np.packbits(c).tobytes() for c in coalitions]
        )
        todo = {k: c for k, c in zip(keys, coalitions) if k not in self._cache}
        if todo:
            new = coalition_values(self.predict, self.x, self.background, np.stack(list(todo.values())))
            self.model_rows += len(todo) * len(self.background)
            self._cache.update(zip(todo, new))
        return np.stack([self._cache[k] for k in keys])

    def at(self, t_index: int):
        """The scalar shapiq game at one time point: ``(C, p) -> (C,)``, centred so that ``v(empty) = 0``."""
        return lambda coalitions: self.values(coalitions)[:, t_index] - self.empty[t_index]


@dataclass
class InteractionCurves:
    """Tidy SurvSHAP-IQ output for one point: ``values[t, k] = phi_{interactions[k]}(times[t] | x)``."""

    times: np.ndarray  # (T,)
    interactions: list[tuple[int, ...]]  # K non-empty player sets
    values: np.ndarray  # (T, K)
    baseline: np.ndarray  # (T,) v(t|empty) = mean background prediction
    prediction: np.ndarray  # (T,) F(t|x)
    index: str
    model_rows: int = 0
    feature_names: list[str] = field(default_factory=list)

    def name(self, k: int) -> str:
        """``"x1 * x3"`` style label of interaction ``k``."""
        names = self.feature_names or [f"x{j + 1}" for j in range(max(max(s) for s in self.interactions) + 1)]
        return " * ".join(names[j] for j in self.interactions[k])

    def efficiency_gap(self) -> np.ndarray:
        """``(T,)`` ``F(t|x) - baseline(t) - sum_K phi_K(t|x)``; zero for efficient indices (SV, k-SII, FSII, STII)."""
        return self.prediction - self.baseline - self.values.sum(axis=1)

    def rows(self) -> list[dict]:
        """Long format: one ``{time, interaction, order, value}`` dict per time point and interaction."""
        return [
            {
                "time": float(t),
                "interaction": self.name(k),
                "order": len(self.interactions[k]),
                "value": float(self.values[i, k]),
            }
            for i, t in enumerate(self.times)
            for k in range(len(self.interactions))
        ]


@lru_cache(maxsize=64)
def index_operator(p: int, index: str, max_order: int) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """The linear map from Moebius coefficients to a shapiq index: ``(sets, W (K, 2**p))`` with
    ``phi = W @ m`` (``m`` rows in bitmask order, centred game so ``m_empty = 0``).

    Built from shapiq's ExactComputer on the unanimity games ``u_S``, ``S = {0..s-1}``, ``s = 1..p``: by linearity
    and symmetry ``phi_K(u_S) = c(|S|, |K|, |K & S|)``, and every feasible triple occurs for these ``S``.
    """
    coef: dict[tuple[int, int, int], float] = {}
    sets = [K for k in range(1, max_order + 1) for K in combinations(range(p), k)]
    for s in range(1, p + 1):
        iv = shapiq.ExactComputer(lambda C, s=s: np.all(C[:, :s], axis=1).astype(float), n_players=p)(index, max_order)
        for K in sets:  # a set shapiq leaves out of its lookup has value 0
            coef[(s, len(K), sum(j < s for j in K))] = float(iv[K]) if K in iv.interaction_lookup else 0.0
    masks = all_coalitions(p)
    W = np.zeros((len(sets), 2**p))
    for i, K in enumerate(sets):
        k_mask = np.zeros(p, dtype=bool)
        k_mask[list(K)] = True
        size, overlap = masks.sum(1), (masks & k_mask).sum(1)
        W[i, 1:] = [coef[(int(a), len(K), int(b))] for a, b in zip(size[1:], overlap[1:])]
    return sets, W


def _collect(ivs: list) -> tuple[list[tuple[int, ...]], np.ndarray]:
    sets = [s for s in sorted({s for iv in ivs for s in iv.interaction_lookup}, key=lambda s: (len(s), s)) if s]
    vals = np.array([[iv[s] if s in iv.interaction_lookup else 0.0 for s in sets] for iv in ivs])
    return sets, vals


def survshap_iq(
    predict: Predict,
    x: np.ndarray,
    background: np.ndarray,
    times: np.ndarray,
    index: str = "k-SII",
    max_order: int = 2,
    approximator: str = "exact",
    budget: int | None = None,
    random_state: int = 0,
    feature_names: list[str] | None = None,
) -> InteractionCurves:
    """Shapley interaction curves of one point over the time grid of ``predict``.

    Args:
        predict: ``(n, p) -> (n, T)``, the survival, hazard or log-hazard at ``times``.
        x: ``(p,)``; background: ``(B, p)``; times: ``(T,)`` (labels of predict's columns).
        index: a shapiq index; max_order: interaction order (1 with "SV").
        approximator: "exact" (all ``2**p`` coalitions, shapiq.ExactComputer) or one of ``APPROXIMATORS``.
        budget: coalitions per approximation (default ``min(2**p, 2**9)``, the authors' setting).
    Raises:
        ValueError: an unknown approximator, or "exact" with more than 16 players.
    """
    game = TimeIndexedGame(predict, x, background)
    p, T = game.n_players, len(game.empty)
    if approximator == "exact":
        if p > 16:
            raise ValueError(f"exact SurvSHAP-IQ enumerates 2**p coalitions; p = {p} is too many")
        v = game.values(all_coalitions(p))  # one model pass serves every t
        sets, W = index_operator(p, index, max_order)
        vals = (W @ moebius_transform(v - game.empty[None, :], p)).T
    elif approximator in APPROXIMATORS:
        budget = budget or min(2**p, 2**9)
        ivs = [
            APPROXIMATORS[approximator](p, max_order, index, random_state).approximate(budget, game.at(i))
            for i in range(T)
        ]
        sets, vals = _collect(ivs)
    else:
        raise ValueError(f"approximator {approximator!r}: choose 'exact' or one of {sorted(APPROXIMATORS)}")
    full = game.values(np.ones((1, p), dtype=bool))[0]
    return InteractionCurves(
        np.asarray(times, float), sets, vals, game.empty, full, index, game.model_rows, list(feature_names or [])
    )


def survshap_iq_separate(
    predict: Predict,
    x: np.ndarray,
    background: np.ndarray,
    times: np.ndarray,
    index: str = "k-SII",
    max_order: int = 2,
    approximator: str = "exact",
    budget: int | None = None,
    random_state: int = 0,
) -> InteractionCurves:
    """The authors' protocol, for comparison: T separate shapiq runs, each with shapiq's own ``MarginalImputer`` on
    the model restricted to one time point (all background rows, so both routes use the same replacement data)."""
    x = np.asarray(x, dtype=float)
    p, ivs, calls = len(x), [], 0
    full, empty = [], []
    for i in range(len(times)):

        def f_t(Z, i=i):
            return np.asarray(predict(Z), dtype=float)[:, i]

        imputer = shapiq.MarginalImputer(
            f_t, background, x=x[None, :], sample_size=len(background), random_state=random_state
        )
        if approximator == "exact":
            ivs.append(shapiq.ExactComputer(imputer, n_players=p)(index, max_order))
        else:
            b = budget or min(2**p, 2**9)
            ivs.append(APPROXIMATORS[approximator](p, max_order, index, random_state).approximate(b, imputer))
        empty.append(imputer.empty_prediction)
        full.append(f_t(x[None, :])[0])
        calls += 1
    sets, vals = _collect(ivs)
    return InteractionCurves(np.asarray(times, float), sets, vals, np.array(empty), np.array(full), index, calls)
