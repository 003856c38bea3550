"""End to end on the tiny overlay: train.py builds the data, pretrains 2 steps, runs the pipeline, writes the table
and pictures; `zoo predict` on the run reads S, Y and the means back from the checkpoint and writes a PNG."""

import json

import numpy as np
import pytest

pytest.importorskip("open_clip")

from zoo.cli import main


def test_tiny_train_then_predict(tmp_path, capsys):
    from PIL import Image

    assert main(["train", "recipe=ltc.yaml", "overlay=tiny/ltc.yaml", f"out_dir={tmp_path}", "export.formats=[]"]) == 0
    out = capsys.readouterr().out
    assert "| zero-shot |" in out and "| ltc |" in out
    run = next(tmp_path.glob("ltc-tiny/version_0"))
    rows = json.loads((run / "ltc" / "rows.json").read_text())
    methods = [r["method"] for r in rows]
    for m in (
        "zero-shot",
        "roboshot",
        "ortho-cali",
        "textspan",
        "random-heads",
        "ltc",
        "ltc-ablate",
        "ltc-inject",
        "probe-erm",
        "probe-balanced",
        "located",
    ):
        assert m in methods
    for r in rows:
        if "wg" in r:
            assert 0 <= r["wg"] <= r["avg"] <= 100 and r["gap"] == pytest.approx(r["avg"] - r["wg"])
    for png in ("groups.png", "head_map.png", "top_images.png"):
        assert (run / "ltc" / png).stat().st_size > 1000
    img = tmp_path / "car.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (40, 40, 3), dtype=np.uint8)).save(img)
    assert main(["predict", str(run), str(img), "--out-dir", str(tmp_path / "pred")]) == 0
    printed = capsys.readouterr().out
    line = next(ln for ln in printed.splitlines() if ln.startswith("car.png")).split("\t")
    assert 0.0 <= float(line[1]) <= 1.0 and 0.0 <= float(line[2]) <= 1.0
    assert (tmp_path / "pred" / "ltc_car.png").is_file()
