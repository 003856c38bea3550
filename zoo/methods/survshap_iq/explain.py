"""SurvSHAP-IQ: Shapley interaction curves ``phi_K(t|x)`` over time (Sec. 3.3, Eq. 10), one pass for all ``t``.

The game at time ``t`` is ``v(t|M) = E_b[F(t | x_M, b_{-M})] - E_b[F(t|b)]`` (marginal imputation over a fixed
background: common random numbers). The authors run one shapiq explainer per time point, so every time point
re-evaluates the model on every coalition. Here (ours) a :class:`TimeIndexedGame` evaluates each coalition once for
the whole time grid; shapiq's exact computer or approximator is then run per ``t`` on the cached column, with the
same ``random_state`` so every ``t`` samples the same coalitions. Indices are shapiq's ("k-SII", "SV", "FSII",
"STII", "SII", "Moebius", ...): the values and the budget are those of T separate shapiq runs, the model cost is
that of one.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import shapiq

from zoo.methods.survshap_iq.decomposition import Predict, all_coalitions, coalition_values

APPROXIMATORS = {
    "kernel": lambda n, order, index, seed: shapiq.KernelSHAPIQ(n, max_order=order, index=index, random_state=seed),
    "regression": lambda n, order, index, seed: shapiq.RegressionFSII(n, max_order=order, random_state=seed),
    "svarm": lambda n, order, index, seed: shapiq.SVARMIQ(n, max_order=order, index=index, random_state=seed),
    "permutation": lambda n, order, index, seed: shapiq.PermutationSamplingSII(n, max_order=order, index=index,
                                                                              random_state=seed),
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
        self._cache: dict[bytes, np.ndarray] = {}
        self.model_rows = 0
        self.empty = self.values(np.zeros((1, self.n_players), dtype=bool))[0]

    def values(self, coalitions: np.ndarray) -> np.ndarray:
        """``(C, p)`` bool -> ``(C, T)`` uncentred values; uncached coalitions go to the model in one batch."""
        coalitions = np.asarray(coalitions, dtype=bool)
        keys = [np.packbits(c).tobytes() for c in coalitions]
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

    times: np.ndarray                   # (T,)
    interactions: list[tuple[int, ...]]  # K non-empty player sets
    values: np.ndarray                  # (T, K)
    baseline: np.ndarray                # (T,) v(t|empty) = mean background prediction
    prediction: np.ndarray              # (T,) F(t|x)
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
        return [{"time": float(t), "interaction": self.name(k), "order": len(self.interactions[k]),
                 "value": float(self.values[i, k])}
                for i, t in enumerate(self.times) for k in range(len(self.interactions))]


def _collect(ivs: list, n_players: int, max_order: int) -> tuple[list[tuple[int, ...]], np.ndarray]:
    sets = [s for s in sorted({s for iv in ivs for s in iv.interaction_lookup}, key=lambda s: (len(s), s)) if s]
    vals = np.array([[iv[s] if s in iv.interaction_lookup else 0.0 for s in sets] for iv in ivs])
    return sets, vals


def survshap_iq(predict: Predict, x: np.ndarray, background: np.ndarray, times: np.ndarray, index: str = "k-SII",
                max_order: int = 2, approximator: str = "exact", budget: int | None = None, random_state: int = 0,
                feature_names: list[str] | None = None) -> InteractionCurves:
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
        game.values(all_coalitions(p))                    # one model pass serves every t
        ivs = [shapiq.ExactComputer(game.at(i), n_players=p)(index, max_order) for i in range(T)]
    elif approximator in APPROXIMATORS:
        budget = budget or min(2 ** p, 2 ** 9)
        ivs = [APPROXIMATORS[approximator](p, max_order, index, random_state).approximate(budget, game.at(i))
               for i in range(T)]
    else:
        raise ValueError(f"approximator {approximator!r}: choose 'exact' or one of {sorted(APPROXIMATORS)}")
    sets, vals = _collect(ivs, p, max_order)
    full = game.values(np.ones((1, p), dtype=bool))[0]
    return InteractionCurves(np.asarray(times, float), sets, vals, game.empty, full, index, game.model_rows,
                             list(feature_names or []))


def survshap_iq_separate(predict: Predict, x: np.ndarray, background: np.ndarray, times: np.ndarray,
                         index: str = "k-SII", max_order: int = 2, approximator: str = "exact",
                         budget: int | None = None, random_state: int = 0) -> InteractionCurves:
    """The authors' protocol, for comparison: T separate shapiq runs, each with shapiq's own ``MarginalImputer`` on
    the model restricted to one time point (all background rows, so both routes use the same replacement data)."""
    x = np.asarray(x, dtype=float)
    p, ivs, calls = len(x), [], 0
    full, empty = [], []
    for i in range(len(times)):
        def f_t(Z, i=i):
            return np.asarray(predict(Z), dtype=float)[:, i]
        imputer = shapiq.MarginalImputer(f_t, background, x=x[None, :], sample_size=len(background),
                                         random_state=random_state)
        if approximator == "exact":
            ivs.append(shapiq.ExactComputer(imputer, n_players=p)(index, max_order))
        else:
            b = budget or min(2 ** p, 2 ** 9)
            ivs.append(APPROXIMATORS[approximator](p, max_order, index, random_state).approximate(b, imputer))
        empty.append(imputer.empty_prediction)
        full.append(f_t(x[None, :])[0])
        calls += 1
    sets, vals = _collect(ivs, p, max_order)
    return InteractionCurves(np.asarray(times, float), sets, vals, np.array(empty), np.array(full), index, calls)
