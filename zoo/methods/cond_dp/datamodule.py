"""``LabelDPDataModule``: public features, private labels, seeded 70/15/15 splits, a Poisson training loader.

Datasets (``dataset=``):

- ``commuting-sf`` / ``commuting-travis`` / ``commuting-manhattan``: the shipped LODES 2018 OD pairs
  (:mod:`zoo.data.od_pairs`): 271 public features per non-zero pair (zero-flow pairs are not in the data), label
  ``log(1 + commuters)``, declared label range [0, 8] (log(1 + 2,980)).
- ``diabetes``: scikit-learn's diabetes progression (442 × 10, raw units), label = progression / 100, declared range
  [0, 3.5].
- ``csv`` (set by giving ``path``): a user's file. Schema: a header row; ``label`` names the label column (a number);
  ``features`` lists public feature columns (default: every other column); every used cell must be a number.
  A missing or non-numeric cell raises ``DataError("file:line: column 'c': ...")`` in the recipe check, before
  torch is imported (the file's declaration ``TABLE``, read again by the datamodule). ``y_min``/``y_max`` must be declared: the label-DP baselines' sensitivity
  depends on them; labels outside are clipped and counted (``clipped_labels``, and a warning).

Features are standardised with the training split's mean and sd (public data). ``train_dataloader`` is opacus'
``DPDataLoader``: each example enters each batch independently with probability ``q = batch_size / n_train``, the
sampling the RDP accountant assumes (``poisson=False`` gives a shuffled loader for non-private training).
"""

from __future__ import annotations

import logging
from typing import Annotated, Literal

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo.core.constraints import NUMBER, DataFile, NonEmpty, NonNegativeInt, OneOf, Positive, PositiveInt
from zoo.core.data import DataError, seeded_split
from zoo.core.datafiles import read_declared

log = logging.getLogger("zoo")

#: Declared label ranges of the shipped datasets (public, chosen without looking at private labels' extremes).
LABEL_RANGE = {"commuting": (0.0, 8.0), "diabetes": (0.0, 3.5)}
DATASETS = ("commuting-sf", "commuting-travis", "commuting-manhattan", "diabetes")


#: A user's CSV (``data.path``): the label column and the feature columns (default: every other column) hold numbers.
TABLE = DataFile(
    "csv", column_args=("label", "features"), types={"label": NUMBER, "features": NUMBER}, rest_of="features"
)


def read_table(
    path: str, label: str | None, features: list[str] | None
) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """A user's CSV as (n, d) features, (n,) labels (None without ``label``: rows to predict) and the feature names.

    Raises:
        DataError: missing file/column, a row with the wrong number of fields, an empty or non-numeric cell
            (``file:line: column 'c': ...``, as the recipe check says before torch: ``TABLE``), no data rows.
    """
    header, rows = read_declared(path, TABLE, {"label": label, "features": features})
    if not rows:
        raise DataError(f"{path}:2: no data rows")
    names = list(features) if features else [h for h in header if h != label]
    if label in names:
        raise DataError(f"{path}:1: column {label!r} is both the label and a feature")
    cols = ([label] if label else []) + names
    out = np.array([[r[c] for c in cols] for _, r in rows], dtype=float).reshape(len(rows), len(cols))
    return (out[:, 1:], out[:, 0], names) if label else (out, None, names)


def load_dataset(dataset: str) -> tuple[np.ndarray, np.ndarray, list[str], dict]:
    """A shipped dataset as (X, y, names, extra); extra holds the OD ids for the commuting tables."""
    if dataset.startswith("commuting-"):
        from zoo.data.od_pairs import od_pairs

        p = od_pairs(dataset.split("-", 1)[1])
        return p.X, p.y, p.feature_names, {"origin": p.origin, "destination": p.destination}
    if dataset == "diabetes":
        from sklearn.datasets import load_diabetes

        d = load_diabetes(scaled=False)
        return d.data.astype(float), d.target.astype(float) / 100.0, list(d.feature_names), {}
    raise ValueError(f"data.dataset must be commuting-<sf|travis|manhattan>, diabetes or csv, got {dataset!r}")


