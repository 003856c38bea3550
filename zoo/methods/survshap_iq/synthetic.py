"""The paper's ten simulation scenarios (Sec. 4.1) with closed-form hazard, log-hazard and survival.

Generated data, labelled as such everywhere it is used. Reconstruction (ours) of the authors' R/simsurv setup from
their code: x1, x2, x3 ~ N(0, 1) independent, constant baseline hazard lambda = 0.03, administrative censoring at
t = 70, main coefficients beta = (0.4, -0.8, -0.6); the linear scenarios interact x1 x3 (beta13 = -0.9), the
generalised-additive ones use x1^2 and (2/pi) atan(0.7 x2) as main effects and interact x1 x2 (beta12 = -0.5) and
x1 x3^2 (beta13 = 0.2). A time-dependent term is multiplied by log(t + 1).

The model is Eq. 3, ``h(t|x) = lambda * exp(G(t|x))`` with ``G(t|x) = a(x) + b(x) log(t + 1)``, so
``H(t|x) = lambda e^a ((t + 1)^(b + 1) - 1) / (b + 1)`` (``lambda e^a log(t + 1)`` when ``b = -1``) and
``S = exp(-H)``: exact ground truth on every scale, and event times by inverting ``H`` in closed form.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LAMBDA, MAX_TIME = 0.03, 70.0
BETA = (0.4, -0.8, -0.6)


@dataclass(frozen=True)
class Term:
    """One additive term ``coef * fn(x)`` of G over the players ``features`` (0-based), times log(t+1) if ``td``."""

    features: tuple[int, ...]
    coef: float
    fn: str  # name in _FUNCS
    td: bool = False

    def value(self, X: np.ndarray) -> np.ndarray:
        """``X (n, 3)`` -> ``(n,)`` the term without its log(t+1) factor."""
        return self.coef * _FUNCS[self.fn](X)


_FUNCS = {
    "x1": lambda X: X[:, 0],
    "x2": lambda X: X[:, 1],
    "x3": lambda X: X[:, 2],
    "x1^2": lambda X: X[:, 0] ** 2,
    "atan_x2": lambda X: (2 / np.pi) * np.arctan(0.7 * X[:, 1]),
    "x1*x3": lambda X: X[:, 0] * X[:, 2],
    "x1*x2": lambda X: X[:, 0] * X[:, 1],
    "x1*x3^2": lambda X: X[:, 0] * X[:, 2] ** 2,
    "x1*x2*x3": lambda X: X[:, 0] * X[:, 1] * X[:, 2],
}

_MAIN = {"linear": ("x1", "x2", "x3"), "additive": ("x1^2", "atan_x2", "x3")}
_INTER = {"linear": [((0, 2), -0.9, "x1*x3")], "additive": [((0, 1), -0.5, "x1*x2"), ((0, 2), 0.2, "x1*x3^2")]}
# the five effect structures crossed with the two forms of G (issue #16, corrections)
STRUCTURES = ("ti-main", "td-main", "ti-interaction", "td-main+ti-interaction", "td-interaction")


@dataclass(frozen=True)
class Scenario:
    """A simulated survival model; ``number`` 1..10 as in the paper (1-5 linear G, 6-10 generalised additive)."""

    number: int
    name: str
    terms: tuple[Term, ...]
    n_features: int = 3
    baseline: float = LAMBDA

    def _ab(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = np.zeros(len(X)), np.zeros(len(X))
        for term in self.terms:
            if term.td:
                b += term.value(X)
            else:
                a += term.value(X)
        return a, b

    def log_hazard(self, X: np.ndarray, times: np.ndarray) -> np.ndarray:
        """``X (n, 3)``, ``times (T,)`` -> ``log h(t|x)`` of shape ``(n, T)``."""
        a, b = self._ab(np.asarray(X, dtype=float))
        return np.log(self.baseline) + a[:, None] + b[:, None] * np.log1p(np.asarray(times, dtype=float))[None, :]

    def hazard(self, X: np.ndarray, times: np.ndarray) -> np.ndarray:
        """``h(t|x)``, shape ``(n, T)``, per unit time."""
        return np.exp(self.log_hazard(X, times))

    def cumulative_hazard(self, X: np.ndarray, times: np.ndarray) -> np.ndarray:
        """``H(t|x) = int_0^t h``, closed form, shape ``(n, T)``."""
        a, b = self._ab(np.asarray(X, dtype=float))
        t = np.asarray(times, dtype=float)[None, :]
        c = (b + 1.0)[:, None]
        safe = np.where(np.abs(c) < 1e-12, 1.0, c)
        power = np.where(np.abs(c) < 1e-12, np.log1p(t), np.expm1(safe * np.log1p(t)) / safe)
        return self.baseline * np.exp(a)[:, None] * power

    def survival(self, X: np.ndarray, times: np.ndarray) -> np.ndarray:
        """``S(t|x) = exp(-H(t|x))``, shape ``(n, T)``."""
        return np.exp(-self.cumulative_hazard(X, times))

    def predict(self, X: np.ndarray, times: np.ndarray, scale: str) -> np.ndarray:
        """The target on ``scale`` in {survival, hazard, log_hazard}, shape ``(n, T)``."""
        return {"survival": self.survival, "hazard": self.hazard, "log_hazard": self.log_hazard}[scale](X, times)

    def sample(self, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Draw ``(X (n, 3), time (n,), event (n,) bool)``: inverse-cumulative-hazard times, censored at 70."""
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((n, self.n_features))
        a, b = self._ab(X)
        target = -np.log(rng.uniform(size=n)) / (self.baseline * np.exp(a))  # H(T) / (lambda e^a)
        c = b + 1.0
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            inner = 1.0 + c * target
            t_event = np.where(
                np.abs(c) < 1e-12,
                np.expm1(target),
                np.where(inner > 0, np.exp(np.log(np.where(inner > 0, inner, 1.0)) / c) - 1.0, np.inf),
            )
        event = t_event <= MAX_TIME
        return X, np.minimum(t_event, MAX_TIME), event

    def true_partition(self) -> dict[tuple[int, ...], str]:
        """Components of log h with their class, ``{features: "td" | "ti"}`` (Eq. 8's I_d and I_id)."""
        out: dict[tuple[int, ...], str] = {}
        for term in self.terms:
            if out.get(term.features) != "td":
                out[term.features] = "td" if term.td else "ti"
        return out

    @property
    def theorem_3_2_applies(self) -> bool:
        """Thm 3.2's hypothesis: G linear including interactions, or purely additive (no interaction)."""
        return self.number <= 5 or all(len(t.features) == 1 for t in self.terms)


