"""benchmarks/sembind.py runs at HEAD: one timed repeat per side (after the warm-up call) of plain Tree-Ring
verification against SemBind's on 2 generated images, into a scratch results folder."""

import importlib.util
import json

import pytest

from zoo.core.data import repo_root

pytest.importorskip("diffusers")


def test_benchmark_runs_one_repeat(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_sembind", repo_root() / "benchmarks" / "sembind.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--images", "2", "--repeats", "1", "--results-dir", str(tmp_path)])
    plain, ours, ratio = json.loads((tmp_path / "sembind" / "verification-benchmark.json").read_text())["rows"]
    assert (plain["side"], ours["side"], ratio["side"]) == (
        "plain tree-ring",
        "sembind + tree-ring",
        "ratio sembind/plain",
    )
    assert ratio["images_per_s"] == pytest.approx(ours["images_per_s"] / plain["images_per_s"])
