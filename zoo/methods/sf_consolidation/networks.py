"""Networks: the Simple-SF value net (paper §2.2, Chua et al. "learning successor features the simple way") and a
plain Q net with the same body, for discrete actions (DQN) or for a state-action input (TD3 critics), and the TD3
actor.

Simple SF: a body gives ``z``; ``h = W_h z`` and the basis features ``phi = normalize(h)`` under stop-gradient; the
SF head gives ``psi(s, a)`` in R^d for every action; ``Q(s, a) = psi(s, a)^T w`` with ``w`` a separate parameter
learned by reward regression. The output head is an :class:`InjectableHead` so plasticity injection (Nikishin et
al. 2023) can add a fresh head without changing the state-dict keys.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class InjectableHead(nn.Module):
    """Linear head; after :meth:`inject`, ``y = base(x) + new(x) - new0(x)`` with ``base`` and ``new0`` frozen,
    so the output is unchanged at injection and only the fresh head ``new`` learns (Nikishin et al. 2023)."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.base, self.new, self.new0 = nn.Linear(d_in, d_out), nn.Linear(d_in, d_out), nn.Linear(d_in, d_out)
        self.new0.load_state_dict(self.new.state_dict())
        self.new0.requires_grad_(False)
        self.register_buffer("injected", torch.zeros((), dtype=torch.bool))
        self.register_load_state_dict_post_hook(lambda m, _keys: m.sync_grad_flags())

    def forward(self, x):
        y = self.base(x)
        return y + self.new(x) - self.new0(x) if bool(self.injected) else y

    @torch.no_grad()
    def inject(self) -> None:
        """Freeze ``base``, draw a fresh ``new`` and copy it into ``new0``."""
        self.base.requires_grad_(False)
        self.new.reset_parameters()
        self.new0.load_state_dict(self.new.state_dict())
        self.injected.fill_(True)
        self.sync_grad_flags()

    def sync_grad_flags(self) -> None:
        """Frozen parts follow ``injected`` (after loading a state dict)."""
        self.base.requires_grad_(not bool(self.injected))
        self.new.requires_grad_(bool(self.injected))
        self.new0.requires_grad_(False)


class ValueNet(nn.Module):
    """SF or Q network.

    Args:
        obs_shape: ``(D,)`` vector or ``(3, H, W)`` image observations (a 2-layer CNN then).
        n_actions: discrete actions (outputs per action); 1 with ``action_dim > 0`` (a critic of ``(s, a)``).
        kind: ``sf`` (outputs ``psi (B, A, d)`` and ``phi (B, d)``) or ``q`` (outputs ``Q (B, A)``).
        feature_dim: ``d``.
        hidden: body widths, e.g. ``[64, 64]``.
        action_dim: continuous action size concatenated to the observation (TD3 critic), else 0.
    """

    def __init__(
        self,
        obs_shape: tuple[int, ...],
        n_actions: int,
        kind: str = "sf",
        feature_dim: int = 32,
        hidden: tuple[int, ...] = (64, 64),
        action_dim: int = 0,
    ):
        super().__init__()
        if kind not in ("sf", "q"):
            raise ValueError(f"model.critic must be 'sf' or 'q', got {kind!r}")
        self.kind, self.n_actions, self.d = kind, int(n_actions), int(feature_dim)
        if len(obs_shape) == 3:
            conv = nn.Sequential(
                nn.Conv2d(obs_shape[0], 16, 8, 4), nn.ReLU(), nn.Conv2d(16, 32, 4, 2), nn.ReLU(), nn.Flatten()
            )
            with torch.no_grad():
                n_in = conv(torch.zeros(1, *obs_shape)).shape[1]
            self.conv = conv
        else:
            self.conv, n_in = None, int(obs_shape[0]) + int(action_dim)
        layers, d = [], n_in
        for width in hidden:
            layers += [nn.Linear(d, width), nn.ReLU()]
            d = width
        self.body = nn.Sequential(*layers)
        if kind == "sf":
            self.feat = nn.Linear(d, self.d)
            self.head = InjectableHead(d, self.n_actions * self.d)
        else:
            self.head = InjectableHead(d, self.n_actions)

    def _z(self, obs, action=None):
        x = self.conv(obs) if self.conv is not None else obs
        if action is not None:
            x = torch.cat([x, action], -1)
        return self.body(x)

    def forward(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        """``sf``: ``(psi (B, A, d), phi (B, d))`` with ``phi`` detached; ``q``: ``(Q (B, A), None)``."""
        z = self._z(obs, action)
        if self.kind == "q":
            return self.head(z), None
        psi = self.head(z).view(-1, self.n_actions, self.d)
        phi = F.normalize(self.feat(z), dim=-1).detach()
        return psi, phi

    def q_values(self, obs: torch.Tensor, w: torch.Tensor | None, action: torch.Tensor | None = None):
        """``Q (B, A)``: ``psi^T w`` for ``sf``, the head for ``q``."""
        out, _ = self(obs, action)
        return out if self.kind == "q" else out @ w

    def last_two_layers(self) -> list[nn.Module]:
        """What a reset re-initialises: the last body layer and the output head(s) (ours: 'last two layers')."""
        last = [m for m in self.body if isinstance(m, nn.Linear)][-1]
        return [last, self.head.base] + ([self.feat] if self.kind == "sf" else [])


class Actor(nn.Module):
    """TD3 actor ``a = tanh(MLP(s))`` scaled to ``[-1, 1]^A`` (gymnasium's HalfCheetah bounds)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...] = (64, 64)):
        super().__init__()
        layers, d = [], obs_dim
        for width in hidden:
            layers += [nn.Linear(d, width), nn.ReLU()]
            d = width
        self.net = nn.Sequential(*layers, nn.Linear(d, action_dim), nn.Tanh())

    def forward(self, obs):
        return self.net(obs)