def scenario(number: int) -> Scenario:
    """Scenario 1..10: ``form = linear`` for 1-5, ``additive`` for 6-10; structure ``STRUCTURES[(number-1) % 5]``.

    Raises:
        ValueError: a number outside 1..10.
    """
    if not 1 <= number <= 10:
        raise ValueError(f"scenario must be in 1..10, got {number}")
    form = "linear" if number <= 5 else "additive"
    structure = STRUCTURES[(number - 1) % 5]
    td_main = structure.startswith("td-main")
    terms = [Term((j,), BETA[j], fn, td=td_main and j == 0) for j, fn in enumerate(_MAIN[form])]
    if "interaction" in structure:
        terms += [Term(f, c, fn, td=structure == "td-interaction") for f, c, fn in _INTER[form]]
    return Scenario(number, f"{form}/{structure}", tuple(terms))


def asymmetry_scenario() -> Scenario:
    """Thm 3.3's setting (ours, not one of the ten): Z = {x1, x3} via x1 x3^2 log(t+1) is the only time-dependent
    set, beside time-independent main effects and a time-independent superset {x1, x2, x3}."""
    terms = [Term((j,), BETA[j], fn) for j, fn in enumerate(_MAIN["linear"])]
    terms += [Term((0, 2), 0.4, "x1*x3^2", td=True), Term((0, 1, 2), 0.5, "x1*x2*x3")]
    return Scenario(0, "asymmetry (Thm 3.3)", tuple(terms))


def symmetric_background(n: int, seed: int, n_features: int = 3) -> np.ndarray:
    """About ``n`` standard normal rows closed under every per-feature sign flip (ours): each draw ``z`` enters as
    all ``2**p`` rows ``(s_1 z_1, ..., s_p z_p)``, so every empirical moment that is odd in some feature is exactly
    zero. The background then behaves like independent, centred features (Thm 3.2's hypothesis) while staying one
    fixed sample shared by all coalitions and times (common random numbers). Shape ``(2**p * max(1, n // 2**p), p)``.
    """
    z = np.random.default_rng(seed).standard_normal((max(1, n // 2**n_features), n_features))
    signs = 1.0 - 2.0 * ((np.arange(2**n_features)[:, None] >> np.arange(n_features)[None, :]) & 1)
    return (signs[:, None, :] * z[None, :, :]).reshape(-1, n_features)
