"""The desi LightningModule end to end on generated data: train, artifacts, reload from the checkpoint, predict."""

import json
from pathlib import Path

import numpy as np

from zoo.cli import main
from zoo.core.loading import load_module


def test_train_reload_and_predict(tmp_path):
    assert (
        main(
            [
                "train",
                "recipe=desi-sim.yaml",
                "overlay=tiny/desi-sim.yaml",
                f"out_dir={tmp_path}",
                "export.formats=[]",
                "data.space=composition",
            ]
        )
        == 0
    )
    run = next(Path(tmp_path).glob("*/version_0"))
    index = json.loads((run / "desi" / "index.json").read_text())
    assert len(index["direction"]) == 10 and "angle_to_planted_deg" in index
    assert {"index_weights.png", "along_index.png", "heldout.png"} <= {p.name for p in (run / "desi").iterdir()}
    module, _ = load_module(str(run), "last")
    rows = tmp_path / "rows.csv"
    rows.write_text(",".join(f"x{j}" for j in range(10)) + "\n" + ",".join(["0.5"] * 10) + "\n")
    text = module.predict_cli([str(rows)], str(tmp_path / "pred"))
    pred = module.predict_objects(np.full((1, 10), 0.5))
    assert pred.shape == (1, 4) and np.isclose(pred.sum(), 1) and (pred > 0).all()
    assert "## " in text and (tmp_path / "pred" / "rows.predicted.tsv").is_file()
    here = set(Path.cwd().iterdir())
    assert module.predict_cli([str(rows)]) == text  # the same rows printed (a composition has no density plot)
    assert set(Path.cwd().iterdir()) == here, "predict without --out-dir wrote into the current directory"
