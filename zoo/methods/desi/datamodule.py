"""``FrechetDataModule``: inputs ``X (n, p)`` and metric-space responses, embedded for DeSI.

Datasets (``data.dataset``):

* ``hmd-forecast`` (real, HMD life tables; the task is ours): X = log m_x at ages 0, 5, …, 110 in year t (floored
  at 1e-5), Y = the age-at-death distribution conditional on reaching 20 in year t + 10 (life-table d_x, ages 20–110+,
  uniform within each year of age, 110+ folded into [109, 110]) as 101 quantiles on [0, 1]; split by country.
* ``hmd2013`` (real; Ghosal, Meiring & Petersen 2023): 39 countries' 2013 quantile functions (101 points, ages
  20–110) on 5 standardised covariates; ``fold`` (0–29) picks the FSI paper's held-out 10 countries.
* ``GDPsatis`` / ``lifeExpGdp`` / ``election`` (real, robCompositions): 6-part compositions on 1–2 covariates
  (counts normalised to shares); ``holdout`` picks one row to leave out (leave-one-out), or a seeded split.
* ``sim`` (GENERATED, ``zoo.methods.desi.synthetic``): ``space``, ``n``, ``p``, ``seed``.
* a user's file via ``path=`` (``dataset`` ignored), CSV or ``.npz``:

  - CSV with a header. Columns starting ``y_`` are the response (in column order), every other column except
    ``id`` is a numeric input. ``space=distribution``: ``y_`` columns are quantiles on an equispaced probability
    grid over [0, 1] (non-decreasing along the row), or ``density_`` columns instead: a density on an equispaced
    grid over ``support`` that must integrate to 1 (trapezoid, ±1%). ``space=spd``: r*r entries of a symmetric
    positive-definite matrix, row-major. ``space=composition``: positive parts summing to 1 (±1e-6).
    ``space=laplacian``: r*r entries, symmetric, zero row sums, off-diagonal ≤ 0.
  - ``.npz`` with arrays ``X (n, p)`` and ``Y`` (``(n, m)``, or ``(n, r, r)`` for matrices); same checks, with
    "line" = row number + 1 and column = the array's column.

  A NaN, a non-numeric cell, non-monotone quantiles, a density not integrating to one, a non-SPD matrix or a bad
  composition raises ``DataError("file:line: column ...")`` before a run directory exists; a CSV's non-numeric or
  missing cell already in the recipe check, before torch is imported (``TABLE``).

Inputs are standardised with the training split's mean and sd (kept in ``x_mean``, ``x_sd``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from zoo.core.constraints import NUMBER, DataFile, NonNegativeInt, OneOf, OpenUnit, PositiveInt, Range
from zoo.core.data import DataError, read_csv_rows, repo_root, seeded_split
from zoo.core.datafiles import read_declared
from zoo.methods.desi.spaces import SPACES, Space, quantiles_from_pmf
from zoo.methods.desi.synthetic import simulate

HMD = "data/mortality-distributions"
COMPOSITIONS = {
    "GDPsatis": (["gdp"], ["very.bad", "bad", "moderately.bad", "moderately.good", "good", "very.good"]),
    "lifeExpGdp": (
        ["lifeExpMen", "lifeExpWomen"],
        ["agriculture", "manufacture", "construction", "wholesale", "transport", "other"],
    ),
    "election": (["unemployment", "income"], ["CDU_CSU", "SDP", "GRUENE", "FDP", "DIE_LINKE", "other_parties"]),
}
DATASETS = ("hmd-forecast", "hmd2013", "sim", *COMPOSITIONS)
GRID = np.linspace(0.0, 1.0, 101)


def _root(rel: str) -> Path:
    p = Path(rel)
    return p if p.is_absolute() or p.exists() else repo_root() / rel


def load_hmd_forecast(horizon: int = 10) -> dict:
    """Country-year pairs (t, t + horizon) from the shipped HMD life tables (see the module docstring)."""
    import pandas as pd

    d = pd.read_csv(_root(HMD) / "hmd_lifetables_1x1_bothsexes_1950plus.csv.gz")
    d["a"] = d["age"].str.rstrip("+").astype(int)
    mx = d.pivot_table(index=["country", "year"], columns="a", values="mx").sort_index()
    dx = d.pivot_table(index=["country", "year"], columns="a", values="dx").sort_index()
    ages_x = list(range(0, 111, 5))
    keys = [(c, y) for c, y in mx.index if (c, y + horizon) in dx.index]
    X = np.log(np.maximum(mx.loc[keys, ages_x].to_numpy(), 1e-5))
    D = dx.loc[[(c, y + horizon) for c, y in keys], list(range(20, 111))].to_numpy()
    pmf = np.c_[D[:, :89], D[:, 89] + D[:, 90]]  # ages 20..108, then 109 and 110+ together in [109, 110]
    Q = quantiles_from_pmf(np.arange(20.0, 111.0), pmf, GRID)
    return {
        "X": X,
        "Z": Q,
        "groups": np.array([c for c, _ in keys]),
        "years": np.array([y for _, y in keys]),
        "feature_names": [f"log_m{a}" for a in ages_x],
        "support": (20.0, 110.0),
    }


def load_hmd2013() -> dict:
    """The FSI paper's 2013 cross-section: 39 countries, 5 covariates, quantile functions, 30 folds."""
    import pandas as pd

    root = _root(HMD)
    Xdf = pd.read_csv(root / "fsi2013_X_centerscale.csv", index_col=0)
    Q = pd.read_csv(root / "fsi2013_quant_all.csv", index_col=0).to_numpy()
    folds = pd.read_csv(root / "fsi2013_Folds_new.csv", index_col=0).to_numpy() - 1
    return {
        "X": Xdf.to_numpy(),
        "Z": Q,
        "groups": np.array(Xdf.index),
        "folds": folds,
        "feature_names": list(Xdf.columns),
        "support": (20.0, 110.0),
    }


