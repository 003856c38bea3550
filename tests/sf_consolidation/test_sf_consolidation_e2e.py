"""End to end: train.py with the tiny overlay writes the curve and PNGs; zoo predict acts from each beaker."""

import json

import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("minigrid")


def test_train_tiny_writes_curve_pngs_and_predicts(tmp_path, capsys):
    from zoo.cli import main

    assert (
        main(
            [
                "train",
                "recipe=sf-consolidation.yaml",
                "overlay=recipes/tiny/sf-consolidation.yaml",
                f"out_dir={tmp_path}",
            ]
        )
        == 0
    )
    run = next((tmp_path / "sf-consolidation-tiny").iterdir())
    curve = json.loads((run / "curve.json").read_text())
    assert curve["history"] and 0.0 <= curve["auc_return"] <= 1.0
    assert len(curve["history"][-1]["beaker_distances"]) == 4
    for png in ("return_vs_step.png", "beaker_distances.png", "value_maps.png"):
        assert (run / png).stat().st_size > 1000
    capsys.readouterr()
    assert main(["predict", str(run), "--which", "last", "--slip", "0.3", "--episodes", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("fourrooms slip=0.3") and len(out) == 2 + 5  # header + one row per beaker
