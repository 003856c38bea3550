"""Stage B losses against values computed by hand (h = 2, beta = 0.5, so beta*h = 1; log sigma(1) = -0.3132617)."""

import pytest
import torch

from zoo.methods.shapo import losses as L

T = lambda *x: torch.tensor(x, dtype=torch.float64)
# policy log-probs (-10, -12), reference (-11, -11): h = (-10 + 12) - 0 = 2
PC, PR, RC, RR = T(-10.0), T(-12.0), T(-11.0), T(-11.0)


def test_preference_logits_and_reference_free():
    assert L.preference_logits(PC, PR, RC, RR).item() == pytest.approx(2.0)
    assert L.preference_logits(PC, PR, None, None).item() == pytest.approx(2.0)
    with pytest.raises(ValueError):
        L.preference_logits(PC, PR, RC, None)


def test_dpo_and_label_smoothing():
    h = L.preference_logits(PC, PR, RC, RR)
    assert L.dpo_loss(h, 0.5).item() == pytest.approx(0.3132616875182228, abs=1e-12)
    # cDPO eps = 0.1: 0.9 * 0.31326 + 0.1 * 1.31326
    assert L.dpo_loss(h, 0.5, 0.1).item() == pytest.approx(0.41326168751822284, abs=1e-12)
    with pytest.raises(ValueError):
        L.dpo_loss(h, 0.5, 0.5)


def test_ipo():
    h = L.preference_logits(PC, PR, RC, RR)
    assert L.ipo_loss(h, 0.5).item() == pytest.approx(1.0)  # (2 - 1/(2*0.5))^2


def test_rdpo():
    h = L.preference_logits(PC, PR, RC, RR)
    # (0.9 * 0.31326 - 0.1 * 1.31326) / 0.8
    assert L.rdpo_loss(h, 0.5, 0.1).item() == pytest.approx(0.1882616875182228, abs=1e-12)


def test_simpo_uses_averages_and_no_reference():
    # avg logps -1 and -2, gamma/beta = 0.5 -> logits 0.5, beta = 2 -> beta*logits = 1
    out = L.preference_losses(
        "simpo", 2.0, PC, PR, T(100.0), T(-100.0), avg_chosen=T(-1.0), avg_rejected=T(-2.0), simpo_gamma_beta_ratio=0.5
    )
    assert out.item() == pytest.approx(0.3132616875182228, abs=1e-12)
    with pytest.raises(ValueError):
        L.preference_losses("simpo", 2.0, PC, PR, RC, RR)


def test_reward_level_soft_label():
    p = L.reward_preference_probability(T(1.0), T(3.0), 0.5)  # sigma(0.5 * (3 - 1))
    assert p.item() == pytest.approx(0.7310585786300049, abs=1e-12)
    h = L.preference_logits(PC, PR, RC, RR)
    # -(0.75 log sigma(1) + 0.25 log sigma(-1))
    assert L.soft_label_loss(h, 0.5, T(0.75)).item() == pytest.approx(0.5632616875182228, abs=1e-12)
    # p* = 1 is plain DPO; preference_losses routes to the soft label whatever the loss name
    assert L.soft_label_loss(h, 0.5, T(1.0)).item() == pytest.approx(L.dpo_loss(h, 0.5).item())
    assert L.preference_losses("ipo", 0.5, PC, PR, RC, RR, p_star=T(0.75)).item() == pytest.approx(0.5632616875, 1e-9)


def test_drdpo_aggregation():
    losses = T(1.0, 3.0)
    # -log((e^-1 + e^-3) / 2)
    assert L.aggregate(losses, "drdpo", 1.0).item() == pytest.approx(1.5662191695169727, abs=1e-12)
    # beta' = 0.5: -0.5 log((e^-2 + e^-6) / 2)
    assert L.aggregate(losses, "drdpo", 0.5).item() == pytest.approx(1.3374986263210678, abs=1e-12)
    assert L.aggregate(losses, "mean").item() == pytest.approx(2.0)
    with pytest.raises(ValueError):
        L.aggregate(losses, "median")


def test_sequence_logps_matches_full_log_softmax():
    from zoo.methods.shapo.lm import sequence_logps
    from zoo.models.causal_lm import build_causal_lm

    torch.manual_seed(0)
    lm = build_causal_lm("zoo-lm-tiny").eval()
    ids = torch.tensor([[1, 5, 9, 11, 2, 0], [1, 7, 8, 9, 10, 2]])
    mask = (ids != 0).long()
    labels = torch.tensor([[-100, -100, 9, 11, 2, -100], [-100, 7, 8, 9, 10, 2]])
    got, n = sequence_logps(lm, ids, mask, labels)
    with torch.no_grad():
        logp = torch.log_softmax(lm(input_ids=ids, attention_mask=mask).logits.float(), -1)
    want = [sum(logp[b, t - 1, labels[b, t]].item() for t in range(1, 6) if labels[b, t] != -100) for b in range(2)]
    assert got.tolist() == pytest.approx(want, abs=1e-4) and n.tolist() == [3.0, 5.0]


def test_reward_level_loss_ignores_which_reply_is_labelled_chosen():
    """Swapping y_w and y_l maps h -> -h and p* -> 1 - p*, so the soft-label loss is unchanged: reward-level ShaPO
    cannot see label flips (its labels come from the cost model)."""
    c_w, c_l = T(0.3, -1.0), T(1.2, 0.4)
    pc, pr, rc, rr = T(-10.0, -7.0), T(-12.0, -6.5), T(-11.0, -7.2), T(-11.5, -6.0)
    kept = L.preference_losses("dpo", 0.1, pc, pr, rc, rr, p_star=L.reward_preference_probability(c_w, c_l, 1.0))
    swapped = L.preference_losses("dpo", 0.1, pr, pc, rr, rc, p_star=L.reward_preference_probability(c_l, c_w, 1.0))
    assert torch.allclose(kept, swapped, atol=1e-12)
    assert not torch.allclose(
        L.dpo_loss(L.preference_logits(pc, pr, rc, rr), 0.1), L.dpo_loss(L.preference_logits(pr, pc, rr, rc), 0.1)
    )
