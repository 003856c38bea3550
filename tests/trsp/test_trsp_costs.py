"""Costs by hand: a 4-point line, haversine walking, the metric check."""

import numpy as np
import pytest

from zoo.core.data import DataError
from zoo.methods.trsp.costs import (
    Instance,
    all_pairs,
    best_routes,
    check_metric,
    pair_costs,
    paired_walking_hours,
    shuttle_hours,
    walking_hours,
)


def line_instance():
    """Points 0, 1, 2, 3 on a line (hours); candidates at 1 and 2; shuttle 0.5 x distance."""
    x = np.array([0.0, 1.0, 2.0, 3.0])
    trips = [(0, 3), (3, 0), (1, 2), (0, 1)]
    c = np.array([1.0, 2.0])
    a = np.array([x[i] for i, _ in trips])
    b = np.array([x[j] for _, j in trips])
    return Instance(np.abs(a[:, None] - c), np.abs(c[None] - b[:, None]), 0.5 * np.abs(c[:, None] - c), np.abs(a - b))


def test_costs_on_a_four_point_line_by_hand():
    inst = line_instance()
    # 0->3: walk 1 + ride 0.5 + walk 1 = 2.5 < 3; 3->0 the other orientation, 2.5; 1->2: ride only, 0.5;
    # 0->1: walking (1) beats 1 + 0.5 + 1.
    cost, board, alight = best_routes(inst, [0, 1])
    assert cost.tolist() == [2.5, 2.5, 0.5, 1.0]
    assert board.tolist() == [0, 1, 0, -1] and alight.tolist() == [1, 0, 1, -1]
    assert pair_costs(inst).tolist() == [[2.5, 2.5, 0.5, 1.0]]
    assert best_routes(inst, [0])[0].tolist() == [3.0, 3.0, 1.0, 1.0]  # one stop: nobody can ride


def test_haversine_walking_by_hand():
    # one degree of latitude = 6371.0088 * pi / 180 = 111.195 km; x 1.3 / 5 km/h = 28.911 h
    h = walking_hours(np.array([[10.0, 40.0]]), np.array([[10.0, 41.0]]))[0, 0]
    assert h == pytest.approx(6371.0088 * np.pi / 180 * 1.3 / 5, rel=1e-9)
    p, q = np.random.default_rng(0).random((5, 2)), np.random.default_rng(1).random((5, 2))
    assert np.allclose(paired_walking_hours(p, q), np.diag(walking_hours(p, q)))


def test_shuttle_is_a_metric_and_has_a_wait():
    pts = np.random.default_rng(0).random((20, 2))
    S = shuttle_hours(walking_hours(pts, pts))
    assert S[0, 0] == 0 and S[0, 1] == pytest.approx(0.2 * walking_hours(pts[:1], pts[1:2])[0, 0] + 5 / 60)
    check_metric(S, "shuttle")


def test_metric_check_names_the_worst_triple():
    D = np.array([[0, 1, 5.0], [1, 0, 1], [5.0, 1, 0]])
    with pytest.raises(DataError, match=r"m\.npz: triangle inequality broken by 3 at \(i=0, j=1, k=2\)"):
        check_metric(D, "m.npz")


def test_all_pairs_order():
    assert all_pairs(3).tolist() == [[0, 1], [0, 2], [1, 2]]
