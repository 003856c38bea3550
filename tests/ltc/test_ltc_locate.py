"""LTC's locate / correct steps and the baselines on hand-made cases."""

import math

import pytest
import torch

from zoo.methods.ltc import baselines as B
from zoo.methods.ltc.locate import (
    contrast,
    inject,
    locate,
    logits,
    mean_ablate,
    reject,
    select_heads,
    text_directions,
    top_head_frequency,
)
from zoo.methods.ltc.metrics import group_accuracy, wg_avg_gap


def test_select_heads_one_over_k_rule():
    f_wrong = torch.tensor([[0.0, 0.6], [0.3, 0.1]])
    f_right = torch.tensor([[0.5, 0.0], [0.3, 0.2]])
    # K = 4 heads non-zero in either map -> threshold 0.25; diff = wrong - right = [[-.5, .6], [0, -.1]]
    S, Y = select_heads(f_wrong, f_right)
    assert S == [(0, 1)] and Y == [(0, 0)]
    assert select_heads(torch.zeros(2, 2), torch.zeros(2, 2)) == ([], [])


def test_contrast_and_top_head_frequency_by_hand():
    T = torch.eye(2)
    heads = torch.tensor([[[[1.0, 0.0], [0.0, 3.0]]]])  # n=1, L=1, H=2, D=2
    full = heads.sum((1, 2)) @ T  # logits (1, 3) -> predict class 1
    pred = full.argmax(1)
    delta = contrast(heads, T, pred, torch.tensor([0]), full)  # wrong: y' = true label 0
    assert torch.equal(delta, torch.tensor([[[-1.0, 3.0]]]))
    assert torch.equal(top_head_frequency(delta), torch.tensor([[0.0, 1.0]]))


def test_planted_background_head_is_found():
    g = torch.Generator().manual_seed(0)
    n, L, H = 400, 2, 2
    y = torch.randint(0, 2, (n,), generator=g)
    place = torch.where(torch.rand(n, generator=g) < 0.5, y, 1 - y)
    sign = lambda v: (2 * v - 1).float()[:, None] * torch.tensor([-1.0, 1.0])
    heads = 0.01 * torch.randn(n, L, H, 2, generator=g)
    heads[:, 0, 1] += torch.empty(n, 1).uniform_(0.5, 2.0, generator=g) * sign(y)  # class head, random strength
    heads[:, 1, 0] += sign(place)  # planted background head
    loc = locate(heads, torch.zeros(n, 1, 2), torch.eye(2), y, 2 * y + place)
    assert loc.spurious == [(1, 0)] and loc.salient == [(0, 1)]
    ablated = mean_ablate(heads, loc.spurious)
    conflicting = place != y
    acc = lambda h: float((logits(h, torch.zeros(n, 1, 2), torch.eye(2)).argmax(1) == y)[conflicting].float().mean())
    assert acc(heads) < 0.8 and acc(ablated) == 1.0  # conflicting: right only where the class head wins


def test_mean_ablation_keeps_the_mean_embedding():
    heads = torch.randn(50, 3, 4, 8)
    out = mean_ablate(heads, [(0, 1), (2, 3)])
    torch.testing.assert_close(out.sum((1, 2)).mean(0), heads.sum((1, 2)).mean(0))
    assert torch.allclose(out[:, 2, 3], heads[:, 2, 3].mean(0).expand(50, 8))
    assert torch.equal(out[:, 1], heads[:, 1])


def test_injection_on_2d_vectors_by_hand():
    c = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    u = torch.tensor([[1.0, 1.0]]) / math.sqrt(2)
    out = inject(c, u)
    # c1 + cos(c1,u) u = (1, 0) + (1/sqrt2)(1,1)/sqrt2 = (1.5, 0.5); c2 = (0, 2) + (0.5, 0.5); then unit norm
    expect = torch.stack([torch.tensor([1.5, 0.5]) / math.sqrt(2.5), torch.tensor([0.5, 2.5]) / math.sqrt(6.5)])
    torch.testing.assert_close(out, expect)


def test_text_directions_are_orthonormal_and_span_the_differences():
    pos, neg = torch.tensor([[3.0, 1.0, 0.0], [1.0, 1.0, 1.0]]), torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    U = text_directions(pos, neg)
    torch.testing.assert_close(U @ U.T, torch.eye(2))
    v = pos - neg
    torch.testing.assert_close((v @ U.T) @ U, v)  # every difference lies in the span
    z = torch.tensor([[0.0, 0.0, 5.0], [2.0, 0.0, 0.0]])
    assert torch.allclose(reject(z, U[:1]), torch.tensor([[0.0, 0.0, 5.0], [0.0, 0.0, 0.0]]))


def test_ortho_cali_projects_out_the_spurious_prompt():
    T = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]) / math.sqrt(2)
    spurious = torch.tensor([[0.0, 0.0, 1.0]])
    out = B.ortho_cali(T, spurious, torch.zeros(1, 3), torch.zeros(1, 3), lam=0.0)
    torch.testing.assert_close(out, torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))


def test_text_span_picks_the_variance_direction():
    C = torch.zeros(20, 3)
    C[:, 2] = torch.linspace(-1, 1, 20)
    texts = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.2, 1.0], [0.0, 1.0, 0.0]])
    assert B.text_span(C, texts, steps=1) == [1]
    heads = torch.zeros(20, 1, 2, 3)
    heads[:, 0, 1] = C
    heads[:, 0, 0, 0] = torch.linspace(-1, 1, 20)
    assert B.textspan_heads(heads, texts, [False, True, False], [0]) == [(0, 1)]


def test_random_heads_draws_distinct_late_heads():
    draws = B.random_heads([3, 4, 5], 4, 2, 20, seed=0)
    assert len(draws) == 20 and all(len(set(d)) == 2 and all(l >= 3 for l, _ in d) for d in draws)


def test_group_metrics_hand_values():
    pred = torch.tensor([1, 1, 0, 0, 1, 0])
    y = torch.tensor([1, 0, 0, 0, 1, 1])
    g = torch.tensor([3, 1, 0, 0, 2, 2])
    acc = group_accuracy(pred, y, g)
    torch.testing.assert_close(acc, torch.tensor([1.0, 0.0, 0.5, 1.0]))
    m = wg_avg_gap(pred, y, g)
    assert m["wg"] == 0.0 and m["avg"] == pytest.approx(400 / 6) and m["gap"] == pytest.approx(400 / 6)
    m = wg_avg_gap(torch.tensor([1, 0, 0]), torch.tensor([1, 0, 1]), torch.tensor([3, 0, 2]))
    assert m["wg"] == 0.0 and m["avg"] == pytest.approx(200 / 3)  # group 1 empty: left out of the minimum