class LabelDPDataModule(L.LightningDataModule):
    """Public features and private labels for Cond-DP and its baselines (schema in the module docstring).

    Args:
        dataset: ``commuting-sf`` (default), ``commuting-travis``, ``commuting-manhattan``, ``diabetes``; ignored
            when ``path`` is given.
        path: a user's CSV; label: its label column; features: its feature columns (None = all others).
        y_min, y_max: declared label range (required for a CSV; shipped datasets have defaults).
        batch_size: expected Poisson batch qN.
        split_seed: seed of the 70/15/15 train/val/test split.
        poisson: Poisson ``DPDataLoader`` for training (False: shuffled fixed-size batches).
        label_mechanism: ``none``, or randomise the training labels once with ``rr-bins`` (RR-on-Bins) or
            ``laplace`` at ``label_epsilon`` (pure ε-label-DP; train with ``model.private=false`` afterwards, which
            is post-processing).
        label_epsilon: ε of the label randomisation (``rr-bins``, ``laplace``).
        label_seed: seed of the label randomisation.

    Attributes (numpy, standardised): ``X_train``, ``y_train``, ``X_val``, ``y_val``, ``X_test``, ``y_test``;
    ``mean``, ``scale`` (d,), ``feature_names``, ``clipped_labels`` (count), ``sample_rate`` (q).

    Raises:
        DataError: bad user data (file, line and column named). ValueError: an unknown dataset or bad range.
    """

    def __init__(
        self,
        dataset: Annotated[str, OneOf(DATASETS)] = "commuting-sf",
        path: Annotated[str | None, TABLE] = None,
        label: str | None = None,
        features: Annotated[list[str], NonEmpty] | None = None,
        y_min: float | None = None,
        y_max: float | None = None,
        batch_size: PositiveInt = 256,
        split_seed: NonNegativeInt = 0,
        poisson: bool = True,
        label_mechanism: Literal["none", "rr-bins", "laplace"] = "none",
        label_epsilon: Positive = 1.0,
        label_seed: NonNegativeInt = 0,
    ):
        super().__init__()
        if path:
            if not label:
                raise ValueError("data.label: name the label column of data.path")
            if y_min is None or y_max is None:
                raise ValueError("data.y_min/data.y_max: declare the label range of a CSV (its sensitivity)")
            X, y, names = read_table(str(path), label, features)
            self.dataset, extra = "csv", {}
        else:
            X, y, names, extra = load_dataset(dataset)
            self.dataset = dataset
            lo, hi = LABEL_RANGE[dataset.split("-")[0]]
            y_min, y_max = lo if y_min is None else y_min, hi if y_max is None else y_max
        if not y_min < y_max:
            raise ValueError(f"data.y_min ({y_min}) must be below data.y_max ({y_max})")
        self.y_min, self.y_max = float(y_min), float(y_max)
        self.clipped_labels = int(np.sum((y < y_min) | (y > y_max)))
        if self.clipped_labels:
            log.warning("%d labels outside [%g, %g] were clipped", self.clipped_labels, y_min, y_max)
        y = np.clip(y, y_min, y_max)
        train, val, test = seeded_split(len(y), [0.7, 0.15, 0.15], split_seed)
        if len(train) < 2:
            raise DataError(f"{path or dataset}: need at least 3 rows for a 70/15/15 split, got {len(y)}")
        self.mean = X[train].mean(0)
        sd = X[train].std(0)
        self.scale = np.where(sd > 0, sd, 1.0)
        Z = (X - self.mean) / self.scale
        self.X_train, self.X_val, self.X_test = Z[train], Z[val], Z[test]
        self.y_train, self.y_val, self.y_test = y[train], y[val], y[test]
        self.label_mechanism, self.label_epsilon = label_mechanism, float(label_epsilon)
        if label_mechanism != "none":
            from zoo.methods.cond_dp.baselines import LABEL_MECHANISMS

            if label_mechanism not in LABEL_MECHANISMS:
                raise ValueError(f"data.label_mechanism must be none or one of {sorted(LABEL_MECHANISMS)}")
            self.y_train = LABEL_MECHANISMS[label_mechanism](
                self.y_train, self.y_min, self.y_max, self.label_epsilon, np.random.default_rng(label_seed)
            )
        self.splits = {"train": train, "val": val, "test": test}
        self.ids = extra
        self.feature_names = names
        self.batch_size, self.split_seed, self.poisson = int(batch_size), int(split_seed), bool(poisson)
        self.sample_rate = min(1.0, self.batch_size / len(train))

    @property
    def num_features(self) -> int:
        return self.X_train.shape[1]

    @property
    def steps_per_epoch(self) -> int:
        """Poisson batches per epoch (opacus: ``int(1 / q)``)."""
        return max(1, int(1 / self.sample_rate))

    @staticmethod
    def _tensors(X: np.ndarray, y: np.ndarray) -> TensorDataset:
        return TensorDataset(torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32))

    def train_dataloader(self):
        from opacus.data_loader import DPDataLoader

        data = self._tensors(self.X_train, self.y_train)
        if self.poisson:
            return DPDataLoader(data, sample_rate=self.sample_rate)
        return DataLoader(data, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self._tensors(self.X_val, self.y_val), batch_size=4096)

    def test_dataloader(self):
        return DataLoader(self._tensors(self.X_test, self.y_test), batch_size=4096)
