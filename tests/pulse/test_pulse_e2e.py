"""End to end: the replay recipe writes trends, alarms and PNGs; the SAE recipe trains, names and predicts."""

import json
from pathlib import Path

import pytest

from zoo.cli import main


def test_replay_recipe_writes_trends_alarms_and_plots(tmp_path):
    assert main(["train", "recipe=pulse.yaml", "overlay=tiny/pulse.yaml", f"out_dir={tmp_path}"]) == 0
    out = next(Path(tmp_path).glob("pulse-tiny/version_*/pulse"))
    trends = {r["feature"]: r for r in json.loads((out / "trends.json").read_text())}
    assert trends[9]["changepoints"][0] == "2024-05-13"
    alarms = json.loads((out / "alarms.json").read_text())
    feature = [a for a in alarms if a["test"] == "feature"]
    assert feature[0]["alarm_date"] == "2024-10-19"  # r = 28, one monitored feature
    assert (out / "trends.png").stat().st_size > 10_000 and (out / "wealth.png").stat().st_size > 10_000


def test_sae_recipe_trains_and_predicts(tmp_path, capsys):
    pytest.importorskip("sentence_transformers")
    assert (
        main(
            [
                "train",
                "recipe=pulse-sae.yaml",
                "overlay=tiny/pulse-sae.yaml",
                f"out_dir={tmp_path}",
                f"data.embedding_cache={tmp_path}/cache",
            ]
        )
        == 0
    )
    run = next(Path(tmp_path).glob("pulse-sae-tiny/version_*"))
    names = json.loads((run / "pulse" / "feature_names.json").read_text())
    assert len(names) == 16 and any(n["keywords"] for n in names)
    capsys.readouterr()
    assert main(["predict", str(run), "I talk to ChatGPT every night", "it feels like a friend who listens"]) == 0
    text = capsys.readouterr().out
    assert "top-4 SAE features" in text and text.count("feature ") >= 1
