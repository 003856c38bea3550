"""CSI (both forms), object mass and pointing game on hand cases."""

import math

import torch

from zoo.methods.saliency_bias.metrics import (
    csi_centroid,
    csi_distance,
    csi_distance_corrected,
    csi_distance_uniform,
    object_mass,
    pointing_game,
    spearman_abs,
    ssim_abs,
)

H = W = 9
BOX = torch.tensor([[0, 0, 3, 3]])  # top-left 3x3 box, centre (1, 1); image centre (4, 4); D = 3*sqrt(2)


def delta(r, c):
    m = torch.zeros(1, H, W)
    m[0, r, c] = 1.0
    return m


def test_csi_zero_on_object_one_at_centre():
    assert csi_centroid(delta(1, 1), BOX).item() == 0.0
    assert math.isclose(csi_centroid(delta(4, 4), BOX).item(), 1.0)
    assert math.isclose(csi_distance(delta(1, 1), BOX).item(), -1.0)
    assert math.isclose(csi_distance(delta(4, 4), BOX).item(), 1.0)


def test_csi_centroid_hand_values():
    # centroid (7, 7): <(6, 6), (3, 3)> / 18 = 2; centroid (1, 4): <(0, 3), (3, 3)> / 18 = 0.5
    assert math.isclose(csi_centroid(delta(7, 7), BOX).item(), 2.0)
    assert math.isclose(csi_centroid(delta(1, 4), BOX).item(), 0.5)
    # a signed map is taken in absolute value: -1 at the centre counts like +1
    assert math.isclose(csi_centroid(-delta(4, 4), BOX).item(), 1.0)


def test_uniform_map_centroid_is_one_and_distance_correction_is_its_value():
    u = torch.ones(1, H, W)
    assert math.isclose(csi_centroid(u, BOX).item(), 1.0)
    # hand value of the uniform distance form: mean distance to (1, 1) minus mean distance to (4, 4), over D
    rows, cols = torch.meshgrid(
        torch.arange(9.0, dtype=torch.float64), torch.arange(9.0, dtype=torch.float64), indexing="ij"
    )
    d_obj = ((rows - 1) ** 2 + (cols - 1) ** 2).sqrt().mean()
    d_img = ((rows - 4) ** 2 + (cols - 4) ** 2).sqrt().mean()
    expect = float((d_obj - d_img) / (3 * math.sqrt(2)))
    assert math.isclose(csi_distance(u, BOX).item(), expect, rel_tol=1e-9)
    assert math.isclose(csi_distance_uniform(BOX, H, W).item(), expect, rel_tol=1e-9)
    assert abs(csi_distance_corrected(u, BOX).item()) < 1e-12
    assert 0 < expect < 1


def test_distance_form_bounded_and_centre_placement_undefined():
    g = torch.Generator().manual_seed(0)
    maps = torch.randn(20, H, W, generator=g)
    v = csi_distance(maps, BOX.expand(20, 4))
    assert ((v >= -1) & (v <= 1)).all()
    centre_box = torch.tensor([[3, 3, 6, 6]])  # centred: D = 0
    assert math.isnan(csi_centroid(delta(4, 4), centre_box).item())
    assert math.isnan(csi_distance(delta(4, 4), centre_box).item())


def test_object_mass_and_pointing_game():
    m = torch.zeros(2, H, W)
    m[0, 0, 0], m[0, 8, 8] = 3.0, 1.0  # 3/4 of the mass in the box, argmax inside
    m[1, 1, 1], m[1, 5, 5] = 1.0, -2.0  # argmax |S| outside
    boxes = BOX.expand(2, 4)
    assert torch.allclose(object_mass(m, boxes), torch.tensor([0.75, 1 / 3], dtype=torch.float64))
    assert pointing_game(m, boxes).tolist() == [True, False]
    assert math.isclose(object_mass(torch.ones(1, H, W), BOX).item(), 9 / 81)


def test_similarity_hand_cases():
    g = torch.Generator().manual_seed(1)
    a = torch.rand(3, 8, 8, generator=g) + 0.1
    assert torch.allclose(spearman_abs(a, 2 * a**2), torch.ones(3))
    assert torch.allclose(spearman_abs(a, -a), torch.ones(3))  # |S|: sign ignored
    assert torch.allclose(spearman_abs(a, 1 / a), -torch.ones(3))
    assert torch.allclose(ssim_abs(a, 3 * a), torch.ones(3))
    assert (ssim_abs(a, torch.rand(3, 8, 8, generator=g)) < 0.9).all()
