"""Group Relative Policy Optimisation (GRPO) pieces shared by anchor-adapter and rlcracker.

GRPO (Shao et al. 2024, DeepSeekMath §4.1.2) samples a group of ``G`` completions per prompt, normalises each
completion's reward inside its group into an advantage, and maximises the PPO clipped surrogate over the completion
tokens, optionally with a ``β``-weighted k3 estimate of ``KL(π_θ ‖ π_ref)``. The loss here is written to match TRL's
``GRPOTrainer`` (``loss_type="grpo"``, token-level importance sampling, two-sided ``ε`` clipping); a test compares the
two on one batch. Per-token advantages ``(N, C)`` are accepted (RLCracker adds a token-level reward), as in TRL.

Shapes: ``B`` prompts, ``G`` completions each, ``N = B * G`` rows (grouped: rows ``g*G .. g*G+G-1`` share prompt
``g``), ``P`` prompt tokens (left-padded), ``C`` completion tokens (right-padded; a row ends at its first EOS, kept).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence

import torch

from zoo.models.generation_pool import valid_mask


@dataclasses.dataclass
class Rollouts:
    """A batch of sampled completions, ``G`` per prompt.

    Attributes:
        prompt_ids, prompt_mask: ``[N, P]`` left-padded prompts (mask 0 on padding), each repeated ``G`` times.
        completion_ids: ``[N, C]`` sampled tokens, padded with the pad id after the row's end.
        completion_mask: ``[N, C]`` 1 up to and including the first EOS, else 0 (float, for masked means).
        group_size: ``G``.
    """

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor
    group_size: int

    @property
    def input_ids(self) -> torch.Tensor:
        """``[N, P + C]`` prompt followed by completion."""
        return torch.cat([self.prompt_ids, self.completion_ids], 1)

    @property
    def attention_mask(self) -> torch.Tensor:
        """``[N, P + C]``; completion positions after the end count as padding."""
        return torch.cat([self.prompt_mask, self.completion_mask.to(self.prompt_mask.dtype)], 1)


def completion_mask(tokens: torch.Tensor, eos_token_ids: Sequence[int]) -> torch.Tensor:
    """``[N, C]`` float mask: 1 up to and including each row's first EOS token, 0 after it
    (:func:`zoo.models.generation_pool.valid_mask` as floats, for masked means)."""
    return valid_mask(tokens, eos_token_ids).float()


@torch.no_grad()
def sample_rollouts(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    group_size: int,
    max_new_tokens: int,
    eos_token_ids: Sequence[int],
    pad_token_id: int = 0,
    temperature: float = 1.0,
    top_p: float = 1.0,
) -> Rollouts:
    """Sample ``G`` completions of ``max_new_tokens`` tokens for each of ``B`` left-padded prompts.

    Args:
        prompt_ids, prompt_mask: ``[B, P]`` left-padded prompts.
        group_size: ``G`` completions per prompt.
        eos_token_ids: ids that end a completion (kept in the mask; later positions masked out).
        temperature, top_p: sampling settings (``temperature = 0``: greedy, every completion in a group equal).
            Seed torch's RNG beforehand for a repeatable batch.

    Returns:
        :class:`Rollouts` with ``C = max_new_tokens`` (short generations are right-padded with ``pad_token_id``).
    """
    ids = prompt_ids.repeat_interleave(group_size, 0)
    mask = prompt_mask.repeat_interleave(group_size, 0)
    config = copy.deepcopy(model.generation_config)
    config.max_new_tokens, config.min_new_tokens, config.do_sample = max_new_tokens, 0, temperature > 0
    config.temperature, config.top_p = (temperature, top_p) if temperature > 0 else (None, None)
    config.top_k, config.pad_token_id, config.eos_token_id = None, pad_token_id, list(eos_token_ids)
    was_training = model.training
    model.eval()
    out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    model.train(was_training)
    tokens = out[:, ids.shape[1] :]
    if tokens.shape[1] < max_new_tokens:
        tokens = torch.cat(
            [tokens, tokens.new_full((tokens.shape[0], max_new_tokens - tokens.shape[1]), pad_token_id)], 1
        )
    keep = completion_mask(tokens, eos_token_ids)
    tokens = torch.where(keep.bool(), tokens, torch.full_like(tokens, pad_token_id))
    return Rollouts(ids, mask, tokens, keep, group_size)


def completion_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    n_completion: int,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Log-probability of each of the last ``n_completion`` tokens under ``model`` (left padding respected).

    Args:
        input_ids, attention_mask: ``[N, P + C]`` (e.g. ``Rollouts.input_ids``).
        n_completion: ``C``.
        temperature: logits are divided by it first, as the sampler did (TRL does the same).

    Returns:
        ``[N, C]`` log-probabilities (nats); entries at masked positions are meaningless, mask them.
    """
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    logits = model(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
    ).logits
    logits = logits[:, -n_completion - 1 : -1].float() / temperature
    targets = input_ids[:, -n_completion:]
    return torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def group_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-4, scale: bool = True) -> torch.Tensor:
    """GRPO advantages ``A_i = (r_i - mean_g r) / (std_g r + eps)`` inside each group of ``G`` rows.

    ``std`` is the unbiased sample standard deviation, as in TRL; ``scale=False`` gives ``r_i - mean_g r``
    (Dr. GRPO). A group whose rewards are all equal gets zero advantages.

    Args:
        rewards: ``[N]`` with ``N`` a multiple of ``group_size``; rows grouped consecutively.

    Raises:
        ValueError: ``N`` is not a multiple of ``group_size``, or ``group_size < 2``.
    """
    if group_size < 2 or rewards.numel() % group_size:
        raise ValueError(f"group_size {group_size} must be >= 2 and divide the {rewards.numel()} rewards")
    grouped = rewards.float().view(-1, group_size)
    centred = grouped - grouped.mean(1, keepdim=True)
    if scale:
        centred = centred / (grouped.std(1, keepdim=True) + eps)
    return centred.reshape(-1)


