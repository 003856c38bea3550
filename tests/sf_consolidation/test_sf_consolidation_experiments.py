"""drift.json is aggregated from cached runs by a separate ``--write`` process, so its own SHA does not pin the code
that trained them: each run records its commit, and the table says which commits and how many runs are unpinned."""

from zoo.methods.sf_consolidation.experiments import runs_provenance

CLEAN_A = {"git_sha": "a" * 40, "dirty": False}
CLEAN_B = {"git_sha": "b" * 40, "dirty": False}


def test_all_runs_from_one_clean_commit():
    info, note = runs_provenance([{"git": CLEAN_A}, {"git": CLEAN_A}])
    assert info == {"commits": {"a" * 40: 2}, "unpinned": 0, "runs": 2}
    assert note == "Runs made at clean commit(s) aaaaaaaaaa (2)."


def test_dirty_and_unrecorded_runs_are_counted_as_unpinned():
    runs = [{"git": CLEAN_A}, {"git": CLEAN_B}, {"git": {"git_sha": "c" * 40, "dirty": True}}, {}]
    info, note = runs_provenance(runs)
    assert info["commits"] == {"a" * 40: 1, "b" * 40: 1} and info["unpinned"] == 2
    assert "aaaaaaaaaa (1), bbbbbbbbbb (1)" in note and "2 of 4 runs from a dirty tree" in note


def test_no_clean_run_says_so():
    info, note = runs_provenance([{"git": {"git_sha": None, "dirty": None}}])
    assert info["unpinned"] == 1 and note.startswith("No run made at a clean commit; 1 of 1")
