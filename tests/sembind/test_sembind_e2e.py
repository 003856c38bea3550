"""The masker recipe end to end with its tiny overlay (fresh tiny networks): evaluation rows, PNGs, and
``zoo predict`` on the finished run (a caption writes PNGs; an image prints scores; a non-image fails, writing
nothing), and ``zoo eval`` re-measuring the fit's ``eval/*`` metrics from the stored masker."""

import json
from pathlib import Path

from zoo.cli import main


def test_masker_recipe_runs_and_predicts(tmp_path, capsys):
    assert (
        main(
            [
                "train",
                "recipe=sembind.yaml",
                "overlay=tiny/sembind.yaml",
                f"out_dir={tmp_path}",
                "export.formats=[]",
                "model.evaluation.predict_r=1.0",
            ]
        )
        == 0
    )
    run = next(Path(tmp_path).glob("sembind-tiny/version_0"))
    ev = json.loads((run / "sembind" / "evaluation.json").read_text())
    kinds = {(r["scheme"], r["defense"], r["attack"]) for r in ev["rows"]}
    assert ("tree-ring", "sembind", "imprint") in kinds and ("gaussian-shading", "plain", "reprompt") in kinds
    assert all(0.0 <= r["tpr"] <= 1.0 and 0.0 <= r["far"] <= 1.0 for r in ev["rows"])
    # FPR on the 4 scored clean + 4 held-out unmarked images, at a threshold set on 4 other ones (steps of 1/8)
    assert all(r["far"] == r["fpr"] and (8 * r["fpr"]).is_integer() for r in ev["rows"] if r["attack"] == "none")
    assert sorted(p.name for p in (run / "sembind").glob("*.png")) == [
        "grid.png",
        "histograms.png",
        "r_curve.png",
        "spectra.png",
    ]
    out = tmp_path / "pred"
    main(["predict", str(run), "a photo of a red truck", "--out-dir", str(out)])
    pngs = sorted(out.glob("*.png"))
    assert [p.name for p in pngs] == [
        "sembind-a-photo-of-a-red-truck-gaussian-shading.png",
        "sembind-a-photo-of-a-red-truck-tree-ring.png",
    ]
    capsys.readouterr()
    main(["predict", str(run), str(pngs[0])])
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and all("threshold" in line and "watermarked" in line for line in lines)
    bad = tmp_path / "notes.png"
    bad.write_text("not an image")
    assert main(["predict", str(run), "a red truck", str(bad), "--out-dir", str(tmp_path / "none")]) == 2
    assert "notes.png: not a readable image" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()

    fit = json.loads((run / "metrics.json").read_text())["metrics"]
    logged = {k: v for k, v in fit.items() if k.startswith("eval/")}
    assert len(logged) == 2 * len([r for r in ev["rows"] if r["seed"] == ev["seeds"][0]])
    capsys.readouterr()
    assert main(["eval", str(run)]) == 0
    measured = json.loads(capsys.readouterr().out)["metrics"]
    assert measured == logged
