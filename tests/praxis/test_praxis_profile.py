"""benchmarks/praxis_profile.py: the stage clock charges each call its own time (nested wrapped calls subtracted),
restores every call site, and the OR-node census counts a hand-checkable graph."""

import importlib.util

import numpy as np
import pytest

from zoo.core.data import repo_root
from zoo.methods.praxis import construct as construct_mod
from zoo.methods.praxis.rashomon import fit_rashomon


@pytest.fixture(scope="module")
def prof():
    spec = importlib.util.spec_from_file_location(
        "bench_praxis_profile", repo_root() / "benchmarks" / "praxis_profile.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_stage_clock_subtracts_nested_calls(prof):
    now = [0.0]
    clock = prof.StageClock(clock=lambda: now[0])

    def inner():
        now[0] += 3.0

    inner_t = clock.wrap("inner", inner)

    def outer():
        now[0] += 1.0
        inner_t()
        inner_t()
        now[0] += 0.5

    clock.wrap("outer", outer)()
    assert clock.seconds == {"inner": 6.0, "outer": 1.5}  # outer: 7.5 in all, 6 of it inside inner
    assert clock.calls == {"inner": 2, "outer": 1}


def test_installed_wraps_then_restores_every_site(prof):
    before = {(m, n): getattr(m, n) for sites in prof.STAGES.values() for m, n in sites}
    clock = prof.StageClock()
    with clock.installed():
        assert all(getattr(m, n) is not fn for (m, n), fn in before.items())
        X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]] * 3, dtype=np.uint8)
        fit_rashomon(X, X[:, 0] ^ X[:, 1], 0.01, 2, 0.1)
    assert all(getattr(m, n) is fn for (m, n), fn in before.items())
    assert clock.calls["proxy (LicketySPLIT lookahead, numpy)"] >= 1  # the root reference at least
    assert set(clock.seconds) <= set(prof.STAGES)


def test_or_nodes_by_depth_counts_a_depth1_graph(prof):
    # y = x0 at depth 1 with a loose budget: the root splits on x0 (x1 is useless) into two leaf nodes; the split
    # on x1 costs more than the bound and is pruned
    X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]] * 4, dtype=np.uint8)
    rs = fit_rashomon(X, X[:, 0], 0.05, 1, 0.0, backend="numpy")
    assert not isinstance(rs.root, construct_mod.LazySplitsNode)
    assert [f for f, _, _ in rs.root.splits] == [0]
    assert prof.or_nodes_by_depth(rs.root, 1) == {1: 1, 0: 2}
