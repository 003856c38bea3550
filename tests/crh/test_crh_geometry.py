"""Directions and the cylinder decomposition on small cases worked by hand."""

import math

import pytest
import torch

from zoo.methods.crh.geometry import (
    cylinder,
    diffmean,
    mean_center,
    pca_direction,
    penalty_vector,
    probe_direction,
    steer_lengths,
)


def test_diffmean_equals_mean_center_on_paired_data():
    g = torch.Generator().manual_seed(0)
    a_no, a_with = torch.randn(7, 5, generator=g), torch.randn(7, 5, generator=g)
    assert torch.allclose(diffmean(a_with - a_no), mean_center(a_with, a_no), atol=1e-6)
    assert torch.allclose(diffmean(torch.tensor([[1.0, 2.0], [3.0, 6.0]])), torch.tensor([2.0, 4.0]))


def test_cylinder_by_hand():
    mu = torch.tensor([2.0, 0.0, 0.0])
    d = torch.tensor([[3.0, 4.0, 0.0], [1.0, 0.0, 0.0]])
    geo = cylinder(d, mu)
    assert torch.allclose(geo["cos"], torch.tensor([0.6, 1.0]))
    assert torch.allclose(geo["sin"], torch.tensor([0.8, 0.0]))
    assert torch.allclose(geo["axial"], torch.tensor([3.0, 1.0]))
    assert torch.allclose(geo["d_perp"][0], torch.tensor([0.0, 4.0, 0.0]))
    assert torch.allclose(geo["e_perp"][0], torch.tensor([0.0, 1.0, 0.0]))
    assert torch.equal(geo["e_perp"][1], torch.zeros(3))  # on the axis: no normal direction


def test_penalty_vector_endpoints_and_norm():
    g = torch.Generator().manual_seed(1)
    mu, d = torch.randn(6, generator=g), torch.randn(6, generator=g)
    geo = cylinder(d[None], mu)
    cos, sin, e = geo["cos"][0], geo["sin"][0], geo["e_perp"][0]
    u = mu / mu.norm()
    lengths = torch.tensor([0.5, 2.0])
    v0 = penalty_vector(lengths, cos, sin, u, e, 0.0)
    assert torch.allclose(v0, lengths[:, None] * d / d.norm(), atol=1e-6)  # v(L, 0) = L d_q / |d_q|
    v1 = penalty_vector(lengths, cos, sin, u, e, 1.0)
    assert torch.allclose(v1, lengths[:, None] * cos * u, atol=1e-6)  # v(L, 1) = L cos(theta) u
    for lam in (0.0, 0.3, 0.75, 1.0):
        v = penalty_vector(lengths, cos, sin, u, e, lam)
        expected = lengths**2 * (cos**2 + (1 - lam) ** 2 * sin**2)
        assert torch.allclose(v.norm(dim=1) ** 2, expected, atol=1e-5)


def test_steer_lengths_schedule():
    got = steer_lengths(2.0, 5.0, 25)
    assert got.shape == (25,)
    assert math.isclose(float(got[0]), 0.4, rel_tol=1e-6) and math.isclose(float(got[-1]), 10.0, rel_tol=1e-6)


def test_pca_is_uncentred_and_unsigned_unless_aligned():
    # every diff is +-(1, 0) plus a small y offset: the uncentred PC1 is the x axis (centred it would be y)
    diffs = torch.tensor([[3.0, 0.1], [3.0, -0.1], [-1.0, 0.1], [3.0, -0.1]])
    pc = pca_direction(diffs)
    assert torch.allclose(pc.abs(), torch.tensor([1.0, 0.0]), atol=2e-2)
    assert float(pca_direction(diffs, "align") @ diffmean(diffs)) > 0
    assert torch.allclose(pca_direction(diffs, "align").abs(), pc.abs())
    with pytest.raises(ValueError, match="pca_sign"):
        pca_direction(diffs, "flip")


def test_probe_finds_the_separating_direction():
    g = torch.Generator().manual_seed(0)
    a_no = torch.randn(40, 3, generator=g)
    a_with = a_no + torch.tensor([4.0, 0.0, 0.0])
    w = probe_direction(a_with, a_no)
    assert abs(float(w.norm()) - 1) < 1e-5 and float(w[0]) > 0.9
