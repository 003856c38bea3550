"""``removal --reuse`` keeps rows of an earlier results file: rows from a dirty tree must not be carried into a table
whose own provenance would then say clean (issue 39, provenance). Also which attacker run rewrites each seed's texts
(one per training seed, or one for all)."""

import json

import pytest

from zoo.methods.rlcracker.experiments import reusable_rows


def _write(tmp_path, prov):
    f = tmp_path / "removal.json"
    f.write_text(json.dumps({"rows": [{"seed": 0, "attack": "none"}], "provenance": prov}))
    return f


def test_rows_from_a_clean_commit_are_reused_with_their_origin(tmp_path):
    f = _write(tmp_path, {"git_sha": "a" * 40, "dirty": False, "date": "2026-12-01T00:00:00+00:00"})
    rows, origin = reusable_rows(f)
    assert rows == [{"seed": 0, "attack": "none"}]
    assert origin == {"file": str(f), "git_sha": "a" * 40, "date": "2026-12-01T00:00:00+00:00"}


@pytest.mark.parametrize("prov", [{"git_sha": "a" * 40, "dirty": True}, {"git_sha": None, "dirty": None}, {}])
def test_rows_from_a_dirty_or_unknown_tree_are_refused(tmp_path, prov):
    with pytest.raises(SystemExit, match="without --reuse"):
        reusable_rows(_write(tmp_path, prov))


def test_one_attacker_run_per_training_seed_or_one_for_all():
    from zoo.methods.rlcracker.experiments import attacker_per_seed

    assert attacker_per_seed(["r0", "r1", "r2"], [0, 1, 2]) == {0: "r0", 1: "r1", 2: "r2"}
    assert attacker_per_seed(["r"], [3, 4]) == {3: "r", 4: "r"}
    assert attacker_per_seed([], [0, 1]) == {}
    with pytest.raises(SystemExit, match="one per seed"):
        attacker_per_seed(["r0", "r1"], [0, 1, 2])
