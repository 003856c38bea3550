"""The OD pair table and a user's CSV: schema, errors naming file/line/column, label clipping."""

import numpy as np
import pytest

from zoo.core.data import DataError
from zoo.data.od_pairs import od_pairs
from zoo.methods.cond_dp.datamodule import LabelDPDataModule


def test_sf_pair_table():
    p = od_pairs("sf")
    assert p.X.shape == (25_724, 271) and np.isfinite(p.X).all()  # non-zero pairs only
    assert p.feature_names[-1] == "log_distance_m" and p.feature_names[0].startswith("o_")
    np.testing.assert_allclose(p.y, np.log1p(p.commuters))
    assert p.commuters.min() >= 1


def _csv(tmp_path, text):
    path = tmp_path / "mine.csv"
    path.write_text(text)
    return str(path)


def test_user_csv_errors_name_file_line_column(tmp_path):
    path = _csv(tmp_path, "a,b,y\n1,2,3\n4,,5\n")
    with pytest.raises(DataError, match=r"mine.csv:3: column 'b': empty cell"):
        LabelDPDataModule(path=path, label="y", y_min=0, y_max=10)
    path = _csv(tmp_path, "a,b,y\n1,2,3\n4,x,5\n")
    with pytest.raises(DataError, match=r"mine.csv:3: column 'b': 'x' is not a number"):
        LabelDPDataModule(path=path, label="y", y_min=0, y_max=10)
    with pytest.raises(DataError, match=r"missing column"):
        LabelDPDataModule(path=path, label="target", y_min=0, y_max=10)
    with pytest.raises(ValueError, match="y_min"):
        LabelDPDataModule(path=path, label="y")


def test_user_csv_labels_clipped_and_counted(tmp_path):
    rows = "\n".join(f"{i},{i % 3},{v}" for i, v in enumerate([-1, 2, 3, 4, 5, 6, 7, 8, 20, 5]))
    dm = LabelDPDataModule(path=_csv(tmp_path, "a,b,y\n" + rows + "\n"), label="y", y_min=0, y_max=10)
    assert dm.clipped_labels == 2
    assert min(dm.y_train.min(), dm.y_val.min(), dm.y_test.min()) >= 0
    assert max(dm.y_train.max(), dm.y_val.max(), dm.y_test.max()) <= 10
    assert dm.num_features == 2 and abs(dm.X_train.mean(0)).max() < 1e-9
