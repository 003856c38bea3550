"""Objectives and metrics against hand values and independent implementations."""

import math

import pytest
import torch
from torch.distributions import Bernoulli, kl_divergence

from zoo.methods.st_tgexplainer.losses import (
    bernoulli_kl,
    discriminator_loss,
    permute_within_groups,
    r_schedule,
    redundancy_loss,
)
from zoo.methods.st_tgexplainer.metrics import acc_auc, link_metrics, reciprocal_ranks, top_fraction_keep


def test_kl_against_hand_value_and_torch_distributions():
    # 0.9 ln(0.9/0.7) + 0.1 ln(0.1/0.3) = 0.9 * 0.2513144 + 0.1 * (-1.0986123) = 0.1163217
    assert bernoulli_kl(torch.tensor([[0.9]]), 0.7).item() == pytest.approx(0.1163217, abs=2e-6)
    s = torch.tensor([[0.2, 0.5, 0.8, 0.95]])
    ref = kl_divergence(Bernoulli(probs=s), Bernoulli(probs=torch.full_like(s, 0.6))).mean()
    assert bernoulli_kl(s, 0.6).item() == pytest.approx(ref.item(), abs=1e-5)
    valid = torch.tensor([[True, False, False, False]])
    assert bernoulli_kl(s, 0.6, valid).item() == pytest.approx(
        kl_divergence(Bernoulli(probs=torch.tensor(0.2)), Bernoulli(probs=torch.tensor(0.6))).item(), abs=1e-5
    )


def test_r_schedule_values():
    assert [r_schedule(e) for e in (1, 4, 5, 9, 10, 30)] == pytest.approx([0.7, 0.7, 0.6, 0.6, 0.5, 0.5])
    with pytest.raises(ValueError):
        r_schedule(-1)


def test_permutation_stays_within_label_groups():
    g = torch.Generator().manual_seed(0)
    labels = torch.tensor([1, 0, 1, 1, 0, 2, 0, 1, 2, 1])
    moved = False
    for _ in range(20):
        perm = permute_within_groups(labels, g)
        assert sorted(perm.tolist()) == list(range(10))
        assert torch.equal(labels[perm], labels)
        moved |= not torch.equal(perm, torch.arange(10))
    assert moved


def test_discriminator_losses_by_hand():
    half = torch.full((6,), 0.5)
    assert discriminator_loss(half, half).item() == pytest.approx(2 * math.log(2), abs=1e-5)
    assert redundancy_loss(half, half).item() == pytest.approx(-2 * math.log(2), abs=1e-5)
    # a perfect discriminator: L_D -> 0
    assert discriminator_loss(torch.ones(3), torch.zeros(3)).item() == pytest.approx(0.0, abs=1e-5)


def test_mrr_ties_and_link_metrics():
    rr = reciprocal_ranks(torch.tensor([0.5, 2.0]), torch.tensor([[0.7, 0.5, 0.1], [0.0, 1.0, 1.5]]))
    assert rr.tolist() == pytest.approx([1 / 2.5, 1.0])  # optimistic 2, pessimistic 3 -> 2.5
    m = link_metrics(torch.tensor([3.0, 1.0]), torch.tensor([2.0, 0.0]))
    assert m["auc"] == pytest.approx(0.75) and m["ap"] == pytest.approx((1 + 2 / 3) / 2)


def test_top_fraction_keep_and_acc_auc():
    imp = torch.tensor([[0.1, 0.9, 0.5, 0.7, 0.3]])
    valid = torch.tensor([[True, True, True, False, True]])
    assert top_fraction_keep(imp, valid, 0.5).tolist() == [[False, True, True, False, False]]  # ceil(2) of 4
    assert top_fraction_keep(imp, valid, 0.1).tolist() == [[False, True, False, False, False]]
    assert acc_auc([0.1, 0.2, 0.3], [0.5, 0.7, 0.9]) == pytest.approx(0.7)
    with pytest.raises(ValueError):
        acc_auc([0.3, 0.1], [1, 1])
