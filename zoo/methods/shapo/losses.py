"""Stage B of ShaPO: the preference objectives and the batch aggregators.

Every function takes per-example sequence log-probabilities (shape ``(B,)``, natural log, summed over the
response tokens unless stated otherwise) and returns per-example losses of shape ``(B,)``; ``aggregate``
turns those into the scalar that is back-propagated. The formulas follow the authors' ``preference_loss``
(trainers.py of liujilong0116/ShaPO) and the papers each one cites; see README.md "Stage B".
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

LOSSES = ("dpo", "ipo", "rdpo", "simpo")
AGGREGATIONS = ("mean", "drdpo")


def preference_logits(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    ref_chosen: torch.Tensor | None,
    ref_rejected: torch.Tensor | None,
) -> torch.Tensor:
    """The implicit-reward difference h (DPO, Rafailov et al. 2023, Eq. 7).

    h = [log pi(y_w|x) - log pi_ref(y_w|x)] - [log pi(y_l|x) - log pi_ref(y_l|x)].

    Args:
        policy_chosen, policy_rejected: ``(B,)`` policy log-probabilities of y_w and y_l.
        ref_chosen, ref_rejected: ``(B,)`` reference log-probabilities, or both ``None`` for the
            reference-free form (a uniform reference).

    Returns:
        ``(B,)`` h, in nats.
    """
    h = policy_chosen - policy_rejected
    if ref_chosen is None or ref_rejected is None:
        if (ref_chosen is None) != (ref_rejected is None):
            raise ValueError("pass both reference log-probabilities or neither")
        return h
    return h - (ref_chosen - ref_rejected)


def dpo_loss(h: torch.Tensor, beta: float, label_smoothing: float = 0.0) -> torch.Tensor:
    """DPO with conservative label smoothing (cDPO, Mitchell 2023, Eq. 3; DPO Eq. 7 when eps = 0).

    loss = -(1 - eps) log sigma(beta h) - eps log sigma(-beta h).

    Args:
        h: ``(B,)`` from :func:`preference_logits`.
        beta: KL strength (> 0).
        label_smoothing: eps in [0, 0.5), the assumed flip probability.

    Returns:
        ``(B,)`` losses.

    Raises:
        ValueError: eps outside [0, 0.5).
    """
    if not 0.0 <= label_smoothing < 0.5:
        raise ValueError(f"label_smoothing must be in [0, 0.5), got {label_smoothing}")
    return -(1 - label_smoothing) * F.logsigmoid(beta * h) - label_smoothing * F.logsigmoid(-beta * h)


def ipo_loss(h: torch.Tensor, beta: float) -> torch.Tensor:
    """IPO (Azar et al. 2023, Eq. 17): (h - 1/(2 beta))^2 on summed log-probabilities, as in the authors' code.

    Returns:
        ``(B,)`` losses.
    """
    return (h - 1.0 / (2.0 * beta)) ** 2


def rdpo_loss(h: torch.Tensor, beta: float, epsilon: float) -> torch.Tensor:
    """Robust DPO (rDPO, Chowdhury et al. 2024, the unbiased loss): the unbiased loss under a known flip rate epsilon.

    loss = [(1 - eps) (-log sigma(beta h)) - eps (-log sigma(-beta h))] / (1 - 2 eps).

    Returns:
        ``(B,)`` losses (can be negative).

    Raises:
        ValueError: eps outside [0, 0.5).
    """
    if not 0.0 <= epsilon < 0.5:
        raise ValueError(f"rdpo epsilon must be in [0, 0.5), got {epsilon}")
    l_wl, l_lw = -F.logsigmoid(beta * h), -F.logsigmoid(-beta * h)
    return ((1 - epsilon) * l_wl - epsilon * l_lw) / (1 - 2 * epsilon)


def simpo_logits(avg_chosen: torch.Tensor, avg_rejected: torch.Tensor, gamma_beta_ratio: float) -> torch.Tensor:
    """SimPO's reward margin (Meng et al. 2024) divided by beta: (avg log pi(y_w) - avg log pi(y_l)) - gamma/beta.

    Args:
        avg_chosen, avg_rejected: ``(B,)`` length-averaged (per response token) policy log-probabilities;
            SimPO uses no reference model.
        gamma_beta_ratio: gamma / beta, the target margin in units of beta.

    Returns:
        ``(B,)`` logits; the SimPO loss is ``dpo_loss(logits, beta)``.
    """
    return avg_chosen - avg_rejected - gamma_beta_ratio


def reward_preference_probability(
    cost_chosen: torch.Tensor, cost_rejected: torch.Tensor, reward_beta: float
) -> torch.Tensor:
    """The reward-level soft label p* = sigma(beta_r (c(x, y_l) - c(x, y_w))) (reward-level ShaPO).

    c is a cost (higher = more harmful), so p* is the probability that y_w is the safer reply.

    Args:
        cost_chosen, cost_rejected: ``(B,)`` costs c(x, y_w), c(x, y_l) from the cost model.
        reward_beta: beta_r > 0, the temperature of the cost difference.

    Returns:
        ``(B,)`` p* in (0, 1), detached.
    """
    return torch.sigmoid(reward_beta * (cost_rejected - cost_chosen)).detach()


def soft_label_loss(h: torch.Tensor, beta: float, p_star: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy between p* and p_theta = sigma(beta h) (reward-level ShaPO).

    loss = -[p* log sigma(beta h) + (1 - p*) log sigma(-beta h)]. The authors write log(p + 1e-12) and
    log(1 - p + 1e-12); we use logsigmoid, the same function without the epsilon (ours: numerics only).

    Args:
        h: ``(B,)`` from :func:`preference_logits`.
        beta: DPO beta.
        p_star: ``(B,)`` target probabilities in [0, 1].

    Returns:
        ``(B,)`` losses.
    """
    return -(p_star * F.logsigmoid(beta * h) + (1 - p_star) * F.logsigmoid(-beta * h))


