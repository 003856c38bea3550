"""train.py on the simulation recipe (tiny), the files it writes, reloading the run and `zoo predict` for a patient."""

import csv
import json

import numpy as np
import pytest

from zoo.cli import main
from zoo.core.loading import load_module


def test_simulation_recipe_writes_curves_and_predicts(tmp_path, capsys):
    assert (
        main(
            [
                "train",
                "recipe=survshap-iq-simulation.yaml",
                "overlay=tiny/survshap-iq-simulation.yaml",
                f"out_dir={tmp_path}",
                "export.formats=[]",
            ]
        )
        == 0
    )
    run = tmp_path / "survshap-iq-simulation-tiny" / "version_0"
    out = run / "survshap_iq"
    rows = list(csv.DictReader((out / "curves.csv").read_text().splitlines()))
    assert {r["scale"] for r in rows} == {"survival", "log_hazard"}
    pairs = {r["interaction"] for r in rows if r["order"] == "2"}
    assert pairs == {"x1 * x2", "x1 * x3", "x2 * x3"}
    assert (out / "patient0_survival.png").stat().st_size > 1000 and (out / "partition.png").is_file()
    metrics = json.loads((out / "test_metrics.json").read_text())
    assert metrics["source"].startswith("GENERATED") and metrics["c_index"] > 0.6
    # a proportional-hazards fit: its log-hazard has no interaction and nothing time-dependent
    part = {r["component"]: r["class"] for r in json.loads((out / "partition.json").read_text())}
    assert "td" not in part.values() and part["x1 * x3"] == "absent"

    module, _ = load_module(str(run), which="last")
    X = np.array([[0.5, -1.0, 1.0], [0.0, 0.0, 0.0]])
    assert np.allclose(module.predict_survival(X, [10.0, 30.0]).shape, (2, 2))
    assert main(["predict", str(run), "x1=1.5", "x3=-0.5", "--out-dir", str(tmp_path / "pred")]) == 0
    text = capsys.readouterr().out
    assert "largest k-SII" in text and (tmp_path / "pred" / "patient_survival.png").is_file()
    assert main(["predict", str(run), "age=3"]) == 2  # unknown feature: a user error, not a traceback


def test_bad_explain_key_fails_before_training(tmp_path):
    with pytest.raises(ValueError, match="model.explain: unknown key"):
        from zoo.methods.survshap_iq.module import SurvShapIQModule

        SurvShapIQModule(explain={"n_point": 3})


def test_bad_user_csv_fails_before_a_run_directory(tmp_path, capsys):
    bad = tmp_path / "patients.csv"
    bad.write_text("time,event,age\n12,1,60\n-3,0,55\n")
    out = tmp_path / "runs"
    assert (
        main(
            ["train", "recipe=survshap-iq.yaml", "overlay=tiny/survshap-iq.yaml", f"data.path={bad}", f"out_dir={out}"]
        )
        == 2
    )
    assert "patients.csv:3: column 'time'" in capsys.readouterr().err
    assert not out.exists() or not any(out.rglob("config.yaml"))
