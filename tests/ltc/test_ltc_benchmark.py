"""benchmarks/ltc.py runs at HEAD: one timed block of two forwards per side (after the warm-up block) on a batch of
4, into a scratch results folder; the decomposition's embedding is encode_image's."""

import importlib.util
import json

import pytest

from zoo.core.data import repo_root

pytest.importorskip("open_clip")


def test_benchmark_runs_one_block(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_ltc", repo_root() / "benchmarks" / "ltc.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--batch", "4", "--iters", "2", "--repeats", "1", "--results-dir", str(tmp_path)])
    peer, ours = json.loads((tmp_path / "ltc" / "bench-decompose.json").read_text())["rows"]
    assert peer["ratio_to_encode_image"] == 1.0 and ours["max_abs_diff_embedding"] < 1e-4
    assert ours["ratio_to_encode_image"] == pytest.approx(ours["ms_per_batch"] / peer["ms_per_batch"])
