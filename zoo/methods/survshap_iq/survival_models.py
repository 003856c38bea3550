"""One prediction interface for every survival model the explainers see.

A survival model here has ``predict_survival(X, times) -> (n, T)``, ``predict_hazard(X, times) -> (n, T)``,
``predict_log_hazard(X, times)`` and ``predict_risk(X) -> (n,)`` (higher = earlier failure). The scikit-survival
models (Cox PH, gradient-boosted Cox, random survival forest) are wrapped by :class:`SksurvModel`; the Lightning
networks (DeepSurv, DeepHit) and the closed-form simulation models implement the same methods.

For models whose survival is a step function, the hazard on an explanation grid ``t_1 < ... < t_T`` is the
average hazard over each grid interval (ours): ``h(t_k) = (H(t_k) - H(t_{k-1})) / (t_k - t_{k-1})`` with ``t_0 = 0``,
so that for a Cox model ``log h = log h_0 + x'beta`` stays additive. ``H`` is the model's own cumulative hazard
where it has one (scikit-survival), else ``-log S``; ``-log S`` saturates where ``S`` underflows (``S < 1e-12``
clips ``H`` at 27.6), which makes a proportional-hazards model's late log-hazard look time-dependent and
non-additive.
"""

from __future__ import annotations

import abc

import numpy as np

TINY = 1e-12
SCALES = ("survival", "hazard", "log_hazard")


def step_at(step_times: np.ndarray, step_values: np.ndarray, times: np.ndarray, before: float = 1.0) -> np.ndarray:
    """Right-continuous step function ``(n, K)`` at jump times ``(K,)`` evaluated at ``times (T,)`` -> ``(n, T)``."""
    idx = np.searchsorted(np.asarray(step_times), np.asarray(times, dtype=float), side="right") - 1
    vals = np.asarray(step_values)[:, np.clip(idx, 0, None)]
    return np.where(idx[None, :] < 0, before, vals)


def grid_hazard(cumulative_hazard: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Average hazard over each grid interval from the cumulative hazard ``H (n, T)`` at ``times (T,)`` (see the
    module docstring)."""
    H = np.asarray(cumulative_hazard, dtype=float)
    H0 = np.concatenate([np.zeros((len(H), 1)), H[:, :-1]], axis=1)
    t = np.asarray(times, dtype=float)
    width = np.diff(np.concatenate([[0.0], t]))
    return np.maximum(H - H0, 0.0) / np.where(width > 0, width, 1.0)


class SurvivalInterface(abc.ABC):
    """Hazard scales from ``predict_survival`` (or ``predict_cumulative_hazard``); subclasses may override with
    closed forms.

    An ``abc.ABC`` mixed into the Lightning module as well (``SurvShapIQModule(ZooModule, SurvivalInterface)``):
    ``LightningModule`` and ``torch.nn.Module`` use the plain ``type`` metaclass, so ``ABCMeta`` is the derived one
    and a class without ``predict_survival`` cannot be instantiated."""

    @abc.abstractmethod
    def predict_survival(self, X: np.ndarray, times: np.ndarray) -> np.ndarray:
        """Survival probabilities ``S(t | x)``: ``(n, T)`` for ``X (n, p)`` at ``times (T,)``."""

    def predict_cumulative_hazard(self, X: np.ndarray, times: np.ndarray) -> np.ndarray:
        return -np.log(np.clip(self.predict_survival(X, times), TINY, 1.0))

    def predict_hazard(self, X: np.ndarray, times: np.ndarray) -> np.ndarray:
        return grid_hazard(self.predict_cumulative_hazard(X, times), times)

    def predict_log_hazard(self, X: np.ndarray, times: np.ndarray) -> np.ndarray:
        return np.log(np.maximum(self.predict_hazard(X, times), TINY))

    def target(self, scale: str, times: np.ndarray):
        """The explained function ``X (n, p) -> (n, T)`` on ``scale`` in ``SCALES``.

        Raises:
            ValueError: an unknown scale.
        """
        if scale not in SCALES:
            raise ValueError(f"scale {scale!r}: choose one of {SCALES}")
        fn = {"survival": self.predict_survival, "hazard": self.predict_hazard, "log_hazard": self.predict_log_hazard}[
            scale
        ]
        return lambda X: fn(np.asarray(X, dtype=float), times)


def make_sksurv(kind: str, seed: int = 0, **kwargs):
    """A scikit-survival estimator: ``coxph``, ``gbsa`` or ``rsf`` (defaults sized for CPU, overridable).

    Raises:
        ValueError: an unknown kind.
    """
    from sksurv.ensemble import GradientBoostingSurvivalAnalysis, RandomSurvivalForest
    from sksurv.linear_model import CoxPHSurvivalAnalysis

    if kind == "coxph":
        return CoxPHSurvivalAnalysis(**{"alpha": 1e-4, **kwargs})
    if kind == "gbsa":
        return GradientBoostingSurvivalAnalysis(
            **{"n_estimators": 100, "learning_rate": 0.1, "max_depth": 3, "random_state": seed, **kwargs}
        )
    if kind == "rsf":
        return RandomSurvivalForest(
            **{"n_estimators": 100, "min_samples_leaf": 10, "max_depth": 6, "random_state": seed, "n_jobs": 1, **kwargs}
        )
    raise ValueError(f"unknown scikit-survival model {kind!r}; choose coxph, gbsa or rsf")


class SksurvModel(SurvivalInterface):
    """A fitted scikit-survival estimator behind the common interface.

    Args:
        kind: ``coxph`` | ``gbsa`` | ``rsf``; seed and ``kwargs`` go to the estimator.
    """

    def __init__(self, kind: str, seed: int = 0, **kwargs):
        self.kind = kind
        self.estimator = make_sksurv(kind, seed, **kwargs)

    def fit(self, X: np.ndarray, time: np.ndarray, event: np.ndarray) -> SksurvModel:
        from zoo.methods.survshap_iq.metrics import structured_y

        self.estimator.fit(np.asarray(X, float), structured_y(time, event))
        return self

    def predict_survival(self, X: np.ndarray, times: np.ndarray) -> np.ndarray:
        est = self.estimator
        surv = est.predict_survival_function(np.asarray(X, float), return_array=True)
        return step_at(est.unique_times_, surv, times)

    def predict_cumulative_hazard(self, X: np.ndarray, times: np.ndarray) -> np.ndarray:
        est = self.estimator
        chf = est.predict_cumulative_hazard_function(np.asarray(X, float), return_array=True)
        return step_at(est.unique_times_, chf, times, before=0.0)

    def predict_risk(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.estimator.predict(np.asarray(X, float)), dtype=float)


class ClosedFormModel(SurvivalInterface):
    """A simulation scenario as a model: exact survival, hazard and log-hazard (ground truth)."""

    def __init__(self, scenario):
        self.scenario = scenario

    def predict_survival(self, X, times):
        return self.scenario.survival(X, times)

    def predict_hazard(self, X, times):
        return self.scenario.hazard(X, times)

    def predict_log_hazard(self, X, times):
        return self.scenario.log_hazard(X, times)

    def predict_risk(self, X):
        return self.scenario.cumulative_hazard(X, np.array([35.0]))[:, 0]
