"""The functions behind the st-tgexplainer tables, on hand-worked cases (issue 11).

A linear stand-in network (logit = sum of the kept tokens' weights, times their gates) makes every value computable
by hand: ``fidelity_agreement`` and ``gradient_importance`` only need ``net(**inputs, keep=, gate=)["logit"]``.
"""

import math

import pytest
import torch

from zoo.methods.st_tgexplainer.explain import fidelity_agreement, gradient_importance, random_importance
from zoo.methods.st_tgexplainer.metrics import stability_agreement

# two events, K = 2 neighbours per endpoint -> 2K = 4 tokens; event 1's last token is padding
W = torch.tensor([[3.0, -1.0, 0.5, -0.2], [-2.0, 0.5, 0.4, 9.0]])
INPUTS = {"u_valid": torch.tensor([[True, True], [True, True]]), "v_valid": torch.tensor([[True, True], [True, False]])}


class Linear:
    """logit_b = sum_i W[b, i] * keep[b, i] * gate[b, i] over real tokens."""

    def __call__(self, u_valid, v_valid, keep=None, gate=None):
        valid = torch.cat([u_valid, v_valid], 1)
        mask = valid if keep is None else keep & valid
        g = torch.ones_like(W) if gate is None else gate
        return {"logit": (W * g * mask).sum(1)}


def test_fidelity_agreement_by_hand():
    # full logits: event 0: 3 - 1 + 0.5 - 0.2 = 2.3 (> 0); event 1: -2 + 0.5 + 0.4 = -1.1 (< 0, the 9 is padding)
    importance = torch.tensor([[0.0, 3.0, 2.0, 1.0], [5.0, 0.0, 1.0, 9.0]])
    agree = fidelity_agreement(Linear(), INPUTS, importance, [0.25, 0.5, 1.0])
    # level 0.25: keep ceil(4*.25)=1 -> event 0 keeps token 1 (-1): -1 < 0, disagrees; event 1 keeps ceil(3*.25)=1
    #   token 0 (-2; token 3 is padding despite importance 9): agrees
    # level 0.5: event 0 keeps tokens 1, 2: -0.5, disagrees; event 1 keeps ceil(1.5)=2 tokens 0, 2: -1.6, agrees
    # level 1: everything real is kept: both agree
    assert agree.tolist() == [[False, True], [False, True], [True, True]]
    # the full logits passed in are used as the reference instead of recomputing them
    flipped = fidelity_agreement(Linear(), INPUTS, importance, [1.0], full_logit=torch.tensor([-1.0, 1.0]))
    assert flipped.tolist() == [[False, False]]


def test_gradient_importance_is_signed_occlusion_by_hand():
    imp = gradient_importance(Linear(), INPUTS)
    # d logit / d gate_i = W_i on real tokens (0 on padding); times sign(logit): +1 for event 0, -1 for event 1
    torch.testing.assert_close(imp, torch.tensor([[3.0, -1.0, 0.5, -0.2], [2.0, -0.5, -0.4, 0.0]]))
    assert not imp.requires_grad


def test_random_importance_shape_range_and_seed():
    valid = torch.ones(3, 6, dtype=torch.bool)
    a = random_importance(valid, torch.Generator().manual_seed(0))
    b = random_importance(valid, torch.Generator().manual_seed(0))
    assert a.shape == (3, 6) and torch.equal(a, b) and bool(((a >= 0) & (a < 1)).all())
    assert not torch.equal(a, random_importance(valid, torch.Generator().manual_seed(1)))


def test_stability_agreement_by_hand():
    rho = torch.tensor([0.9, 0.8, 0.3, 0.1])
    seen = torch.tensor([True, False, True, False])
    counts = torch.tensor([5.0, 0.0, 3.0, 1.0])
    out = stability_agreement(rho, seen, counts=counts, stability=1 - rho)
    # AUC of rho for seen: positive scores {0.9, 0.3}, negative {0.8, 0.1}: pairs won 0.9>0.8, 0.9>0.1, 0.3>0.1,
    # lost 0.3<0.8 -> 3/4. Ranks of rho (1..4): [4, 3, 2, 1]; seen as 0/1 ranks [3.5, 1.5, 3.5, 1.5];
    # Spearman = Pearson of the ranks: dx = [1.5, 0.5, -0.5, -1.5], dy = [1, -1, 1, -1], sum dx dy = 2,
    # sum dx^2 = 5, sum dy^2 = 4 -> 2 / sqrt(20)
    assert out["rho_auc"] == pytest.approx(0.75)
    assert out["rho_spearman"] == pytest.approx(2 / math.sqrt(20))
    assert out["seen_rate"] == pytest.approx(0.5)
    assert out["count_auc"] == pytest.approx(1.0)  # counts 5, 3 beat 0, 1
    assert out["stability_auc"] == pytest.approx(0.25)  # reversing the scores reverses the AUC
    one_class = stability_agreement(rho, torch.ones(4, dtype=torch.bool), counts=counts)
    assert one_class["seen_rate"] == 1.0 and math.isnan(one_class["rho_auc"]) and math.isnan(one_class["count_auc"])
