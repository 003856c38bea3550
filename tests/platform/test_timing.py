"""The shared benchmark timer on a fake clock: every figure below can be checked by hand."""

import os

import pytest

from zoo.core.timing import compare, machine_load


class FakeClock:
    """A clock that only moves when a side (or setup) advances it."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_interleaved_alternating_warmup_excluded_medians_by_hand(monkeypatch):
    clock, log = FakeClock(), []
    cost = {"ours": [100.0, 2.0, 2.0, 4.0], "peer": [100.0, 3.0, 9.0, 3.0]}  # first call = warm-up (compile)

    def side(name):
        def run():
            log.append(name)
            clock.t += cost[name].pop(0)
            return name.upper()

        return run

    def setup(name):
        clock.t += 50.0  # untimed: never in a median

    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    t = compare(
        {"ours": side("ours"), "peer": side("peer")}, repeats=3, warmup=1, threads=1, setup=setup, clocks=(clock, clock)
    )
    # warm-up ours, peer; then repeats alternate: peer first, ours first, peer first
    assert log == ["ours", "peer", "peer", "ours", "ours", "peer", "peer", "ours"]
    assert t.orders == [("peer", "ours"), ("ours", "peer"), ("peer", "ours")]
    assert t.wall == {"ours": [2.0, 2.0, 4.0], "peer": [3.0, 9.0, 3.0]} and t.cpu == t.wall
    assert t.median("ours") == 2.0 and t.median("peer") == 3.0 and t.ratio("peer", "ours") == 1.5
    row = t.row("ours", "peer")
    assert (row["ours_s"], row["peer_s"], row["ratio"], row["repeats"], row["warmup"]) == (2.0, 3.0, 1.5, 3, 1)
    assert t.outputs == {"ours": "OURS", "peer": "PEER"}
    assert os.environ["OMP_NUM_THREADS"] == "1" and "1 thread(s)" in t.describe() and "3 interleaved" in t.describe()


def test_rejects_empty_or_zero_repeats():
    with pytest.raises(ValueError, match="repeats"):
        compare({"a": lambda: 0}, repeats=0)
    with pytest.raises(ValueError, match="side"):
        compare({}, repeats=1)


def test_machine_load_states_the_three_averages_and_the_cores():
    text = machine_load()
    assert text.startswith("load average ") and f" on {os.cpu_count()} cores at " in text and text.endswith(" UTC")
    assert [float(x) for x in text.split(" on ")[0].removeprefix("load average ").split(", ")] == pytest.approx(
        os.getloadavg(), abs=0.5
    )
