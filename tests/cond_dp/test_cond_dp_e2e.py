"""train.py on the real SF flows (tiny overlay), the privacy record in the checkpoint, and `zoo predict`."""

import json

import pytest

from zoo.cli import main


@pytest.fixture(scope="module")
def sf_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    assert (
        main(["train", "recipe=cond-dp.yaml", "overlay=tiny/cond-dp.yaml", f"out_dir={out}", "export.formats=[]"]) == 0
    )
    return out / "cond-dp-tiny" / "version_0"


def test_train_prints_test_mse_and_epsilon(sf_run, capsys):
    metrics = json.loads((sf_run / "metrics.json").read_text())["metrics"]
    assert metrics["test/mse"] > 0
    assert 0.9 < metrics["privacy/epsilon_spent"] <= 1.0  # calibrated for the 2 planned steps


def test_predict_pair_and_errors(sf_run, capsys):
    assert main(["predict", str(sf_run), "origin=06075010100", "destination=06075010200"]) == 0
    out = capsys.readouterr().out
    assert "06075010100 -> 06075010200: predicted" in out and "observed" in out and "ε = " in out
    assert main(["predict", str(sf_run), "06075010100", "99999999999"]) == 2
    assert "not a tract" in capsys.readouterr().err


def test_commuting_model_keeps_no_feature_names(sf_run):
    from zoo.core.loading import load_module

    assert load_module(str(sf_run), "last")[0].hparams.feature_names is None  # it predicts tract pairs


@pytest.fixture(scope="module")
def csv_run(tmp_path_factory):
    """A run on the user's CSV (README: `data.path=mine.csv data.label=y data.y_min=.. data.y_max=..`)."""
    import numpy as np

    folder = tmp_path_factory.mktemp("user")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = np.clip(2 + X[:, 0] - 0.5 * X[:, 2] + 0.1 * rng.normal(size=300), 0, 4)
    (folder / "mine.csv").write_text(
        "a,b,c,y\n" + "\n".join(",".join(f"{v:.4f}" for v in (*x, t)) for x, t in zip(X, y)) + "\n"
    )
    assert (
        main(
            [
                "train",
                "recipe=cond-dp.yaml",
                "overlay=tiny/cond-dp.yaml",
                f"out_dir={folder / 'runs'}",
                f"data.path={folder / 'mine.csv'}",
                "data.label=y",
                "data.y_min=0",
                "data.y_max=4",
                "export.formats=[]",
            ]
        )
        == 0
    )
    return folder / "runs" / "cond-dp-mine-tiny" / "version_0"


def test_predict_rows_of_a_csv_model(csv_run, tmp_path, capsys):
    """A model trained on a CSV predicts a CSV of feature rows (columns by name, any order, extras ignored); it was
    refused before ("this model was trained on 'csv'; predict needs a commuting-od model")."""
    import torch

    from zoo.core.loading import load_module

    rows = tmp_path / "rows.csv"
    rows.write_text("c,note,a,b\n0.5,x,1.0,-2.0\n-1.0,y,0.0,3.0\n")
    capsys.readouterr()
    assert main(["predict", str(csv_run), str(rows)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [f"## {rows}", "row\tprediction"] and out[-1].startswith("model: reparam / mlp")
    module = load_module(str(csv_run))[0]
    assert module.hparams.feature_names == ["a", "b", "c"]
    x = (torch.tensor([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]]) - module.x_mean.float()) / module.x_scale.float()
    with torch.no_grad():
        expected = module(x).tolist()
    assert [float(line.split("\t")[1]) for line in out[2:4]] == pytest.approx(expected, abs=1e-4)
    rows.write_text("a,c\n1,2\n")
    assert main(["predict", str(csv_run), str(rows)]) == 2
    assert "'b'" in capsys.readouterr().err  # the missing feature column is named


def test_model_without_feature_names_says_what_to_do():
    from zoo.methods.cond_dp.module import CondDPModule

    module = CondDPModule(model="linear", in_features=3, dataset="csv")
    with pytest.raises(ValueError, match="retrain it"):
        module.predict_cli(["rows.csv"])
