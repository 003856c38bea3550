"""The four GRPO rewards of Spurious Rewards (Shao et al. 2025, §2), on chain_sum replies.

Each reward maps ``(completions, items, generator)`` to a ``[N]`` float tensor of 0/1 rewards; ``items[i]`` is the
prompt item (``{"question", "answer"}``) of ``completions[i]``.
"""

from __future__ import annotations

import torch

from zoo.methods.anchor_adapter.chain_sum import is_correct, wrong_label

REWARDS = ("ground_truth", "random", "incorrect", "format")


def ground_truth(completions: list[str], items: list[dict], generator=None) -> torch.Tensor:
    """1 when math-verify finds the gold answer in the completion."""
    return torch.tensor([float(is_correct(c, it["answer"])) for c, it in zip(completions, items)])


def random_reward(completions: list[str], items: list[dict], generator=None) -> torch.Tensor:
    """Bernoulli(0.5), independent of the completion (seeded by ``generator``)."""
    return torch.bernoulli(torch.full((len(completions),), 0.5), generator=generator)


def incorrect_label(completions: list[str], items: list[dict], generator=None) -> torch.Tensor:
    """1 when the completion states the item's fixed wrong label (:func:`chain_sum.wrong_label`, ours)."""
    return torch.tensor([float(is_correct(c, wrong_label(it))) for c, it in zip(completions, items)])


def format_reward(completions: list[str], items: list[dict], generator=None) -> torch.Tensor:
    """1 when the completion contains ``\\boxed{``."""
    return torch.tensor([float("\\boxed{" in c) for c in completions])


def get_reward(name: str):
    """The reward function called ``name`` (one of :data:`REWARDS`).

    Raises:
        ValueError: unknown name.
    """
    table = {
        "ground_truth": ground_truth,
        "random": random_reward,
        "incorrect": incorrect_label,
        "format": format_reward,
    }
    if name not in table:
        raise ValueError(f"model.reward: {name!r} is not one of {', '.join(REWARDS)}")
    return table[name]
