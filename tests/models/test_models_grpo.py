"""zoo.models.grpo: advantages, k3, the clipped loss (by hand and against TRL's), log-probs and sampling."""

import importlib.util
import itertools
import types

import pytest
import torch

from zoo.models.causal_lm import build_causal_lm
from zoo.models.grpo import (
    completion_logprobs,
    completion_mask,
    group_advantages,
    kl3,
    policy_loss,
    policy_update,
    sample_rollouts,
)


@pytest.fixture(scope="module")
def lm():
    torch.manual_seed(0)
    return build_causal_lm("zoo-lm-tiny").eval()


def test_group_advantages_by_hand():
    a = group_advantages(torch.tensor([1.0, 0, 0, 0, 2, 2, 2, 2]), 4)
    # group 1: mean 0.25, unbiased std sqrt((0.5625 + 3 * 0.0625) / 3) = 0.5; group 2 constant -> 0
    expected = torch.tensor([0.75, -0.25, -0.25, -0.25]) / (0.5 + 1e-4)
    assert torch.allclose(a, torch.cat([expected, torch.zeros(4)]))
    assert torch.allclose(group_advantages(torch.tensor([1.0, 0]), 2, scale=False), torch.tensor([0.5, -0.5]))
    with pytest.raises(ValueError):
        group_advantages(torch.ones(6), 4)


def test_kl3_nonnegative_and_zero_at_equality():
    lp, lq = torch.randn(100), torch.randn(100)
    assert (kl3(lp, lq) >= 0).all() and kl3(lp, lp).abs().max() == 0
    # k3 is unbiased for KL(pi || target): sample from pi, average -> the exact KL
    p, q = torch.tensor([0.7, 0.3]), torch.tensor([0.4, 0.6])
    exact = (p * (p / q).log()).sum()
    assert torch.allclose((p * kl3(q.log(), p.log())).sum(), exact)


def test_completion_mask_keeps_first_eos():
    m = completion_mask(torch.tensor([[5, 2, 7, 2], [5, 6, 7, 8]]), [2])
    assert m.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]


def test_policy_loss_by_hand_and_clipping():
    old = torch.zeros(1, 2)
    new = torch.log(torch.tensor([[1.5, 0.9]])).requires_grad_()  # ratios 1.5 (clipped at 1.2 for A>0), 0.9
    loss, stats = policy_loss(new, old, torch.tensor([1.0]), torch.ones(1, 2))
    assert torch.isclose(loss, torch.tensor(-(1.2 + 0.9) / 2))
    assert stats["clip_fraction"] == 0.5
    loss.backward()
    assert new.grad[0, 0] == 0 and new.grad[0, 1] != 0  # the clipped token passes no gradient


def test_output_independent_reward_has_zero_expected_gradient_only_without_clipping():
    """Average over all 2^G reward vectors (an output-independent reward, e.g. random) of the loss gradient."""
    G = 4
    logits = torch.tensor([0.3, -0.2, 0.5, 0.1], requires_grad=True)  # one token per completion

    def expected_grad(ratio_scale):
        total = torch.zeros(G)
        for bits in itertools.product([0.0, 1.0], repeat=G):
            adv = group_advantages(torch.tensor(bits), G)
            old = (logits.detach() - torch.log(torch.tensor(ratio_scale))).unsqueeze(1)
            loss, _ = policy_loss(logits.unsqueeze(1), old, adv, torch.ones(G, 1))
            total += torch.autograd.grad(loss, logits)[0]
        return total / 2**G

    assert expected_grad(torch.ones(G)).abs().max() < 1e-6  # ratio 1 (first update): no bias
    biased = expected_grad(torch.tensor([1.5, 1.0, 0.7, 1.0]))  # ratios outside [0.8, 1.2]: clipping acts
    assert biased.abs().max() > 1e-3


def test_completion_logprobs_match_unpadded_forward(lm):
    torch.manual_seed(1)
    ids = torch.tensor([[0, 0, 5, 6, 7, 8, 9], [3, 4, 5, 6, 7, 8, 9]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1] * 7])
    with torch.no_grad():
        got = completion_logprobs(lm, ids, mask, 3)
        alone = torch.log_softmax(lm(ids[:1, 2:]).logits[:, -4:-1], -1).gather(-1, ids[:1, -3:, None])[..., 0]
    assert torch.allclose(got[:1], alone, atol=1e-5)


def test_sample_and_update_move_the_policy(lm):
    torch.manual_seed(2)
    prompts, mask = torch.tensor([[0, 5, 6], [4, 5, 6]]), torch.tensor([[0, 1, 1], [1, 1, 1]])
    roll = sample_rollouts(lm, prompts, mask, group_size=4, max_new_tokens=5, eos_token_ids=[2])
    assert roll.completion_ids.shape == (8, 5) and roll.input_ids.shape == (8, 8)
    assert torch.equal(roll.prompt_ids[:4], prompts[:1].expand(4, -1))
    model = build_causal_lm("zoo-lm-tiny")
    model.load_state_dict(lm.state_dict())
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    rewards = torch.arange(8.0)
    stats = policy_update(model, opt, roll, group_advantages(rewards, 4), updates=2, max_grad_norm=1.0)
    assert len(stats) == 2 and stats[0]["ratio_mean"] == pytest.approx(1.0) and stats[1]["ratio_mean"] != 1.0


@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="needs trl (rl extra)")
def test_loss_equals_trl_grpo_loss():
    """TRL's GRPOTrainer._compute_loss on one batch, with its model forward replaced by fixed log-probs."""
    from trl import GRPOTrainer

    torch.manual_seed(3)
    n, c = 6, 5
    logp = (-torch.rand(n, c) * 3).requires_grad_()
    old, ref = logp.detach() + 0.3 * torch.randn(n, c), logp.detach() + 0.2 * torch.randn(n, c)
    mask = (torch.rand(n, c) > 0.2).float()
    adv = torch.randn(n)
    args = types.SimpleNamespace(use_bias_correction_kl=False, delta=None)
    metrics = {"train": __import__("collections").defaultdict(list)}
    accel = types.SimpleNamespace(gather=lambda t: t, num_processes=1, reduce=lambda t, reduction: t)
    fake = types.SimpleNamespace(
        args=args,
        beta=0.04,
        loss_type="grpo",
        epsilon_low=0.2,
        epsilon_high=0.28,
        importance_sampling_level="token",
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        use_vllm=False,
        aux_loss_enabled=False,
        current_gradient_accumulation_steps=1,
        model=types.SimpleNamespace(training=True),
        _metrics=metrics,
        accelerator=accel,
        _entropy_bonus_enabled=False,
        _get_per_token_logps_and_entropies=lambda *a, **k: (logp, torch.zeros(n, c), None),
    )
    inputs = {
        "prompt_ids": torch.zeros(n, 1, dtype=torch.long),
        "prompt_mask": torch.ones(n, 1),
        "completion_ids": torch.zeros(n, c, dtype=torch.long),
        "completion_mask": mask,
        "advantages": adv,
        "old_per_token_logps": old,
        "ref_per_token_logps": ref,
    }
    try:
        theirs = GRPOTrainer._compute_loss(fake, None, inputs)
    except AttributeError as err:  # TRL grew a new attribute: fail loudly naming it
        pytest.fail(f"fake GRPOTrainer lacks {err}")
    ours, _ = policy_loss(logp, old, adv, mask, epsilon=0.2, epsilon_high=0.28, beta=0.04, ref_logprobs=ref)
    assert torch.allclose(ours, theirs, atol=1e-6)
