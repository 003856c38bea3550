import numpy as np
import pytest

from zoo.core.data import DataError
from zoo.methods.praxis.binarize import feature_names, fit_spec, guess_thresholds, transform
from zoo.methods.praxis.datamodule import BinaryCSVDataModule


def write(tmp_path, text, name="d.csv"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_binary_csv_loads_and_maps_labels(tmp_path):
    path = write(tmp_path, "a,b,label\n1,0,yes\n0,1,no\n1,1,yes\n")
    dm = BinaryCSVDataModule(path, "label")
    dm.setup()
    assert dm.X_train.tolist() == [[1, 0], [0, 1], [1, 1]]
    assert dm.classes == ["no", "yes"] and dm.y_train.tolist() == [1, 0, 1]
    assert dm.feature_names == ["a", "b"]
    batch = next(iter(dm.train_dataloader()))
    assert batch[0].shape == (3, 2)  # the whole split is one batch


def test_non_binary_value_names_file_line_and_column(tmp_path):
    path = write(tmp_path, "a,b,label\n1,0,1\n0,7,0\n")
    with pytest.raises(DataError, match=r"d\.csv:3: column 'b' holds '7', not 0/1; set data.binarize=true"):
        BinaryCSVDataModule(path, "label").setup()


def test_missing_value_is_an_error_even_when_binarising(tmp_path):
    path = write(tmp_path, "a,b,label\n1,0.5,1\n0,,0\n")
    with pytest.raises(DataError, match=r"d\.csv:3: column 'b' is missing a value"):
        BinaryCSVDataModule(path, "label", binarize=True).setup()


def test_missing_label_column(tmp_path):
    path = write(tmp_path, "a,b\n1,0\n")
    with pytest.raises(DataError, match="missing column"):
        BinaryCSVDataModule(path, "label").setup()


def test_threshold_guessing_finds_the_informative_cut():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 10, size=300)
    noise = rng.uniform(0, 10, size=300)
    y = (x > 6.0).astype(int)
    ts = guess_thresholds(np.stack([x, noise], 1), y, n_estimators=5, max_depth=1)
    assert any(abs(t - 6.0) < 0.2 for t in ts[0])


def test_fit_spec_mixed_columns_and_transform():
    cols = {
        "age": ["20", "30", "40", "50", "60", "70"],
        "colour": ["r", "g", "r", "b", "g", "r"],
        "flag": ["0", "1", "0", "1", "0", "1"],
    }
    y = np.array([0, 0, 0, 1, 1, 1])
    spec = fit_spec(cols, y, "mem.csv", n_estimators=3, max_depth=1)
    names = feature_names(spec)
    assert "flag" in names and "colour=r" in names and any(n.startswith("age<=") for n in names)
    X = transform(spec, cols, "mem.csv")
    assert X.shape == (6, len(spec)) and set(np.unique(X)) <= {0, 1}
    j = names.index("colour=g")
    assert X[:, j].tolist() == [0, 1, 0, 0, 1, 0]
    with pytest.raises(DataError, match="missing column"):
        transform(spec, {"age": cols["age"]}, "new.csv")


def test_numeric_csv_binarised_on_request(tmp_path):
    rows = "\n".join(f"{a},{int(a > 40)},{int(a > 45)}" for a in range(20, 70))
    path = write(tmp_path, "age,priors,label\n" + rows + "\n")
    with pytest.raises(DataError, match="binarize=true"):
        BinaryCSVDataModule(path, "label").setup()
    dm = BinaryCSVDataModule(path, "label", binarize=True, n_estimators=5, max_depth=1)
    dm.setup()
    assert dm.X_train.shape[0] == 50 and any(n.startswith("age<=") for n in dm.feature_names)
