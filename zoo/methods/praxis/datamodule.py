"""``BinaryCSVDataModule``: a CSV with a named label column, as one full batch of 0/1 features for PRAXIS."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo.core.constraints import DataFile, Fraction, NonEmpty, NonNegativeInt, Positive, PositiveInt
from zoo.core.data import DataError, read_csv_rows, seeded_split
from zoo.methods.praxis.binarize import binary_spec, feature_names, fit_spec, transform


def read_columns(path: str, label: str | None = None) -> tuple[dict[str, list[str]], list[str] | None]:
    """Read a CSV into ``{column: [raw strings]}`` (label column removed) and the raw labels.

    Raises:
        DataError: missing file, missing label column (with the header), ragged rows.
    """
    header, rows = read_csv_rows(path, required=(label,) if label else ())
    if not rows:
        raise DataError(f"{path}:2: no data rows")
    cols = {h: [r[h] for r in rows] for h in header if h != label}
    return cols, ([r[label].strip() for r in rows] if label else None)


class BinaryCSVDataModule(L.LightningDataModule):
    """Binary features and integer labels from a CSV; the whole training split is one batch.

    Args:
        path: CSV file with a header row.
        label: name of the label column; its distinct values (sorted) become classes ``0..C-1``.
        binarize: ``False`` requires every feature column to hold only 0/1 (a clear error otherwise);
            ``True`` keeps 0/1 columns, threshold-guesses numeric ones and one-hot encodes categorical ones.
        features: optional list of feature columns to use (in this order); default all but the label.
        n_estimators, max_depth, learning_rate: the threshold-guessing ensemble (``binarize=True``).
        val_fraction: share of rows held out for validation (seeded split); 0 = none.
        seed: seed of the split and of the ensemble.

    Attributes after ``setup()``: ``X_train``, ``y_train``, ``X_val``, ``y_val`` (numpy), ``spec`` (binarisation
    spec), ``feature_names``, ``classes`` (label strings).

    Raises:
        DataError: from ``setup()``: missing file/column, missing or non-binary values, fewer than 2 rows.
    """

    def __init__(
        self,
        path: Annotated[str, DataFile("csv", column_args=("label", "features"))],
        label: str,
        binarize: bool = False,
        features: Annotated[list[str], NonEmpty] | None = None,
        n_estimators: PositiveInt = 40,
        max_depth: PositiveInt = 2,
        learning_rate: Positive = 0.1,
        val_fraction: Fraction = 0.0,
        seed: NonNegativeInt = 0,
    ):
        super().__init__()
        self.path, self.label, self.binarize, self.features = str(path), label, bool(binarize), features
        self.gbdt = {"n_estimators": n_estimators, "max_depth": max_depth, "learning_rate": learning_rate}
        self.val_fraction, self.seed = float(val_fraction), int(seed)
        self.X_train = None

    def setup(self, stage: str | None = None) -> None:
        if self.X_train is not None:
            return
        if not Path(self.path).is_file():
            raise DataError(f"{self.path}: no such file (data.path)")
        cols, raw_y = read_columns(self.path, self.label)
        if self.features is not None:
            unknown = [f for f in self.features if f not in cols]
            if unknown:
                raise DataError(f"{self.path}:1: data.features names unknown column(s) {unknown}; have {list(cols)}")
            cols = {f: cols[f] for f in self.features}
        self.classes = sorted(set(raw_y))
        y = np.array([self.classes.index(v) for v in raw_y], dtype=np.int64)
        if len(y) < 2:
            raise DataError(f"{self.path}: need at least 2 rows, got {len(y)}")
        if self.binarize:
            self.spec = fit_spec(cols, y, self.path, seed=self.seed, **self.gbdt)
        else:
            self.spec = binary_spec(cols, self.path)
        X = transform(self.spec, cols, self.path)
        self.feature_names = feature_names(self.spec)
        if self.val_fraction > 0:
            val, train = seeded_split(len(y), [self.val_fraction, 1 - self.val_fraction], self.seed)
        else:
            val, train = [], list(range(len(y)))
        self.X_train, self.y_train = X[train], y[train]
        self.X_val, self.y_val = X[val], y[val]

    def _loader(self, X: np.ndarray, y: np.ndarray) -> DataLoader:
        ds = TensorDataset(torch.from_numpy(X.astype(np.uint8)), torch.from_numpy(y))
        return DataLoader(ds, batch_size=max(1, len(y)), shuffle=False)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.X_train, self.y_train)

    def val_dataloader(self):
        return self._loader(self.X_val, self.y_val) if len(self.y_val) else []
