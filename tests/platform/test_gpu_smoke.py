"""benchmarks/gpu_smoke.py, the one command a lent GPU runs, exercised on CPU (``--accelerator cpu``): one fast paper
recipe in the default suite, every paper recipe in a slow test; its JSON holds step times, peak memory and the
precision facts for each."""

import importlib.util
import json

import pytest

from zoo.core.data import repo_root

PAPER = sorted((repo_root() / "recipes" / "paper").glob("*.yaml"))


def _smoke():
    spec = importlib.util.spec_from_file_location("gpu_smoke", repo_root() / "benchmarks" / "gpu_smoke.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check(report: dict, names: list[str]) -> None:
    assert report["failed"] == [], [r.get("traceback") for r in report["runs"] if not r["ok"]]
    assert [r["recipe"] for r in report["runs"]] == [f"paper/{n}.yaml" for n in names]
    for row in report["runs"]:
        assert row["steps"] == len(row["step_seconds"]) and all(s > 0 for s in row["step_seconds"])
        assert row["peak_memory_mb"] > 0 and row["seconds"] > 0
        assert row["float32_matmul_precision"] in ("highest", "high", "medium") and row["bf16_supported"]
        assert row["param_dtypes"] and row["precision"]


def test_gpu_smoke_on_cpu_one_recipe(tmp_path):
    out = tmp_path / "smoke.json"
    argv = ["--accelerator", "cpu", "--only", "cond-dp-criteo", "--out", str(out), "--stand-ins", str(tmp_path / "s")]
    assert _smoke().main(argv) == 0
    report = json.loads(out.read_text())
    _check(report, ["cond-dp-criteo"])
    assert report["runs"][0]["steps"] == 2 and report["machine"]["accelerator"] == "cpu"


def test_gpu_smoke_refuses_an_unknown_recipe_and_a_missing_gpu(tmp_path):
    smoke = _smoke()
    assert smoke.main(["--accelerator", "cpu", "--only", "no-such-recipe", "--out", str(tmp_path / "x.json")]) == 2
    if not smoke.torch.cuda.is_available():
        assert smoke.main(["--out", str(tmp_path / "x.json")]) == 2
    assert not (tmp_path / "x.json").exists()


@pytest.mark.slow
def test_gpu_smoke_on_cpu_every_paper_recipe(tmp_path):
    out = tmp_path / "smoke.json"
    assert _smoke().main(["--accelerator", "cpu", "--out", str(out), "--stand-ins", str(tmp_path / "s")]) == 0
    _check(json.loads(out.read_text()), [p.stem for p in PAPER])
