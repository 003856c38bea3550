"""benchmarks/pulse.py runs at HEAD: one timed repeat (after the warm-up) of the batched subset fits against
statsmodels' looped GLM on the first 64 subsets, whose NLLs agree, into a scratch results folder."""

import importlib.util
import json

import pytest

from zoo.core.data import repo_root

pytest.importorskip("statsmodels")


def test_benchmark_runs_one_repeat_and_the_nlls_agree(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_pulse", repo_root() / "benchmarks" / "pulse.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--subsets", "64", "--repeats", "1", "--results-dir", str(tmp_path)]) == 0
    (row,) = json.loads((tmp_path / "pulse" / "subset-fits.json").read_text())["rows"]
    assert row["subsets"] == 64 and row["repeats"] == 1 and row["nll_equal_1e-6"]
    assert row["speedup"] == pytest.approx(row["statsmodels_s"] / row["ours_s"])