def kl3(logp_target: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of ``KL(π ‖ target)`` per sampled token: ``exp(t - l) - (t - l) - 1``.

    Args:
        logp_target: log-probabilities of the sampled tokens under the target (reference) model.
        logp: the same tokens' log-probabilities under the sampling policy ``π``.

    Returns:
        Same shape, every entry ``>= 0``, ``0`` where the two agree.
    """
    d = logp_target - logp
    return torch.exp(d) - d - 1


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    beta: float = 0.0,
    ref_logprobs: torch.Tensor | None = None,
    loss_type: str = "grpo",
) -> tuple[torch.Tensor, dict[str, float]]:
    """The GRPO clipped surrogate (DeepSeekMath eq. 3), as TRL computes it.

    Per token: ``-min(ρ A, clip(ρ, 1-ε, 1+ε_high) A) + β k3(π_ref, π_θ)`` with ``ρ = exp(logπ_θ - logπ_old)``.
    ``loss_type``: ``"grpo"`` averages over each completion's tokens, then over completions; ``"bnpo"`` averages
    over all tokens of the batch; ``"dr_grpo"`` sums and divides by ``N * C``.

    Args:
        logprobs: ``[N, C]`` current policy (with grad).
        old_logprobs: ``[N, C]`` the policy that sampled (no grad); equal to ``logprobs`` on the first update.
        advantages: ``[N]`` sequence-level or ``[N, C]`` token-level.
        mask: ``[N, C]`` completion mask.
        beta, ref_logprobs: KL weight and the reference's ``[N, C]`` log-probs (required when ``beta > 0``).

    Returns:
        ``(loss, stats)``; stats: ``clip_fraction`` (share of masked tokens whose surrogate is clipped),
        ``ratio_mean``, ``kl`` (masked mean k3, 0 without a reference).

    Raises:
        ValueError: unknown ``loss_type``, or ``beta > 0`` without ``ref_logprobs``.
    """
    if beta and ref_logprobs is None:
        raise ValueError("beta > 0 needs ref_logprobs")
    mask = mask.to(logprobs.dtype)
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logprobs - old_logprobs)
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + (epsilon if epsilon_high is None else epsilon_high))
    per_token = -torch.min(ratio * adv, clipped * adv)
    kl = kl3(ref_logprobs, logprobs) if ref_logprobs is not None else torch.zeros_like(logprobs)
    if beta:
        per_token = per_token + beta * kl
    if loss_type == "grpo":
        loss = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    elif loss_type == "bnpo":
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    elif loss_type == "dr_grpo":
        loss = (per_token * mask).sum() / mask.numel()
    else:
        raise ValueError(f"loss_type {loss_type!r}: expected grpo, bnpo or dr_grpo")
    with torch.no_grad():
        n = mask.sum().clamp(min=1.0)
        is_clipped = ((ratio * adv) > (clipped * adv)).to(mask.dtype)
        stats = {
            "clip_fraction": float((is_clipped * mask).sum() / n),
            "ratio_mean": float((ratio * mask).sum() / n),
            "kl": float((kl * mask).sum() / n),
        }
    return loss, stats


def policy_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    rollouts: Rollouts,
    advantages: torch.Tensor,
    updates: int = 2,
    backward: Callable[[torch.Tensor], None] | None = None,
    ref_logprobs: torch.Tensor | None = None,
    extra_loss: Callable[[], torch.Tensor] | None = None,
    max_grad_norm: float | None = None,
    temperature: float = 1.0,
    **loss_kwargs,
) -> list[dict[str, float]]:
    """``μ = updates`` optimiser steps on one batch of rollouts (GRPO's inner loop; TRL's ``num_iterations``).

    The sampling policy's log-probs are taken once before the first step, so the importance ratio is 1 on the
    first update and the clipping can only act from the second one on (at ``μ = 1`` GRPO never clips).

    Args:
        model, optimizer: the policy and its optimiser (under Lightning manual optimisation pass
            ``self.optimizers()`` and ``backward=self.manual_backward``).
        rollouts: from :func:`sample_rollouts`.
        advantages: ``[N]`` or ``[N, C]``.
        backward: how to back-propagate a loss (default ``loss.backward()``).
        ref_logprobs: ``[N, C]`` reference log-probs for ``loss_kwargs["beta"] > 0``.
        extra_loss: called at each update; its value is added to the loss (RLCracker's NLL term).
        max_grad_norm: clip the gradient norm of the optimiser's parameters before each step.
        loss_kwargs: forwarded to :func:`policy_loss` (``epsilon``, ``epsilon_high``, ``beta``, ``loss_type``).

    Returns:
        One stats dict per update (:func:`policy_loss`'s plus ``loss``, and ``extra_loss`` when given).
    """
    backward = backward or (lambda loss: loss.backward())
    ids, mask, n = rollouts.input_ids, rollouts.attention_mask, rollouts.completion_ids.shape[1]
    with torch.no_grad():
        old = completion_logprobs(model, ids, mask, n, temperature)
    history = []
    for _ in range(updates):
        optimizer.zero_grad()
        logprobs = completion_logprobs(model, ids, mask, n, temperature)
        loss, stats = policy_loss(
            logprobs, old, advantages, rollouts.completion_mask, ref_logprobs=ref_logprobs, **loss_kwargs
        )
        if extra_loss is not None:
            extra = extra_loss()
            stats["extra_loss"] = float(extra.detach())
            loss = loss + extra
        backward(loss)
        if max_grad_norm is not None:
            params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        optimizer.step()
        history.append({"loss": float(loss.detach()), **stats})
    return history
