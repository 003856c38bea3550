"""Baselines (paper §2.6): online EWC, resets, plasticity injection (the last two live on the networks:
``ValueNet.last_two_layers`` and ``InjectableHead``), and stable-baselines3 DQN / TD3 under the same drift as the
outside reference.

Online EWC (Kirkpatrick et al. 2017; online Fisher as in the authors' ``helpers/ewc.py``): every ``period``
learning steps the anchor becomes the current parameters and ``F <- gamma_F F + F_new``, where ``F_new`` is the mean
squared gradient of the TD loss over the learning steps since the last anchor; the penalty is
``lambda/2 sum_i F_i (theta_i - theta*_i)^2``.
"""

from __future__ import annotations

import torch
from torch import nn


class OnlineEWC(nn.Module):
    """Online EWC state for ``net``'s parameters (buffers, saved with the module).

    Args:
        lam: penalty weight ``lambda``; gamma_f: Fisher decay; period: learning steps between anchors.
    """

    def __init__(self, net: nn.Module, lam: float = 100.0, gamma_f: float = 0.9, period: int = 1000):
        super().__init__()
        self.lam, self.gamma_f, self.period = float(lam), float(gamma_f), int(period)
        self.names = [n for n, _ in net.named_parameters()]
        for n, p in net.named_parameters():
            key = n.replace(".", "__")
            self.register_buffer("fisher__" + key, torch.zeros_like(p))
            self.register_buffer("acc__" + key, torch.zeros_like(p))
            self.register_buffer("anchor__" + key, p.detach().clone())
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def _get(self, kind: str, name: str) -> torch.Tensor:
        return getattr(self, f"{kind}__" + name.replace(".", "__"))

    def penalty(self, net: nn.Module) -> torch.Tensor:
        """``lambda/2 sum F (theta - theta*)^2`` (a scalar with gradient to ``net``)."""
        total = torch.zeros(())
        for n, p in net.named_parameters():
            total = total + (self._get("fisher", n) * (p - self._get("anchor", n)).pow(2)).sum()
        return 0.5 * self.lam * total

    @torch.no_grad()
    def accumulate(self, net: nn.Module) -> None:
        """Add the current gradients squared (call after backward of the task loss); re-anchor every ``period``."""
        for n, p in net.named_parameters():
            if p.grad is not None:
                self._get("acc", n).add_(p.grad.pow(2))
        self.count += 1
        if int(self.count) % self.period == 0:
            for n, p in net.named_parameters():
                f = self._get("fisher", n)
                f.mul_(self.gamma_f).add_(self._get("acc", n) / self.period)
                self._get("acc", n).zero_()
                self._get("anchor", n).copy_(p.detach())


@torch.no_grad()
def reset_layers(layers: list[nn.Module]) -> None:
    """Re-initialise ``layers`` (``reset_parameters``), the 'resets' baseline (Nikishin et al. 2022)."""
    for m in layers:
        m.reset_parameters()


def sb3_reference(
    env,
    algo: str,
    steps: int,
    seed: int = 0,
    hidden: tuple[int, ...] = (64, 64),
    batch_size: int = 128,
    train_freq: int = 2,
    learning_starts: int = 1000,
    gamma: float = 0.99,
    lr: float = 1e-3,
):
    """Train stable-baselines3 ``DQN`` or ``TD3`` on ``env`` (a :class:`~.envs.DriftWrapper`, so the same drift
    applies) with our net sizes, batch and update schedule; returns the trained model.

    Raises:
        ValueError: an unknown ``algo``.
    """
    if algo == "dqn":
        from stable_baselines3 import DQN

        model = DQN(
            "MlpPolicy",
            env,
            learning_rate=lr,
            buffer_size=max(steps, 1000),
            learning_starts=learning_starts,
            batch_size=batch_size,
            gamma=gamma,
            train_freq=train_freq,
            gradient_steps=1,
            target_update_interval=1000,
            exploration_fraction=0.1,
            exploration_final_eps=0.05,
            policy_kwargs={"net_arch": list(hidden)},
            seed=seed,
            device="cpu",
        )
    elif algo == "td3":
        import numpy as np
        from stable_baselines3 import TD3
        from stable_baselines3.common.noise import NormalActionNoise

        n = env.action_space.shape[0]
        model = TD3(
            "MlpPolicy",
            env,
            learning_rate=lr,
            buffer_size=max(steps, 1000),
            learning_starts=learning_starts,
            batch_size=batch_size,
            gamma=gamma,
            train_freq=train_freq,
            gradient_steps=1,
            action_noise=NormalActionNoise(np.zeros(n), 0.1 * np.ones(n)),
            policy_kwargs={"net_arch": list(hidden)},
            seed=seed,
            device="cpu",
        )
    else:
        raise ValueError(f"algo must be 'dqn' or 'td3', got {algo!r}")
    model.learn(total_timesteps=steps)
    return model
