"""benchmarks/mad.py runs at HEAD: one child process per side (after the warm-up children) on 12 inputs and 4 draws,
into a scratch results folder: draws/s, memory and the ours/plain ratio row."""

import importlib.util
import json

import pytest

from zoo.core.data import repo_root


@pytest.mark.slow  # ~20 s: four child processes, each importing torch and building the VGG
def test_benchmark_runs_one_repeat(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_mad", repo_root() / "benchmarks" / "mad.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    argv = ["--inputs", "12", "--draws", "4", "--burn-in", "1", "--repeats", "1", "--results-dir", str(tmp_path)]
    bench.main(argv)
    ours, plain, ratio = json.loads((tmp_path / "mad" / "sampler-benchmark.json").read_text())["rows"]
    assert (ours["side"], plain["side"], ratio["side"]) == ("ours", "plain", "ratio ours/plain")
    assert ratio["draws_per_s"] == pytest.approx(ours["draws_per_s"] / plain["draws_per_s"])
