"""Path-count maps against hand counts, the notes' ratios, and padding modes."""

import math

import pytest
import torch
from torch import nn

from zoo.methods.saliency_bias.path_count import corner_centre_ratio, map_correlation, path_count_map
from zoo.models.vision import VGGNet


def conv(padding_mode="zeros", padding=1):
    return nn.Sequential(nn.Conv2d(1, 1, 3, padding=padding, padding_mode=padding_mode), nn.ReLU())


def test_one_layer_zero_padded_3x3_by_hand():
    # each pixel is in as many 3x3 windows as it has neighbours-in-image, itself included: corners 4, edges 6, inside 9
    expect = torch.tensor([[4, 6, 6, 4], [6, 9, 9, 6], [6, 9, 9, 6], [4, 6, 6, 4]], dtype=torch.float64)
    assert torch.equal(path_count_map(conv(), (4, 4)), expect)


def test_one_layer_valid_and_two_layers_by_hand():
    # valid 3x3 on 4x4 -> 2x2 output; pixel (r, c) lies in (#rows of windows) x (#cols): 1,2,2,1 per axis
    axis = torch.tensor([1, 2, 2, 1], dtype=torch.float64)
    assert torch.equal(path_count_map(conv(padding=0), (4, 4)), torch.outer(axis, axis))
    # two zero-padded layers on 3x3: N1 = window counts [[4,6,4],[6,9,6],[4,6,4]]; N2(p) = sum of N1 over p's window
    n1 = torch.tensor([[4, 6, 4], [6, 9, 6], [4, 6, 4]], dtype=torch.float64)
    n2 = torch.tensor([[25, 35, 25], [35, 49, 35], [25, 35, 25]], dtype=torch.float64)
    assert torch.equal(path_count_map(conv(), (3, 3)), n1)
    assert torch.equal(path_count_map(nn.Sequential(*conv(), *conv()), (3, 3)), n2)


@pytest.mark.parametrize("depth", [1, 3, 6])
def test_circular_padding_is_flat(depth):
    m = path_count_map(VGGNet(1, 10, depth=depth, padding_mode="circular", n_pools=0), (16, 16))
    assert torch.equal(m, torch.full_like(m, m[0, 0].item()))
    assert m[0, 0].item() == 9**depth


def test_notes_ratio_table_32x32():
    # notes §2 table (3x3 kernels, 32x32, zero padding): centre/corner pixel 2.25 at depth 1, 6.41 at depth 5
    for depth, ratio in ((1, 2.25), (5, 6.41)):
        m = path_count_map(VGGNet(1, 10, depth=depth, n_pools=0), (32, 32))
        assert math.isclose((m[15, 15] / m[0, 0]).item(), ratio, abs_tol=0.005)


def test_depth_deepens_zero_padding_deficit_and_reflect_differs():
    r = [corner_centre_ratio(path_count_map(VGGNet(1, 10, depth=d, n_pools=0), (32, 32))) for d in (1, 5, 10)]
    assert r[0] > r[1] > r[2]
    zeros = path_count_map(VGGNet(1, 10, depth=2, n_pools=0), (8, 8))
    refl = path_count_map(VGGNet(1, 10, depth=2, n_pools=0, padding_mode="reflect"), (8, 8))
    assert refl.sum() > zeros.sum()  # reflected border positions add paths instead of dropping them
    assert map_correlation(zeros, zeros) == pytest.approx(1.0)


def test_unknown_layer_raises():
    with pytest.raises(TypeError, match="Upsample"):
        path_count_map(nn.Sequential(nn.Conv2d(1, 1, 3), nn.Upsample(scale_factor=2)), (8, 8))
