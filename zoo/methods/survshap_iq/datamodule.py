"""``SurvivalDataModule``: right-censored survival data (time, event, features) as tensors for the survival nets.

Sources (``dataset=``), all read without a download:

- scikit-survival's shipped sets: ``gbsg2`` (German Breast Cancer Study Group 2, 686 patients, 8 features,
  recurrence-free survival in days), ``whas500`` (Worcester Heart Attack Study, 500, 14, days), ``veterans``
  (Veterans' lung cancer trial, 137, 6, days), ``flchain`` (serum free light chain, 7 874 -> 6 524 rows, 8 features,
  days; the ``chapter`` column is the cause of death, recorded after the outcome, so it is dropped, and rows without
  ``creatinine`` are dropped), ``aids`` (ACTG 320, 1 151, 11, days, endpoint AIDS diagnosis or death) and
  ``breast-cancer`` (GSE7390, 198 patients, 76 genes + 4 clinical, days to distant metastasis).
- ``simulation-<k>`` (k = 1..10): GENERATED data from the paper's scenario k (``synthetic.py``), n rows.
- a user's CSV via ``path=`` (then ``dataset`` is ignored).

Preprocessing: a categorical column becomes one feature holding its category code (binary ``no``/``yes`` -> 0/1,
ordered grades I/II/III -> 0/1/2, other categories in their listed order), so every original variable is one player
of the explanation; networks standardise inputs internally, so explanations are in the data's own units.

User CSV schema: a header row; ``time`` (column name set by ``time=``): a finite number >= 0, in any unit (the
recipe's explanation times are in that unit); ``event`` (``event=``): 1 = event observed, 0 = censored (also
``true``/``false``); every other column (or those listed in ``features=``) is a feature: numbers, or text
categories (coded in sorted order). Missing values (empty, ``NA``, ``nan``) are not imputed.

Raises:
    DataError: in the recipe check before torch is imported (``TABLE``) and again at construction: a missing file or
        column, a time that is not a number, negative or infinite, an event other than 0/1, or a missing value,
        naming the file, line and column.
"""

from __future__ import annotations

from typing import Annotated

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo.core.constraints import PRESENT, Cell, DataFile, Fraction, NonEmpty, NonNegativeInt, PositiveInt, Range
from zoo.core.data import DataError, seeded_split
from zoo.core.datafiles import read_declared

SHIPPED = {
    "gbsg2": "load_gbsg2",
    "whas500": "load_whas500",
    "veterans": "load_veterans_lung_cancer",
    "flchain": "load_flchain",
    "aids": "load_aids",
    "breast-cancer": "load_breast_cancer",
}
_EVENT = {"1": True, "0": False, "1.0": True, "0.0": False, "true": True, "false": False}
#: A user's CSV (``data.path``): a time >= 0, an event 0/1 and feature values that are not missing (default: every
#: other column), checked before torch too.
TABLE = DataFile(
    "csv",
    column_args=("time", "event", "features"),
    types={"time": Cell("number", Range(0)), "event": Cell("choice", choices=tuple(_EVENT)), "features": PRESENT},
    rest_of="features",
)


