"""From CSV columns to 0/1 features: checks for binary data and threshold guessing for numeric data.

Threshold guessing (McTavish et al., AAAI 2022, used by PRAXIS §5 for every data set): fit a small gradient-boosted
ensemble of depth-limited trees and keep, for each numeric column, the thresholds its trees split on; each becomes a
feature ``column<=threshold``. Categorical (non-numeric) columns become one-hot features ``column=value``; columns
that already hold only 0/1 are kept. The fitted *spec* is a list of plain dicts, so it is saved with the model and
applied again at prediction time.
"""

from __future__ import annotations

import numpy as np

from zoo.core.data import DataError

MISSING = {"", "na", "nan", "null", "none", "?"}


def _is_binary(values: list[str]) -> bool:
    return all(v.strip() in ("0", "1", "0.0", "1.0") for v in values)


def _as_float(values: list[str]) -> np.ndarray | None:
    try:
        return np.array([float(v) for v in values])
    except ValueError:
        return None


def check_missing(columns: dict[str, list[str]], where: str, first_line: int = 2) -> None:
    """Raise on the first missing value.

    Raises:
        DataError: ``where:line: column 'c' is missing a value ...``.
    """
    for name, values in columns.items():
        for i, v in enumerate(values):
            if v.strip().lower() in MISSING:
                raise DataError(
                    f"{where}:{first_line + i}: column {name!r} is missing a value ({v!r}); "
                    f"PRAXIS needs complete rows: drop or impute them first"
                )


def binary_spec(columns: dict[str, list[str]], where: str, first_line: int = 2) -> list[dict]:
    """Spec keeping every column as is, after checking each holds only 0/1.

    Raises:
        DataError: the first non-binary value, naming file, line and column, and how to binarise instead.
    """
    check_missing(columns, where, first_line)
    for name, values in columns.items():
        for i, v in enumerate(values):
            if v.strip() not in ("0", "1", "0.0", "1.0"):
                raise DataError(
                    f"{where}:{first_line + i}: column {name!r} holds {v!r}, not 0/1; set "
                    f"data.binarize=true to threshold-guess numeric and one-hot categorical columns"
                )
    return [{"kind": "keep", "column": name} for name in columns]


def guess_thresholds(
    X: np.ndarray, y: np.ndarray, n_estimators: int = 40, max_depth: int = 2, learning_rate: float = 0.1, seed: int = 0
) -> list[list[float]]:
    """Thresholds a gradient-boosted ensemble splits on, per column of ``X`` (McTavish et al. 2022).

    Args:
        X: ``(n, k)`` float. y: ``(n,)`` integer labels.

    Returns:
        For each column, its sorted distinct thresholds (``x <= t`` goes left, as in scikit-learn).
    """
    from sklearn.ensemble import GradientBoostingClassifier

    if len(np.unique(y)) < 2:
        return [[] for _ in range(X.shape[1])]
    gbdt = GradientBoostingClassifier(
        n_estimators=n_estimators, max_depth=max_depth, learning_rate=learning_rate, random_state=seed
    ).fit(X, y)
    found: list[set] = [set() for _ in range(X.shape[1])]
    for est in gbdt.estimators_.ravel():
        tree = est.tree_
        for f, t in zip(tree.feature, tree.threshold):
            if f >= 0:
                found[f].add(float(t))
    return [sorted(s) for s in found]


def fit_spec(
    columns: dict[str, list[str]],
    y: np.ndarray,
    where: str,
    n_estimators: int = 40,
    max_depth: int = 2,
    learning_rate: float = 0.1,
    seed: int = 0,
    first_line: int = 2,
) -> list[dict]:
    """Binarisation spec for mixed columns: keep 0/1, threshold-guess numeric, one-hot categorical.

    Raises:
        DataError: a missing value, or no feature at all after binarisation.
    """
    check_missing(columns, where, first_line)
    spec: list[dict] = []
    numeric: dict[str, np.ndarray] = {}
    for name, values in columns.items():
        if _is_binary(values):
            spec.append({"kind": "keep", "column": name})
            continue
        as_float = _as_float(values)
        if as_float is None:
            for v in sorted({x.strip() for x in values}):
                spec.append({"kind": "onehot", "column": name, "value": v})
        else:
            numeric[name] = as_float
    if numeric:
        names = list(numeric)
        thresholds = guess_thresholds(
            np.stack([numeric[c] for c in names], axis=1), y, n_estimators, max_depth, learning_rate, seed
        )
        for name, ts in zip(names, thresholds):
            spec.extend({"kind": "threshold", "column": name, "threshold": t} for t in ts)
    if not spec:
        raise DataError(f"{where}: no usable feature after binarisation")
    return spec


def feature_names(spec: list[dict]) -> list[str]:
    """Human-readable name of each feature of ``spec``."""
    out = []
    for s in spec:
        if s["kind"] == "keep":
            out.append(s["column"])
        elif s["kind"] == "onehot":
            out.append(f"{s['column']}={s['value']}")
        else:
            out.append(f"{s['column']}<={s['threshold']:.6g}")
    return out


def transform(spec: list[dict], columns: dict[str, list[str]], where: str, first_line: int = 2) -> np.ndarray:
    """Apply ``spec`` to raw columns: ``(n, len(spec))`` uint8.

    Raises:
        DataError: a column the spec needs is absent, a value is missing, or a kept/threshold value is malformed.
    """
    needed = sorted({s["column"] for s in spec})
    absent = [c for c in needed if c not in columns]
    if absent:
        raise DataError(f"{where}:1: missing column(s) {absent}; the model was fitted on {needed}")
    check_missing({c: columns[c] for c in needed}, where, first_line)
    n = len(columns[needed[0]]) if needed else 0
    out = np.zeros((n, len(spec)), dtype=np.uint8)
    for j, s in enumerate(spec):
        values = columns[s["column"]]
        if s["kind"] == "onehot":
            out[:, j] = [v.strip() == s["value"] for v in values]
            continue
        for i, v in enumerate(values):
            try:
                x = float(v)
            except ValueError:
                raise DataError(
                    f"{where}:{first_line + i}: column {s['column']!r} holds {v!r}, expected a number"
                ) from None
            if s["kind"] == "keep":
                if x not in (0.0, 1.0):
                    raise DataError(f"{where}:{first_line + i}: column {s['column']!r} holds {v!r}, not 0/1")
                out[i, j] = int(x)
            else:
                out[i, j] = x <= s["threshold"]
    return out
