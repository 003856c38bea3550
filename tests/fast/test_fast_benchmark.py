"""benchmarks/fast.py runs at HEAD: one timed repeat (after the warm-up) of our SAE training against sae-lens'
trainer and runner on 2,048 harvested tokens, into a scratch results folder."""

import importlib.util
import json

import pytest

from zoo.core.data import repo_root

pytest.importorskip("sae_lens")


@pytest.mark.slow  # ~20 s: zoo-lm.chat loaded and sae-lens' runner built twice per side
def test_benchmark_runs_one_repeat(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_fast", repo_root() / "benchmarks" / "fast.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    args = ["--steps", "2", "--tokens", "2048", "--batch", "512", "--repeats", "1", "--results-dir", str(tmp_path)]
    bench.main(args)
    doc = json.loads((tmp_path / "fast" / "bench-speed.json").read_text())
    assert doc["kind"] == "benchmark" and "1 interleaved repeats" in doc["notes"]
    for row in doc["rows"]:
        assert row["ours"] > 0 and row["peer"] > 0
        assert row["ratio"] == pytest.approx(row["peer_cpu_s"] / row["ours_cpu_s"])