def load_composition(name: str) -> dict:
    """A robCompositions table as inputs and 6-part shares."""
    xs, parts = COMPOSITIONS[name]
    path = _root("data/compositional") / f"robcompositions_{name}.csv"
    _, rows = read_csv_rows(path, required=xs + parts)
    X = np.array([[float(r[c]) for c in xs] for r in rows])
    Y = np.array([[float(r[c]) for c in parts] for r in rows])
    return {
        "X": X,
        "Y": Y / Y.sum(1, keepdims=True),
        "feature_names": xs,
        "parts": parts,
        "groups": np.array([r.get("country") or r.get("rownames") for r in rows]),
    }


def _check_rows(Y: np.ndarray, space: str, path: str, cols: list[str], lines: list[int]) -> None:
    """Raise ``DataError`` at the first response row that is not a point of ``space`` (``lines``: each row's line)."""
    for i, y in enumerate(Y):
        where = f"{path}:{lines[i]}"
        if space == "distribution":
            bad = np.nonzero(np.diff(y) < 0)[0]
            if len(bad):
                raise DataError(
                    f"{where}: column {cols[bad[0] + 1]}: quantiles decrease ({y[bad[0]]} -> "
                    f"{y[bad[0] + 1]}); a quantile function is non-decreasing"
                )
        elif space == "composition":
            if (y <= 0).any():
                raise DataError(f"{where}: column {cols[int(np.argmax(y <= 0))]}: composition parts must be > 0")
            if abs(y.sum() - 1) > 1e-6:
                raise DataError(f"{where}: columns {cols[0]}..{cols[-1]}: parts sum to {y.sum():.6g}, not 1")
        else:
            r = math.isqrt(len(y))
            A = y.reshape(r, r)
            asym = np.abs(A - A.T)
            if asym.max() > 1e-8 * max(1.0, np.abs(A).max()):
                j, k = np.unravel_index(asym.argmax(), A.shape)
                raise DataError(f"{where}: column {cols[j * r + k]}: matrix is not symmetric")
            if space == "spd" and np.linalg.eigvalsh(A).min() <= 0:
                raise DataError(
                    f"{where}: columns {cols[0]}..{cols[-1]}: matrix is not positive definite "
                    f"(smallest eigenvalue {np.linalg.eigvalsh(A).min():.3g})"
                )
            if space == "laplacian" and (np.abs(A.sum(1)).max() > 1e-6 or (A[~np.eye(r, dtype=bool)] > 1e-12).any()):
                raise DataError(
                    f"{where}: columns {cols[0]}..{cols[-1]}: not a graph Laplacian (zero row sums, off-diagonal <= 0)"
                )


#: A user's CSV (``data.path``): every column but ``id`` holds finite numbers (checked before torch too; the
#: response space's own rules, per row, are checked by :func:`read_user_file`).
TABLE = DataFile("csv", types={"*": NUMBER}, ignore=("id",))


