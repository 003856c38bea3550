"""Tables aggregated from cached runs or seeds carry the SHA of the aggregating process; the cached pieces record
their own commit and the table names them (issue 39, provenance)."""

from zoo.core.provenance import cached_runs_provenance

A = {"git_sha": "a" * 40, "dirty": False}


def test_seeds_wording_and_counts():
    info, note = cached_runs_provenance([A, A, {"git_sha": "b" * 40, "dirty": True}], "seeds")
    assert info == {"commits": {"a" * 40: 2}, "unpinned": 1, "seeds": 3}
    assert (
        note
        == "Seeds made at clean commit(s) aaaaaaaaaa (2); 1 of 3 seeds from a dirty tree or with no commit recorded (not pinned)."
    )


def test_no_record_is_unpinned():
    info, note = cached_runs_provenance([None], "seeds")
    assert info["unpinned"] == 1 and note.startswith("No seed made at a clean commit")
