"""benchmarks/pooled_reps.py runs on a tiny random model: the three sides (hook pooling, generate with every hidden
state, plain generate) sample the same tokens and the two pooling sides agree."""

import importlib.util

import pytest

from zoo.core.data import repo_root


@pytest.mark.slow  # 17 s under load: two forked children load the model again for the RSS figures
def test_benchmark_runs_and_its_sides_agree(capsys):
    spec = importlib.util.spec_from_file_location("bench_pooled_reps", repo_root() / "benchmarks" / "pooled_reps.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--arch", "zoo-lm-tiny", "--tokens", "4", "--batch", "2", "--repeats", "1"])
    out = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines() if ": " in line)
    assert out["same_tokens_as_plain".rjust(24)].strip() == "True"
    assert float(out["max_abs_diff".rjust(24)]) < 1e-5
    assert float(out["plain_tokens_per_s".rjust(24)]) > 0
    with pytest.raises(SystemExit):
        bench.main(["--help"])
