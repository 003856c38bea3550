"""The drift schedule: per-step mass scale, friction scale and slip probability, from a modulator or a user's CSV.

A user's drift file (``data.drift_path``) is a CSV with the header ``step,mass_scale,friction_scale,slip_prob``;
row ``i`` holds from its ``step`` (an environment step, int >= 0) until the next row's step, and the first row must
start at step 0. ``mass_scale`` and ``friction_scale`` multiply the MuJoCo model's base body mass (and inertia) and
sliding friction (> 0); ``slip_prob`` in ``[0, 1]`` is the probability that a discrete action is replaced by a
uniformly drawn one. A decreasing step, a missing or non-numeric value, a negative or zero scale or a slip outside
``[0, 1]`` raises ``DataError("file:line: column 'name': ...")``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zoo.core.constraints import Cell, DataFile, Range
from zoo.core.data import DataError
from zoo.core.datafiles import read_declared
from zoo.methods.sf_consolidation.modulators import aperiodic_sine, noisy_sine, ou_drift

COLUMNS = ("step", "mass_scale", "friction_scale", "slip_prob")
#: A user's drift CSV (``data.drift_path``), checked before torch too; the first step being 0 is checked here.
SCALE = Cell("number", Range(0, min_open=True))
DRIFT = DataFile(
    "csv",
    COLUMNS,
    types={
        "step": Cell("integer", Range(0), increasing=True),
        "mass_scale": SCALE,
        "friction_scale": SCALE,
        "slip_prob": Cell("number", Range(0, 1)),
    },
)
KINDS = ("sine", "aperiodic", "ou", "none", "csv")


@dataclass
class DriftSchedule:
    """Piecewise-constant drift: ``values[i]`` holds from ``steps[i]`` on.

    Attributes:
        steps: ``(R,)`` int64, increasing, ``steps[0] == 0``.
        mass_scale, friction_scale, slip_prob: ``(R,)`` float64.
    """

    steps: np.ndarray
    mass_scale: np.ndarray
    friction_scale: np.ndarray
    slip_prob: np.ndarray

    def at(self, t: int) -> tuple[float, float, float]:
        """``(mass_scale, friction_scale, slip_prob)`` in force at environment step ``t``."""
        i = int(np.searchsorted(self.steps, t, side="right")) - 1
        i = max(i, 0)
        return float(self.mass_scale[i]), float(self.friction_scale[i]), float(self.slip_prob[i])


def build_schedule(
    kind: str, n_steps: int, target: str, low: float, high: float, period: float, seed: int = 0, path: str | None = None
) -> DriftSchedule:
    """A drift schedule of ``n_steps`` steps.

    Args:
        kind: ``sine`` | ``aperiodic`` | ``ou`` | ``none`` | ``csv`` (``path`` is then read with :func:`read_drift_csv`).
        target: what drifts, ``mass`` (mass and inertia, MuJoCo) or ``slip`` (slip probability, discrete envs).
        low, high: range of the drifting value (mass scale or slip probability); the other values stay neutral.
        period: modulator period in steps (OU: ``theta = 1/period``, ``sigma`` such that the stationary sd is a
            quarter of the range; ours).
    Raises:
        ValueError: an unknown kind or target.
    """
    if kind == "csv":
        if not path:
            raise ValueError("data.drift: 'csv' needs data.drift_path")
        return read_drift_csv(path)
    if kind not in KINDS:
        raise ValueError(f"data.drift: unknown {kind!r}; choices {list(KINDS)}")
    if target not in ("mass", "slip"):
        raise ValueError(f"drift target must be 'mass' or 'slip', got {target!r}")
    n = max(int(n_steps), 1)
    if kind == "sine":
        v = noisy_sine(n, period, low, high, seed=seed)
    elif kind == "aperiodic":
        v = aperiodic_sine(n, period, low, high, seed=seed)
    elif kind == "ou":
        theta = 1.0 / period
        sigma = (high - low) / 4 * np.sqrt(2 * theta)
        v = ou_drift(n, mu=(low + high) / 2, theta=theta, sigma=sigma, low=low, high=high, seed=seed)
    else:
        v = np.full(n, low if target == "slip" else 1.0)
    ones = np.ones(n)
    mass, slip = (v, np.zeros(n)) if target == "mass" else (ones, v)
    return DriftSchedule(np.arange(n, dtype=np.int64), mass, ones.copy(), slip)


def read_drift_csv(path: str) -> DriftSchedule:
    """Read a user's drift CSV (schema in the module docstring, declared as ``DRIFT``) and check every row.

    Raises:
        DataError: ``path:line: column 'c': ...`` naming the first bad cell.
    """
    _, rows = read_declared(path, DRIFT)
    if not rows:
        raise DataError(f"{path}:2: no rows after the header")
    line, first = rows[0]
    if first["step"] != 0:
        raise DataError(f"{path}:{line}: column 'step': the first row must start at step 0")
    cols = {c: np.asarray([r[c] for _, r in rows]) for c in COLUMNS}
    return DriftSchedule(cols["step"].astype(np.int64), *(cols[c].astype(np.float64) for c in COLUMNS[1:]))
