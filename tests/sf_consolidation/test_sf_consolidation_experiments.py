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


def test_paper_miniworld_recipe_follows_the_authors_config():
    """Issue 39: the paper recipe had feature_dim 32 (authors' Miniworld config: 128), one task (the paper: two,
    alternating) and a "20k-step smoke" description."""
    from zoo.core.recipe import load_recipe

    cfg = load_recipe("paper/sf-consolidation-miniworld.yaml")
    m, d = cfg["model"], cfg["data"]
    assert m["env"] == "miniworld-fourrooms" and m["feature_dim"] == 128
    assert m["consolidation"] == "multi" and m["num_beakers"] == 5
    assert d["steps"] == 5_000_000 and d["task_period"] > 0
    assert d["steps"] // d["task_period"] == 4  # A, B, A, B: each task seen twice
    assert "smoke" not in cfg["card"]["description"].lower()
