"""benchmarks/zoo_lm.py runs at HEAD: one timed run per side (after the warm-up run) of zoo-lm-tiny's Lightning step
against the bare loop, into a scratch results folder; both sides do the same work (equal losses)."""

import importlib.util
import json

import pytest

from zoo.core.data import repo_root


def test_benchmark_runs_one_repeat(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_zoo_lm", repo_root() / "benchmarks" / "zoo_lm.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    argv = ["--arch", "zoo-lm-tiny", "--steps", "2", "--warmup", "1", "--repeats", "1", "--batch", "2", "--block", "32"]
    bench.main([*argv, "--results-dir", str(tmp_path)])
    doc = json.loads((tmp_path / "zoo-lm" / "train-throughput.json").read_text())
    repeat, median = doc["rows"]
    assert repeat["repeat"] == 0 and median["repeat"] == "median"
    assert median["ours / bare"] == pytest.approx(median["ours tokens/s"] / median["bare tokens/s"])
    assert float(doc["notes"].split("over all steps ")[1].split(" ")[0]) < 1e-4
