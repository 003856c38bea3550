"""benchmarks/watchlog.py --predict runs at HEAD: zoo predict with explanations on the first 64 events of the shipped
sample, stream and batch, one timed repeat after the warm-up, into a scratch results folder; both modes explain every
window alike."""

import gzip
import importlib.util
import json

import pytest

from zoo.core.data import repo_root


@pytest.mark.slow  # ~20 s: watchlog.mordor loaded, then four zoo predict calls with generation
def test_predict_benchmark_stream_and_batch(tmp_path):
    events = tmp_path / "events.jsonl"
    with gzip.open(repo_root() / "data" / "mordor-sysmon" / "sample.jsonl.gz", "rt") as f:
        events.write_text("".join(f.readlines()[:64]))
    spec = importlib.util.spec_from_file_location("bench_watchlog", repo_root() / "benchmarks" / "watchlog.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    argv = ["--predict", str(events), "--repeats", "1", "--threads", "1", "--results-dir", str(tmp_path)]
    assert bench.main(argv) == 0
    stream, batch = json.loads((tmp_path / "watchlog" / "predict-throughput.json").read_text())["rows"]
    assert (stream["mode"], stream["windows_per_forward"], batch["mode"]) == ("stream", 1, "batch")
    assert stream["windows"] == batch["windows"] > 0 and batch["explanations_as_stream"]
    assert stream["windows_per_s"] == pytest.approx(stream["windows"] / stream["seconds"])
