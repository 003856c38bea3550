"""benchmarks/saliency_bias.py runs at HEAD: one timed repeat per side (after the warm-up call) of our saliency loop
against captum on a batch of 2, into a scratch results folder."""

import importlib.util
import json

import pytest

from zoo.core.data import repo_root

pytest.importorskip("captum")


def test_benchmark_runs_one_repeat(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_saliency", repo_root() / "benchmarks" / "saliency_bias.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--batch-size", "2", "--repeats", "1", "--ig-steps", "2", "--results-dir", str(tmp_path)])
    rows = json.loads((tmp_path / "saliency-bias" / "bench-saliency-loop.json").read_text())["rows"]
    assert [r["method"] for r in rows] == ["gradient", "integrated_gradients"]
    for r in rows:
        assert r["ratio"] == pytest.approx(r["ours_images_per_s"] / r["captum_images_per_s"])
