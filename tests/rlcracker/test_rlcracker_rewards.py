"""Rewards, metrics and RLCracker's loss against TRL's on a fixed batch."""

import collections
import importlib.util
import math
import types

import pytest
import torch

from zoo.methods.rlcracker.metrics import detector_auc, pass_at_k, removed, succeeded
from zoo.methods.rlcracker.rewards import semantic_reward, semantic_weight, token_reward, total_reward
from zoo.models.grpo import group_advantages, policy_loss


def test_semantic_reward_anchor_values():
    r = semantic_reward(torch.tensor([0.85, 1.0, 0.0]))
    assert float(r[0]) == pytest.approx(0.0, abs=1e-7) and float(r[1]) == pytest.approx(0.95, abs=1e-6)
    assert -1 <= float(r[2]) < -0.99  # far below tau: -1 to float precision
    k = math.log(0.975 / 0.025) / 0.15
    assert float(semantic_reward(torch.tensor(0.9))) == pytest.approx(2 / (1 + math.exp(-k * 0.05)) - 1)
    with pytest.raises(ValueError):
        semantic_reward(torch.tensor(0.5), tau=1.0)


def test_token_reward_signs_and_zero():
    lp = torch.log(torch.tensor([[0.5, 0.2]]))
    assert torch.equal(token_reward(lp, lp, lp), torch.zeros(1, 2))  # all three agree: KL3 = 0 twice
    # the question-conditioned reference agrees with the policy, the copying one does not: positive reward
    wm = torch.log(torch.tensor([[0.05, 0.9]]))
    k = token_reward(wm, lp, lp)
    assert torch.all(k > 0)
    d = wm - lp
    assert torch.allclose(k, torch.exp(d) - d - 1)
    assert torch.all(token_reward(lp, wm, lp) < 0)


def test_alpha_and_total_reward():
    assert semantic_weight(torch.tensor([0.95, 0.95]), 15.0) == 1.0  # max(1, 15 * 0.05 = 0.75)
    assert semantic_weight(torch.tensor([0.0, -0.5]), 15.0) == pytest.approx(18.75)  # 15 * (1 + 0.25)
    adv, k = torch.tensor([1.0, -1.0]), torch.tensor([[0.5, 0.0], [1.0, 2.0]])
    assert torch.allclose(total_reward(adv, k, 2.0, 0.1), torch.tensor([[2.05, 2.0], [-1.9, -1.8]]))
    assert torch.equal(total_reward(adv, None, 2.0, 0.1), torch.tensor([2.0, -2.0]))


def test_removal_success_pass_at_k_auc_by_hand():
    z = torch.tensor([5.0, 4.0, 1.0, float("nan")])
    sim = torch.tensor([0.9, 0.6, 0.71, 0.8])
    assert removed(z).tolist() == [False, True, True, True]
    assert succeeded(z, sim).tolist() == [False, False, True, True]
    assert pass_at_k(torch.tensor([[0, 1], [0, 0], [1, 1]])) == pytest.approx(2 / 3)
    assert detector_auc(torch.tensor([3.0, 5.0]), torch.tensor([1.0, 4.0])) == pytest.approx(0.75)  # 3 of 4 pairs


@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="needs trl")
def test_rlcracker_loss_equals_trl_with_token_rewards():
    """The per-token total reward R = alpha A + w_KL k fed to TRL's GRPOTrainer._compute_loss as its advantages
    (TRL accepts [N, C]) gives the loss of zoo.models.grpo.policy_loss with beta 0.04 (the NLL term is added on top
    by the step and is not TRL's)."""
    from trl import GRPOTrainer

    torch.manual_seed(7)
    n, c, g = 8, 6, 4
    logp = (-torch.rand(n, c) * 2).requires_grad_()
    ref, hq = logp.detach() + 0.3 * torch.randn(n, c), logp.detach() + 0.3 * torch.randn(n, c)
    mask = (torch.rand(n, c) > 0.25).float()
    r_sem = semantic_reward(torch.rand(n))
    rewards = total_reward(
        group_advantages(r_sem, g), token_reward(ref, hq, logp.detach()) * mask, semantic_weight(r_sem, 15.0), 0.1
    )
    fake = types.SimpleNamespace(
        args=types.SimpleNamespace(use_bias_correction_kl=False, delta=None),
        beta=0.04,
        loss_type="grpo",
        epsilon_low=0.2,
        epsilon_high=0.2,
        importance_sampling_level="token",
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        use_vllm=False,
        aux_loss_enabled=False,
        current_gradient_accumulation_steps=1,
        model=types.SimpleNamespace(training=True),
        _metrics={"train": collections.defaultdict(list)},
        accelerator=types.SimpleNamespace(gather=lambda t: t, num_processes=1, reduce=lambda t, reduction: t),
        _entropy_bonus_enabled=False,
        _get_per_token_logps_and_entropies=lambda *a, **k: (logp, torch.zeros(n, c), None),
    )
    batch = {
        "prompt_ids": torch.zeros(n, 1, dtype=torch.long),
        "prompt_mask": torch.ones(n, 1),
        "completion_ids": torch.zeros(n, c, dtype=torch.long),
        "completion_mask": mask,
        "advantages": rewards,
        "old_per_token_logps": logp.detach(),
        "ref_per_token_logps": ref,
    }
    try:
        theirs = GRPOTrainer._compute_loss(fake, None, batch)
    except AttributeError as err:
        pytest.fail(f"fake GRPOTrainer lacks {err}")
    ours, _ = policy_loss(logp, logp.detach(), rewards, mask, beta=0.04, ref_logprobs=ref)
    assert torch.allclose(ours, theirs, atol=1e-6)
