"""benchmarks/overhead.py runs at HEAD: one timed repeat (after the warm-up run) of train.py's path against the bare
loop on zoo-lm-tiny, into a scratch results folder: one row per repeat and the median row, the paired ratio."""

import importlib.util
import json

import pytest

from zoo.core.data import repo_root


@pytest.mark.slow  # ~30 s: four tiny training runs, then `import zoo` and `zoo list` timed in fresh interpreters
def test_benchmark_runs_one_repeat(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the script moves to the repository root; this puts the working directory back
    spec = importlib.util.spec_from_file_location("bench_overhead", repo_root() / "benchmarks" / "overhead.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    argv = ["--arch", "zoo-lm-tiny", "--batch-size", "2", "--max-length", "32", "--steps", "6", "--repeats", "1"]
    bench.main([*argv, "--results-dir", str(tmp_path)])
    repeat, median = json.loads((tmp_path / "platform" / "overhead.json").read_text())["rows"]
    assert repeat["repeat"] == 0 and median["repeat"] == "median"
    assert repeat["ratio"] == pytest.approx(repeat["train.py ms"] / repeat["bare loop ms"]) == median["ratio"]
