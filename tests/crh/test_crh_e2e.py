"""End to end: the recipe with its tiny overlay through train.py, then ``zoo predict`` on the run."""

import json
from pathlib import Path

from zoo.cli import main


def test_crh_recipe_tiny_end_to_end_and_predict(tmp_path, capsys):
    assert main(["train", "recipe=crh.yaml", "overlay=recipes/tiny/crh.yaml", f"out_dir={tmp_path}"]) == 0
    run = next((tmp_path / "crh-tiny").glob("version_*"))
    outputs = json.loads((run / "crh" / "outputs.json").read_text())
    assert {o["run"] for o in outputs} == {"diffmean", "lambda=0"}
    assert len(outputs) == 3 * 2 * 2 * 3  # concepts x test questions x runs x steps
    assert all(o["label"] in (1, 2, 3) for o in outputs)
    assert (run / "crh" / "cylinder.png").stat().st_size > 0
    capsys.readouterr()
    assert main(["predict", str(run), "5", "How do I bake bread?"]) == 0
    text = capsys.readouterr().out
    assert "theta =" in text and text.count("L = ") == 5
    assert Path(run / "checkpoints" / "last.ckpt").is_file()


def test_crh_smollm2_tiny_instructed_pairs_lm_judge_and_predict(tmp_path, capsys):
    assert (
        main(
            [
                "train",
                "recipe=crh-smollm2.yaml",
                "overlay=recipes/tiny/crh-smollm2.yaml",
                f"out_dir={tmp_path}",
                "export.formats=[]",
            ]
        )
        == 0
    )
    run = next((tmp_path / "crh-smollm2-tiny").glob("version_*"))
    outputs = json.loads((run / "crh" / "outputs.json").read_text())
    assert len(outputs) == 3 * 2 * 3  # concepts x test questions x lengths (v(L, 0) only)
    assert all((o["judge_score"] is None) == (o["label"] == 3) for o in outputs)  # the LM judge scores non-gibberish
    capsys.readouterr()
    assert main(["predict", str(run), "5", "How do I bake bread?"]) == 0
    text = capsys.readouterr().out
    assert "theta =" in text and text.count("L = ") == 5