def load_shipped(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """``(X (n, p) float, time (n,), event (n,) bool, feature names)`` of a scikit-survival dataset.

    Raises:
        DataError: an unknown name.
    """
    if name not in SHIPPED:
        raise DataError(
            f"data.dataset: unknown dataset {name!r}; choose one of {sorted(SHIPPED)}, "
            "simulation-1..10 or give data.path"
        )
    import sksurv.datasets as sd

    X, y = getattr(sd, SHIPPED[name])()
    if name == "flchain":
        X = X.drop(columns=["chapter"])
    keep = ~X.isna().any(axis=1).to_numpy()
    X, y = X[keep], y[keep]
    cols = {}
    for c in X.columns:
        s = X[c]
        cols[c] = s.cat.codes.to_numpy(float) if str(s.dtype) == "category" else s.to_numpy(float)
    event_key, time_key = y.dtype.names
    return (
        np.stack(list(cols.values()), axis=1),
        y[time_key].astype(float),
        y[event_key].astype(bool),
        [str(c) for c in cols],
    )


def read_survival_csv(
    path: str, time: str = "time", event: str = "event", features: list[str] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Read and validate a user's survival CSV (schema in the module docstring, declared as ``TABLE``: the recipe
    check reads it the same way before torch); returns like ``load_shipped``.

    Raises:
        DataError: ``path:line: column 'c': ...`` for every kind of bad value listed in the module docstring.
    """
    header, rows = read_declared(path, TABLE, {"time": time, "event": event, "features": features})
    if not rows:
        raise DataError(f"{path}:2: no data rows")
    names = features or [h for h in header if h not in (time, event)]
    if not names:
        raise DataError(f"{path}:1: no feature columns besides {time!r} and {event!r}")
    t = np.array([r[time] for _, r in rows], dtype=float)
    e = np.array([_EVENT[r[event].strip().lower()] for _, r in rows], dtype=bool)
    X = np.empty((len(rows), len(names)))
    for j, c in enumerate(names):
        raw = [r[c].strip() for _, r in rows]
        try:
            X[:, j] = [float(v) for v in raw]
        except ValueError:  # a text column: category codes in sorted order
            levels = sorted(set(raw))
            X[:, j] = [levels.index(v) for v in raw]
    return X, t, e, list(names)


class SurvivalDataModule(L.LightningDataModule):
    """Survival data split into train / validation / test (seeded), batches of ``(x, time, event)``.

    Args:
        dataset: a shipped set (see module docstring) or ``simulation-<k>``; ignored when ``path`` is given.
        path: a user's CSV (schema in the module docstring); time, event: its column names.
        features: optional feature columns (CSV) or names (shipped sets) to keep, in this order.
        n: rows to generate for ``simulation-<k>``.
        val_fraction, test_fraction: shares of rows held out (seeded split by ``seed``).
        batch_size: training batch size (validation and test are one batch each: the C-index needs all pairs).
        seed: seed of the split and of a simulation's draw.

    Attributes: ``X_train, time_train, event_train`` (and ``_val``, ``_test``) numpy arrays, ``feature_names``,
    ``generated`` (True for the simulations), ``scenario`` (the simulation's number or None).
    """

    def __init__(
        self,
        dataset: str = "gbsg2",
        path: Annotated[str | None, TABLE] = None,
        time: str = "time",
        event: str = "event",
        features: Annotated[list[str], NonEmpty] | None = None,
        n: PositiveInt = 1000,
        val_fraction: Fraction = 0.15,
        test_fraction: Fraction = 0.2,
        batch_size: PositiveInt = 256,
        seed: NonNegativeInt = 0,
    ):
        super().__init__()
        self.batch_size, self.scenario, self.generated = int(batch_size), None, False
        if path:
            X, t, e, names = read_survival_csv(path, time, event, features)
            self.source = str(path)
        elif dataset.startswith("simulation-"):
            from zoo.methods.survshap_iq.synthetic import scenario

            self.scenario = int(dataset.split("-", 1)[1])
            X, t, e = scenario(self.scenario).sample(int(n), seed)
            names, self.generated = ["x1", "x2", "x3"], True
            self.source = f"GENERATED: simulation scenario {self.scenario} ({scenario(self.scenario).name})"
        else:
            X, t, e, names = load_shipped(dataset)
            self.source = f"scikit-survival {dataset}"
            if features:
                unknown = [f for f in features if f not in names]
                if unknown:
                    raise DataError(f"data.features: unknown feature(s) {unknown} in {dataset}; have {names}")
                X, names = X[:, [names.index(f) for f in features]], list(features)
        if len(t) < 10 or e.sum() < 2:
            raise DataError(f"{self.source}: need at least 10 rows and 2 events, got {len(t)} rows, {int(e.sum())}")
        test, val, train = seeded_split(len(t), [test_fraction, val_fraction, 1 - test_fraction - val_fraction], seed)
        self.feature_names = names
        for split, idx in (("train", train), ("val", val), ("test", test)):
            setattr(self, f"X_{split}", X[idx])
            setattr(self, f"time_{split}", t[idx])
            setattr(self, f"event_{split}", e[idx])

    def _loader(self, split: str, batch_size: int, shuffle: bool) -> DataLoader:
        X, t, e = (getattr(self, f"{k}_{split}") for k in ("X", "time", "event"))
        ds = TensorDataset(
            torch.as_tensor(X, dtype=torch.float32),
            torch.as_tensor(t, dtype=torch.float32),
            torch.as_tensor(e, dtype=torch.bool),
        )
        return DataLoader(
            ds, batch_size=max(1, min(batch_size, len(t))), shuffle=shuffle, generator=torch.Generator().manual_seed(0)
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", self.batch_size, True)

    def val_dataloader(self):
        return self._loader("val", len(self.time_val), False) if len(self.time_val) else []

    def test_dataloader(self):
        return self._loader("test", len(self.time_test), False) if len(self.time_test) else []
