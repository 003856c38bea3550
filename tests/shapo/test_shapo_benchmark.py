"""benchmarks/shapo.py runs at HEAD: one timed repeat of our DPO / ShaPO step against TRL's DPOTrainer on a tiny model,
full fine-tuning and LoRA (TRL's reference then the adapter-disabled policy, as ours), both levels, into a scratch
results folder."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from zoo.core.data import repo_root

pytest.importorskip("trl")


def _benchmark():
    spec = importlib.util.spec_from_file_location("shapo_benchmark", repo_root() / "benchmarks" / "shapo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # ~30 s of CPU: TRL's DPOTrainer is built three times
@pytest.mark.parametrize("lora_r", [0, 2])
def test_step_benchmark_runs_one_repeat_on_a_tiny_model(lora_r, tmp_path, capsys):
    _benchmark().main(
        [
            "--arch",
            "zoo-lm-tiny",
            "--batch",
            "2",
            "--reps",
            "1",
            "--warmup",
            "1",
            "--max-length",
            "48",
            "--lora-r",
            str(lora_r),
            "--results-dir",
            str(tmp_path),
        ]
    )
    name = "step-time-zoo-lm-tiny" + (f"-lora{lora_r}" if lora_r else "")
    doc = json.loads((tmp_path / "shapo" / f"{name}.json").read_text())
    assert doc["kind"] == "benchmark" and [r["level"] for r in doc["rows"]] == ["bare", "framework"]
    for row in doc["rows"]:
        assert all(row[k] > 0 for k in ("ours DPO ms", "ours ShaPO ms", "TRL DPOTrainer ms"))
        assert row["ours DPO / TRL"] == pytest.approx(row["ours DPO ms"] / row["TRL DPOTrainer ms"])
    # both sides train on the same tokens: the counts printed for ours and TRL agree
    counts = re.search(r"ours (\d+) \((\d+), (\d+)\), TRL (\d+) \((\d+), (\d+)\)", capsys.readouterr().out)
    ours, ours_scored, ours_padded, trl, trl_scored, trl_padded = map(int, counts.groups())
    assert (ours, ours_scored) == (trl, trl_scored)
    # padding only adds positions: each side computes at least the real tokens
    assert ours_padded >= ours and trl_padded >= trl
