"""The noise-sweep table: per-run rows with the paired difference to DPO, written with provenance (issue 11)."""

import json

import pytest

from zoo.methods.shapo import experiments as E


def run(method, seed, flip, acc, harm):
    return {
        "method": method,
        "seed": seed,
        "flip_rate": flip,
        "val/accuracy": acc,
        "val/harmful_rate": harm,
        "wall_s": 1.0,
    }


def test_sweep_rows_pair_with_dpo_by_seed_and_flip(tmp_path):
    runs = [
        run("shapo-token", 1, 0.2, 0.6, 0.3),
        run("dpo", 0, 0.2, 0.5, 0.5),
        run("dpo", 1, 0.2, 0.7, 0.2),
        run("shapo-token", 0, 0.2, 0.55, 0.4),
        run("start", 0, 0.0, 0.5, 0.6),
        run("shapo-reward", 2, 0.2, 0.9, 0.1),
    ]
    rows = E.sweep_rows(runs)
    assert [(r["method"], r["seed"]) for r in rows] == [
        ("start", 0),
        ("dpo", 0),
        ("dpo", 1),
        ("shapo-token", 0),
        ("shapo-token", 1),
        ("shapo-reward", 2),
    ]
    tok0 = rows[3]
    assert tok0["accuracy - DPO"] == pytest.approx(0.05) and tok0["harmful_rate - DPO"] == pytest.approx(-0.1)
    assert rows[4]["accuracy - DPO"] == pytest.approx(-0.1)
    assert "accuracy - DPO" not in rows[5]  # no DPO run with seed 2: no pair, no difference
    assert "accuracy - DPO" not in rows[0] and "accuracy - DPO" not in rows[1]
    path = E.write_sweep(
        runs,
        "python -m zoo.methods.shapo.experiments",
        "notes",
        {"overrides": []},
        out=str(tmp_path / "results" / "shapo" / "noise-sweep.json"),
    )
    doc = json.loads(path.read_text())
    tok = next(s for s in doc["summary"] if s["method"] == "shapo-token")
    assert tok["accuracy"] == {"mean": pytest.approx(0.575), "sd": pytest.approx(0.0353553, rel=1e-5), "n": 2}
    assert tok["accuracy - DPO"]["mean"] == pytest.approx(-0.025) and doc["provenance"]["git_sha"]
