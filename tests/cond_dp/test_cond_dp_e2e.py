"""train.py on the real SF flows (tiny overlay), the privacy record in the checkpoint, and `zoo predict`."""
import json

import pytest

from zoo.cli import main


@pytest.fixture(scope="module")
def sf_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    assert main(["train", "recipe=cond-dp.yaml", "overlay=tiny/cond-dp.yaml", f"out_dir={out}",
                 "export.formats=[]"]) == 0
    return out / "cond-dp" / "version_0"


def test_train_prints_test_mse_and_epsilon(sf_run, capsys):
    metrics = json.loads((sf_run / "metrics.json").read_text())["metrics"]
    assert metrics["test/mse"] > 0
    assert 0.9 < metrics["privacy/epsilon_spent"] <= 1.0          # calibrated for the 2 planned steps


def test_predict_pair_and_errors(sf_run, capsys):
    assert main(["predict", str(sf_run), "origin=06075010100",
                 "destination=06075010200"]) == 0
    out = capsys.readouterr().out
    assert "06075010100 -> 06075010200: predicted" in out and "observed" in out and "ε = " in out
    assert main(["predict", str(sf_run), "06075010100", "99999999999"]) == 2
    assert "not a tract" in capsys.readouterr().err
