"""User files for DeSI fail naming file, line and column; the shipped datasets load with the documented shapes."""

import numpy as np
import pytest

from zoo.core.data import DataError
from zoo.methods.desi.datamodule import FrechetDataModule, read_user_file


def _csv(tmp_path, header, rows, name="user.csv"):
    p = tmp_path / name
    p.write_text(",".join(header) + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")
    return str(p)


def test_quantile_csv_reads_and_trains_split(tmp_path):
    rng = np.random.default_rng(0)
    rows = [[round(x, 3), round(x * 2, 3)] + list(np.sort(rng.uniform(0, 1, 5)).round(4)) for x in rng.normal(size=12)]
    path = _csv(tmp_path, ["x1", "x2"] + [f"y_{j}" for j in range(5)], rows)
    dm = FrechetDataModule(path=path, space="distribution", test_fraction=0.25)
    dm.setup()
    assert dm.X_train.shape == (9, 2) and dm.Z_test.shape == (3, 5)
    assert dm.feature_names == ["x1", "x2"]


@pytest.mark.parametrize(
    "space,header,bad_row,needle",
    [
        ("distribution", ["x", "y_0", "y_1", "y_2"], [1.0, 0.1, 0.5, 0.3], "column y_2: quantiles decrease"),
        (
            "distribution",
            ["x", "y_0", "y_1", "y_2"],
            [1.0, 0.1, "nan", 0.3],
            "column 'y_1': 'nan' is not a finite number",
        ),
        ("distribution", ["x", "y_0", "y_1", "y_2"], ["abc", 0.1, 0.2, 0.3], "column 'x': 'abc' is not a number"),
        ("composition", ["x", "y_a", "y_b"], [1.0, 0.7, 0.7], "parts sum to 1.4"),
        ("spd", ["x", "y_00", "y_01", "y_10", "y_11"], [1.0, 1.0, 2.0, 2.0, 1.0], "not positive definite"),
        (
            "spd",
            ["x", "y_00", "y_01", "y_10", "y_11"],
            [1.0, 1.0, 0.5, 0.4, 1.0],
            "column y_01: matrix is not symmetric",
        ),
    ],
)
def test_bad_rows_name_file_line_and_column(tmp_path, space, header, bad_row, needle):
    good = {"distribution": [0.0, 0.1, 0.2, 0.3], "composition": [0.0, 0.5, 0.5], "spd": [0.0, 1.0, 0.0, 0.0, 1.0]}[
        space
    ]
    path = _csv(tmp_path, header, [good, good, bad_row, good])
    with pytest.raises(DataError, match=rf"user\.csv:4: .*{needle}"):
        read_user_file(path, space)


def test_density_must_integrate_to_one(tmp_path):
    ages = np.linspace(0, 10, 11)
    ok = np.exp(-0.5 * (ages - 5) ** 2)
    ok = ok / np.trapezoid(ok, ages)
    rows = [[0.0] + list(ok.round(8)), [1.0] + list((2 * ok).round(8)), [2.0] + list(ok.round(8))]
    path = _csv(tmp_path, ["x"] + [f"density_{j}" for j in range(11)], rows)
    with pytest.raises(DataError, match=r"user\.csv:3: columns density_0\.\.density_10: density integrates to 2"):
        read_user_file(path, "distribution", support=(0, 10))


def test_npz_nan_and_missing_arrays(tmp_path):
    p = tmp_path / "u.npz"
    X = np.zeros((4, 2))
    X[2, 1] = np.nan
    np.savez(p, X=X, Y=np.tile([0.2, 0.3, 0.5], (4, 1)))
    with pytest.raises(DataError, match=r"u\.npz:4: column X\[:, 1\]: not a finite number"):
        read_user_file(str(p), "composition")
    np.savez(p, A=X)
    with pytest.raises(DataError, match="needs arrays X and Y"):
        read_user_file(str(p), "composition")


def test_shipped_hmd2013_fold_and_compositions():
    dm = FrechetDataModule("hmd2013", fold=0)
    dm.setup()
    assert dm.X_train.shape == (29, 5) and dm.Z_test.shape == (10, 101)
    assert (np.diff(dm.Z_train, axis=1) >= 0).all()
    dm = FrechetDataModule("election", holdout=3)
    dm.setup()
    assert dm.X_train.shape == (15, 2) and np.allclose(dm.Z_test.sum(1), 0)
