"""Targets and losses (paper §2.3, "as implemented" Simple SF).

* n-step double DQN target: ``y = R_n + gamma_n * Q_target(s_n, argmax_a Q_online(s_n, a))`` where the replay
  buffer stores ``R_n = sum_{j<k} gamma^j r_{t+j}`` and ``gamma_n = gamma^k (1 - terminal)`` (``k <= n`` steps
  taken before the episode ended);
* ``L_psi = E[huber_10(y - psi(s_t, a_t)^T w)]`` (= ``1/2 delta^2`` for ``|delta| <= 10``: the TD error clipped
  to +-10 in the gradient);
* ``L_w = E[1/2 (phi(s_{t+1})^T w - r_{t+1})^2]`` with ``phi`` under stop-gradient;
* classical SF TD target (Barreto et al. 2017; an optional auxiliary loss, ``model.psi_td_weight``):
  ``psi(s, a) <- phi(s) + gamma_n psi_target(s', a*)``, whose tabular fixed point is ``(I - gamma P^pi)^-1 Phi``;
* TD3 target: ``y = r + gamma (1 - terminal) min_i Q_i'(s', clip(mu'(s') + clip(eps, -c, c), -1, 1))``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def n_step_double_dqn_target(
    returns: torch.Tensor, discounts: torch.Tensor, next_q_online: torch.Tensor, next_q_target: torch.Tensor
) -> torch.Tensor:
    """Double-DQN n-step target ``(B,)``.

    Args:
        returns: ``R_n (B,)``; discounts: ``gamma^k (1 - terminal) (B,)``;
        next_q_online / next_q_target: ``Q(s_n, .) (B, A)`` of the online and the target network.
    """
    a_star = next_q_online.argmax(-1, keepdim=True)
    return returns + discounts * next_q_target.gather(-1, a_star).squeeze(-1)


def td_loss(q_taken: torch.Tensor, target: torch.Tensor, clip: float = 10.0) -> torch.Tensor:
    """``mean huber_clip(target - q)``: ``1/2 delta^2`` inside ``|delta| <= clip``, linear outside."""
    return F.huber_loss(q_taken, target.detach(), delta=clip)


def reward_loss(phi_next: torch.Tensor, w: torch.Tensor, reward: torch.Tensor) -> torch.Tensor:
    """``L_w = mean 1/2 (phi(s')^T w - r)^2``; ``phi_next (B, d)`` (detached), ``w (d,)``, ``reward (B,)``."""
    return 0.5 * (phi_next.detach() @ w - reward).pow(2).mean()


def n_step_return(rewards: list[float], gamma: float) -> float:
    """``sum_j gamma^j r_j`` of the rewards collected over (at most n) steps."""
    return float(sum(r * gamma**j for j, r in enumerate(rewards)))


def sf_bellman_target(phi: torch.Tensor, psi_next: torch.Tensor, discount: torch.Tensor) -> torch.Tensor:
    """Classical SF target ``phi(s) + discount * psi(s', a*)``: ``phi (B, d)``, ``psi_next (B, d)``, ``discount (B,)``."""
    return phi + discount[:, None] * psi_next


def td3_target(
    reward: torch.Tensor, discount: torch.Tensor, q1_next: torch.Tensor, q2_next: torch.Tensor
) -> torch.Tensor:
    """Clipped double-Q target ``r + discount * min(Q1', Q2')`` ``(B,)`` (``discount = gamma (1 - terminal)``)."""
    return reward + discount * torch.minimum(q1_next, q2_next)