def read_user_file(path: str, space: str, support=None) -> dict:
    """A user's CSV or ``.npz`` (schema in the module docstring) -> ``{"X", "Y" objects, "feature_names"}``.

    Raises:
        DataError: missing file, no response columns, a non-numeric cell or NaN, a response row outside ``space``.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{path}: no such file (data.path)")
    if p.suffix == ".npz":
        with np.load(p) as f:
            if "X" not in f or "Y" not in f:
                raise DataError(f"{path}: .npz needs arrays X and Y, has {sorted(f.files)}")
            X, Y = np.asarray(f["X"], dtype=np.float64), np.asarray(f["Y"], dtype=np.float64)
        Y = Y.reshape(len(Y), -1)
        xcols, ycols = [f"X[:, {j}]" for j in range(X.shape[1])], [f"Y[:, {j}]" for j in range(Y.shape[1])]
        for _name, A, cols in (("X", X, xcols), ("Y", Y, ycols)):
            if not np.isfinite(A).all():
                i, j = np.argwhere(~np.isfinite(A))[0]
                raise DataError(f"{path}:{i + 2}: column {cols[j]}: not a finite number ({A[i, j]})")
        names = [f"x{j}" for j in range(X.shape[1])]
        lines = [i + 2 for i in range(len(X))]
    else:
        header, rows = read_declared(path, TABLE)
        ycols = [h for h in header if h.startswith("y_")] or [h for h in header if h.startswith("density_")]
        xcols = [h for h in header if h not in ycols and h != "id" and not h.startswith(("y_", "density_"))]
        if not ycols:
            raise DataError(f"{path}:1: no response columns (names starting y_ or density_); header is {header}")
        vals = np.array([[r[h] for h in xcols + ycols] for _, r in rows], dtype=float).reshape(len(rows), -1)
        X, Y = vals[:, : len(xcols)], vals[:, len(xcols) :]
        lines = [line for line, _ in rows]
        names = xcols
        if ycols[0].startswith("density_"):
            if space != "distribution" or support is None:
                raise DataError(f"{path}:1: density_ columns need data.space=distribution and data.support=[lo, hi]")
            ages = np.linspace(support[0], support[1], len(ycols))
            for i, dens in enumerate(Y):
                mass = np.trapezoid(dens, ages)
                if (dens < 0).any() or abs(mass - 1) > 0.01:
                    raise DataError(
                        f"{path}:{lines[i]}: columns {ycols[0]}..{ycols[-1]}: density integrates to "
                        f"{mass:.4g} (must be 1 within 1%) or is negative"
                    )
            mid = (Y[:, 1:] + Y[:, :-1]) / 2 * np.diff(ages)
            Y = quantiles_from_pmf(ages, mid, GRID)
            ycols = [f"q{j}" for j in range(len(GRID))]
    if len(X) < 3 or X.shape[1] < 1:
        raise DataError(f"{path}: need >= 3 rows and >= 1 input column, got {X.shape}")
    _check_rows(Y, space, str(path), ycols, lines)
    if space in ("spd", "laplacian"):
        Y = Y.reshape(len(Y), math.isqrt(Y.shape[1]), -1)
    return {"X": X, "Y": Y, "feature_names": names}


class FrechetDataModule(L.LightningDataModule):
    """Training / held-out inputs and embedded responses for DeSI (schema in the module docstring).

    Args:
        dataset: one of ``DATASETS`` (ignored when ``path`` is given).
        path: a user's CSV or ``.npz``.
        space: response space of ``path`` / ``sim`` (``distribution``, ``spd``, ``composition``, ``laplacian``).
        support: ``[lo, hi]`` of distributions (a user's densities; clips projected quantiles).
        fold: ``hmd2013``: FSI fold 0–29.  holdout: compositions: index of the left-out row (None = seeded split).
        test_fraction, seed: the seeded split (by country for ``hmd-forecast``; by row otherwise).
        n, p: ``sim`` sizes.  n_test: ``sim`` held-out size.  batch_size: rows per training step.
    Attributes after ``setup()``: ``X_train``, ``Z_train``, ``X_test``, ``Z_test`` (numpy), ``space`` (Space),
        ``feature_names``, ``x_mean``, ``x_sd``, ``test_groups`` (labels of held-out rows), ``groups_train`` (country ids of hmd-forecast, else None), ``beta`` (sim only).
    Raises:
        DataError / ValueError: bad file or settings (see above), from ``setup()``.
    """

    def __init__(
        self,
        dataset: Annotated[str, OneOf(DATASETS)] = "hmd-forecast",
        path: Annotated[str | None, TABLE] = None,
        space: Annotated[str, OneOf(SPACES)] = "distribution",
        support: list[float] | None = None,
        fold: Annotated[int, Range(0, 29)] = 0,
        holdout: NonNegativeInt | None = None,
        test_fraction: OpenUnit = 0.25,
        seed: NonNegativeInt = 0,
        n: PositiveInt = 500,
        p: PositiveInt = 10,
        n_test: PositiveInt = 500,
        batch_size: PositiveInt = 256,
    ):
        super().__init__()
        if path is None and dataset not in DATASETS:
            raise ValueError(f"data.dataset must be one of {DATASETS}, got {dataset!r}")
        if space not in SPACES:
            raise ValueError(f"data.space must be one of {SPACES}, got {space!r}")
        if not 0 <= fold < 30:
            raise ValueError(f"data.fold must be in 0..29, got {fold}")
        self.dataset, self.path, self.space_kind = dataset, path, space
        self.support = tuple(support) if support is not None else None
        self.fold, self.holdout, self.test_fraction, self.seed = fold, holdout, test_fraction, seed
        self.n, self.p, self.n_test, self.batch_size = n, p, n_test, batch_size
        self.X_train = None
        self.beta = None

    def _split(self, n: int, groups=None) -> tuple[np.ndarray, np.ndarray]:
        if groups is None:
            test, train = seeded_split(n, [self.test_fraction, 1 - self.test_fraction], self.seed)
            return np.array(train), np.array(test)
        names = sorted(set(groups))
        test_g, _ = seeded_split(len(names), [self.test_fraction, 1 - self.test_fraction], self.seed)
        is_test = np.isin(groups, [names[k] for k in test_g])
        return np.nonzero(~is_test)[0], np.nonzero(is_test)[0]

    def setup(self, stage: str | None = None) -> None:
        if self.X_train is not None:
            return
        groups = None
        if self.path is not None:
            d = read_user_file(self.path, self.space_kind, self.support)
            self.space = Space(self.space_kind, int(np.prod(d["Y"].shape[1:])), self.support)
            X, Z = d["X"], self.space.embed(d["Y"])
            train, test = self._split(len(X))
        elif self.dataset == "sim":
            d = simulate(self.space_kind, self.n + self.n_test, self.p, self.seed)
            self.space, X, Z, self.beta = d["space"], d["X"], d["Z"], d["beta"]
            train, test = np.arange(self.n), np.arange(self.n, self.n + self.n_test)
        elif self.dataset in ("hmd-forecast", "hmd2013"):
            d = load_hmd_forecast() if self.dataset == "hmd-forecast" else load_hmd2013()
            self.space = Space("distribution", d["Z"].shape[1], self.support or d["support"])
            X, Z, groups = d["X"], d["Z"], d["groups"]
            if self.dataset == "hmd2013":
                test = np.sort(d["folds"][self.fold])
                train = np.setdiff1d(np.arange(len(X)), test)
            else:
                train, test = self._split(len(X), groups)
        else:
            d = load_composition(self.dataset)
            self.space = Space("composition", d["Y"].shape[1])
            X, Z, groups = d["X"], self.space.embed(d["Y"]), d["groups"]
            if self.holdout is not None:
                if not 0 <= self.holdout < len(X):
                    raise ValueError(f"data.holdout must be in 0..{len(X) - 1}, got {self.holdout}")
                test = np.array([self.holdout])
                train = np.setdiff1d(np.arange(len(X)), test)
            else:
                train, test = self._split(len(X))
        self.feature_names = list(d["feature_names"]) if "feature_names" in d else [f"x{j}" for j in range(X.shape[1])]
        self.x_mean, self.x_sd = X[train].mean(0), X[train].std(0)
        self.x_sd = np.where(self.x_sd > 0, self.x_sd, 1.0)
        std = (X - self.x_mean) / self.x_sd
        self.X_train, self.Z_train, self.X_test, self.Z_test = std[train], Z[train], std[test], Z[test]
        labels = groups if groups is not None else np.array([f"row {i}" for i in range(len(X))])
        if "years" in d:
            labels = np.array([f"{g} {y}->{y + 10}" for g, y in zip(groups, d["years"])])
        self.test_groups = labels[test]
        self.groups_train = (
            np.unique(groups[train], return_inverse=True)[1]
            if self.dataset == "hmd-forecast" and self.path is None
            else None
        )  # country ids: cross-fit by country

    def train_dataloader(self) -> DataLoader:
        """Row indices of the training split (the module holds the split itself; a batch is a set of rows ``B``)."""
        return DataLoader(
            torch.arange(len(self.X_train)), batch_size=min(self.batch_size, len(self.X_train)), shuffle=True
        )

    def val_dataloader(self) -> DataLoader:
        """One batch: every held-out row index."""
        return DataLoader(torch.arange(len(self.X_test)), batch_size=max(1, len(self.X_test)))
