"""The tiny overlay end to end (train -> alignment.json, PNGs, checkpoint -> zoo predict), and the data checks."""

import json
from pathlib import Path

import pytest

from zoo.cli import main
from zoo.core.data import DataError
from zoo.methods.pooled_reps.datamodule import PromptReferenceDataModule


def test_tiny_overlay_end_to_end_and_predict(tmp_path, capsys):
    assert main(["train", "recipe=pooled-reps.yaml", "overlay=tiny/pooled-reps.yaml", f"out_dir={tmp_path}"]) == 0
    run = tmp_path / "pooled-reps-tiny" / "version_0"
    doc = json.loads((run / "pooled-reps" / "alignment.json").read_text())
    assert set(doc["domains"]) == {"alpaca-heldout", "hh-eval"}
    for domain, res in doc["domains"].items():
        readouts = {r["readout"] for r in res["rows"]}
        assert {
            "last",
            "mean",
            "prompt",
            "seg1",
            "seg2",
            "seg3",
            "mix_best",
            "best_single",
            "layer_avg",
            "token_shuffle",
            "shuffled_pairing",
            "mean@L0",
            "mean@L1",
        } <= readouts
        assert all(-1.01 <= r["cka"] <= 1.01 and 0 <= r["mknn"] <= 1 for r in res["rows"])
        for d in res["delta"]:
            assert d["delta_cka_lo"] <= d["delta_cka_hi"] and d["delta_mknn_lo"] <= d["delta_mknn_hi"]
        for png in ("curve", "simplex", "layers"):
            assert (run / "pooled-reps" / f"{domain}-{png}.png").stat().st_size > 1000
    capsys.readouterr()
    assert main(["predict", str(run), "How do I bake bread?", "--out-dir", str(tmp_path / "pred")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("reply (") and "nearest held-out references" in out
    assert len([line for line in out.splitlines() if line.startswith("  ")]) == 5
    assert (tmp_path / "pred" / "pooled-reps-predict.safetensors").is_file()
    here = set(Path.cwd().iterdir())
    assert main(["predict", str(run), "How do I bake bread?"]) == 0
    assert "pooled vectors" not in capsys.readouterr().out and set(Path.cwd().iterdir()) == here


def test_held_out_domains_have_the_documented_sizes():
    dm = PromptReferenceDataModule(sources=["alpaca-heldout", "hh-eval", "alpaca-seen"])
    dm.setup()
    counts = {d: sum(it["domain"] == d for it in dm.items) for d in ("alpaca-heldout", "hh-eval", "alpaca-seen")}
    assert counts["alpaca-heldout"] == 483 and counts["alpaca-seen"] == 1000
    assert counts["hh-eval"] == 300  # preference_eval has 301 pairs, one with an empty chosen reply


@pytest.mark.parametrize(
    "line, key",
    [
        ('{"prompt": "hi"}', "reference"),
        ('{"prompt": 3, "reference": "x"}', "prompt"),
        ('{"prompt": "hi", "reference": "  "}', "reference"),
    ],
)
def test_user_rows_fail_naming_file_line_and_key(tmp_path, line, key):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"prompt": "ok", "reference": "fine"}\n' + line + "\n")
    with pytest.raises(DataError, match=rf"mine.jsonl:2: .*{key}"):
        PromptReferenceDataModule(path=str(path))


def test_bad_user_file_fails_before_a_run_directory(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "", "reference": "x"}\n')
    assert (
        main(
            [
                "train",
                "recipe=pooled-reps.yaml",
                "overlay=tiny/pooled-reps.yaml",
                f"out_dir={tmp_path}/runs",
                f"data.path={path}",
            ]
        )
        == 2
    )
    assert not Path(tmp_path / "runs").exists() or not any(Path(tmp_path / "runs").rglob("version_*"))