def aggregate(losses: torch.Tensor, mode: str = "mean", beta_prime: float = 1.0) -> torch.Tensor:
    """Reduce per-example losses ``(B,)`` to a scalar.

    ``mean``: the batch mean. ``drdpo``: Dr.DPO's distributionally robust log-sum-exp (Wu et al. 2025, the Dr.DPO objective),
    L = -beta' log( (1/B) sum_i exp(-l_i / beta') ), computed with logsumexp.

    Raises:
        ValueError: unknown mode or beta' <= 0.
    """
    if mode == "mean":
        return losses.mean()
    if mode == "drdpo":
        if beta_prime <= 0:
            raise ValueError(f"drdpo beta_prime must be > 0, got {beta_prime}")
        return -beta_prime * (torch.logsumexp(-losses / beta_prime, dim=0) - math.log(losses.numel()))
    raise ValueError(f"unknown aggregation {mode!r}; choose from {AGGREGATIONS}")


def preference_losses(
    loss: str,
    beta: float,
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    ref_chosen: torch.Tensor | None,
    ref_rejected: torch.Tensor | None,
    avg_chosen: torch.Tensor | None = None,
    avg_rejected: torch.Tensor | None = None,
    label_smoothing: float = 0.0,
    rdpo_epsilon: float = 0.1,
    simpo_gamma_beta_ratio: float = 0.5,
    p_star: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-example losses ``(B,)`` of one objective; the reward-level soft label replaces it when p* is given.

    Args:
        loss: one of ``dpo``, ``ipo``, ``rdpo``, ``simpo``.
        beta: DPO beta.
        policy_chosen .. ref_rejected: ``(B,)`` summed log-probabilities (references may be ``None``).
        avg_chosen, avg_rejected: ``(B,)`` length-averaged policy log-probabilities (SimPO only).
        label_smoothing, rdpo_epsilon, simpo_gamma_beta_ratio: the variants' constants.
        p_star: ``(B,)`` soft labels; when given the loss is :func:`soft_label_loss` on the DPO h, as in the
            authors' code (which ignores ``loss`` when ``use_reward`` is on).

    Raises:
        ValueError: unknown loss, or SimPO without averaged log-probabilities.
    """
    if loss not in LOSSES:
        raise ValueError(f"unknown preference loss {loss!r}; choose from {LOSSES}")
    if loss == "simpo":
        if avg_chosen is None or avg_rejected is None:
            raise ValueError("simpo needs length-averaged log-probabilities")
        h = simpo_logits(avg_chosen, avg_rejected, simpo_gamma_beta_ratio)
    else:
        h = preference_logits(policy_chosen, policy_rejected, ref_chosen, ref_rejected)
    if p_star is not None:
        return soft_label_loss(h, beta, p_star)
    if loss == "ipo":
        return ipo_loss(h, beta)
    if loss == "rdpo":
        return rdpo_loss(h, beta, rdpo_epsilon)
    return dpo_loss(h, beta, label_smoothing)
