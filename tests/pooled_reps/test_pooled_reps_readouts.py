"""Readouts: segment means, simplex mixtures, prefix pools, single tokens and the token-shuffle control."""

import torch

from zoo.methods.pooled_reps.readouts import (
    mixture,
    prefix_mean,
    segment_bounds,
    segment_means,
    simplex_grid,
    single_token,
    token_shuffle,
)


def _states():
    g = torch.Generator().manual_seed(0)
    lengths = torch.tensor([7, 3, 1, 5])
    H = torch.randn(4, 7, 2, generator=g)
    H[torch.arange(7)[None, :] >= lengths[:, None]] = 0.0
    return H, lengths


def test_segment_bounds_cover_and_handle_short_rows():
    assert segment_bounds(7) == [(0, 2), (2, 4), (4, 7)]
    assert segment_bounds(1) == [(0, 1), (0, 1), (0, 1)]
    assert segment_bounds(2) == [(0, 1), (0, 1), (1, 2)]


def test_mixture_at_a_vertex_is_its_segment_mean():
    H, n = _states()
    seg = segment_means(H, n)
    assert torch.allclose(seg[1, 0], H[0, 2:4].mean(0))
    for k, vertex in enumerate([(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)]):
        assert vertex in simplex_grid(0.1)
        assert torch.allclose(mixture(seg, vertex), seg[k])
    assert len(simplex_grid(0.1)) == 66 and all(abs(sum(a) - 1) < 1e-9 for a in simplex_grid(0.1))


def test_prefix_mean_and_single_token_clamp_to_length():
    H, n = _states()
    full = prefix_mean(H, n, 7)
    assert torch.allclose(full, torch.stack([H[i, :m].mean(0) for i, m in enumerate(n.tolist())]))
    assert torch.allclose(prefix_mean(H, n, 1), H[:, 0])
    assert torch.allclose(single_token(H, n, 6)[1], H[1, 2])  # row 1 has 3 tokens: h_6 reads its last
    assert torch.allclose(single_token(H, n, 2)[0], H[0, 1])


def test_token_shuffle_pools_only_other_rows_tokens():
    lengths = torch.tensor([4, 4, 4])
    H = torch.zeros(3, 4, 1)
    for i in range(3):
        H[i] = float(10**i)  # row i's states all equal 10^i: a mean shows which rows it drew from
    out = token_shuffle(H, lengths, seed=0)[:, 0]
    assert out[0] != 1.0 and out[1] != 10.0 and out[2] != 100.0
    assert 10.0 <= out[0] <= 100.0 and 1.0 <= out[1] <= 100.0 and 1.0 <= out[2] <= 10.0
