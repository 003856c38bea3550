"""``SFConsolidationModule``: Simple SF (discrete, n-step double DQN) or TD3 with an SF critic (continuous), with
Benna-Fusi consolidation of the value network's parameters (paper §2.2-2.4) and the baselines of §2.6.

``model.critic`` picks the value net (``sf``: ``Q = psi^T w``; ``q``: a plain Q head) and ``model.consolidation``
what keeps it stable: ``multi`` (K beakers), ``single`` (K = 2), ``none`` (plain DQN/TD3 or plain SF), ``ewc``
(online EWC), ``reset`` (last two layers every ``reset_every`` env steps) or ``injection`` (plasticity injection at
``inject_at``). Manual optimisation: each training step is one learning step on a replay batch, then the beaker
update; the datamodule steps the env with :meth:`act` in between.
"""

from __future__ import annotations

import copy
from typing import Annotated, ClassVar, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from zoo.core.constraints import Discount, NonNegative, NonNegativeInt, OneOf, Positive, PositiveInt, Probability, Range
from zoo.core.module import ZooModule
from zoo.core.registry import register_method
from zoo.methods.sf_consolidation.baselines import OnlineEWC, reset_layers
from zoo.methods.sf_consolidation.beakers import BeakerChain
from zoo.methods.sf_consolidation.datamodule import DriftDataModule
from zoo.methods.sf_consolidation.envs import env_spaces
from zoo.methods.sf_consolidation.losses import (
    n_step_double_dqn_target,
    reward_loss,
    sf_bellman_target,
    td3_target,
    td_loss,
)
from zoo.methods.sf_consolidation.networks import Actor, ValueNet
from zoo.methods.sf_consolidation.reporting import ReportingMixin

CONSOLIDATIONS = ("multi", "single", "none", "ewc", "reset", "injection")


@register_method("sf-consolidation", datamodule=DriftDataModule)
class SFConsolidationModule(ReportingMixin, ZooModule):
    """Args:
    env: environment name (sizes the networks; must equal ``data.env``).
    critic: ``sf`` | ``q``.  consolidation: one of :data:`CONSOLIDATIONS`.
    num_beakers, g, capacity_base, leak: the beaker chain (``g = None``: ``0.1 / C_1``).
    feature_dim, hidden: SF dimension ``d`` and body widths.
    lr: Adam learning rate (value net and ``w``; TD3 actor too).
    gamma: discount.  target_every: learning steps between hard target copies (DQN).
    eps_start, eps_end, eps_decay: epsilon-greedy schedule over env steps.
    eps_eval: epsilon of the greedy policy at evaluation.
    ewc_lambda, ewc_gamma, ewc_period: online EWC.  reset_every: env steps between resets.
    inject_at: env step of plasticity injection.
    tau, policy_delay, expl_noise, target_noise, noise_clip: TD3.
    obs_size: Miniworld image side.  grid_size: Four Rooms side (must equal ``data.grid_size``).
    eval_every, eval_episodes: evaluation under the current dynamics (env steps, episodes).
    psi_td_weight: weight of the classical SF TD loss on ``psi`` (discrete ``sf``; 0 = Simple SF as in the paper).
    """

    weight_settings: ClassVar[dict[str, str]] = {
        "env": "model.env",
        "critic": "model.critic",
        "consolidation": "model.consolidation",
        "grid_size": "model.grid_size",
    }

    def __init__(
        self,
        env: str = "fourrooms",
        critic: Literal["sf", "q"] = "sf",
        consolidation: Annotated[str, OneOf(CONSOLIDATIONS)] = "multi",
        num_beakers: PositiveInt = 5,
        g: Positive | None = None,
        capacity_base: Positive = 2.0,
        leak: bool = True,
        feature_dim: PositiveInt = 32,
        hidden: list[PositiveInt] | None = None,
        lr: Positive = 5e-4,
        gamma: Discount = 0.99,
        target_every: PositiveInt = 250,
        eps_start: Probability = 1.0,
        eps_end: Probability = 0.05,
        eps_decay: PositiveInt = 10000,
        eps_eval: Probability = 0.05,
        ewc_lambda: NonNegative = 100.0,
        ewc_gamma: Probability = 0.9,
        ewc_period: PositiveInt = 500,
        reset_every: PositiveInt = 50000,
        inject_at: NonNegativeInt = 25000,
        tau: Annotated[float, Range(0, 1, min_open=True)] = 0.005,
        policy_delay: PositiveInt = 2,
        expl_noise: NonNegative = 0.1,
        target_noise: NonNegative = 0.2,
        noise_clip: NonNegative = 0.5,
        obs_size: PositiveInt = 60,
        eval_every: PositiveInt = 5000,
        eval_episodes: PositiveInt = 5,
        psi_td_weight: NonNegative = 0.0,
        grid_size: PositiveInt = 19,
    ):
        super().__init__()
        if consolidation not in CONSOLIDATIONS:
            raise ValueError(f"model.consolidation: unknown {consolidation!r}; choices {list(CONSOLIDATIONS)}")
        self.save_hyperparameters()
        self.automatic_optimization = False
        hidden = tuple(hidden or (64, 64))
        obs_shape, n_actions, action_dim = env_spaces(env, obs_size, grid_size)
        self.discrete = n_actions > 0
        self.action_dim = action_dim
        if self.discrete:
            self.nets = nn.ModuleList([ValueNet(obs_shape, n_actions, critic, feature_dim, hidden)])
        else:
            self.nets = nn.ModuleList(
                [ValueNet(obs_shape, 1, critic, feature_dim, hidden, action_dim) for _ in range(2)]
            )
            self.actor = Actor(obs_shape[0], action_dim, hidden)
            self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.targets = copy.deepcopy(self.nets).requires_grad_(False)
        self.w = nn.Parameter(torch.randn(feature_dim) * 0.1) if critic == "sf" else None
        k = {"multi": num_beakers, "single": 2}.get(consolidation)
        self.chains = nn.ModuleList([BeakerChain(n, k, g, capacity_base, leak) for n in self.nets]) if k else None
        self.ewc = (
            nn.ModuleList([OnlineEWC(n, ewc_lambda, ewc_gamma, ewc_period) for n in self.nets])
            if consolidation == "ewc"
            else None
        )
        self.register_buffer("learn_steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("resets_done", torch.zeros((), dtype=torch.long))
        self.history: list[dict] = []

    # ---- acting -----------------------------------------------------------------------------------------------
    def q_values(self, obs: torch.Tensor, net: nn.Module | None = None) -> torch.Tensor:
        """``Q (B, A)`` of the online net (or ``net``, e.g. a beaker copy) for discrete envs."""
        return (net or self.nets[0]).q_values(obs, self.w)

    def epsilon(self, t: int) -> float:
        hp = self.hparams
        return max(hp.eps_end, hp.eps_start - (hp.eps_start - hp.eps_end) * t / max(hp.eps_decay, 1))

    @torch.no_grad()
    def act(self, obs: np.ndarray, t: int | None = None, net: nn.Module | None = None, greedy: bool = False):
        """Action for one observation: epsilon-greedy on Q (discrete; ``eps_eval`` when ``t`` is None) or the actor
        plus Gaussian noise (continuous; uniform before ``warmup``, none when ``greedy``)."""
        rng = np.random
        if self.discrete:
            eps = 0.0 if greedy else (self.hparams.eps_eval if t is None else self.epsilon(t))
            if rng.random() < eps:
                return int(rng.randint(self.hparams_n_actions))
            return int(self.q_values(torch.as_tensor(obs)[None], net).argmax(-1))
        if t is not None and t < self._warmup:
            return rng.uniform(-1, 1, self.action_dim).astype(np.float32)
        a = self.actor(torch.as_tensor(obs, dtype=torch.float32)[None])[0].numpy()
        if not greedy and t is not None:
            a = a + rng.normal(0, self.hparams.expl_noise, a.shape)
        return np.clip(a, -1, 1).astype(np.float32)

    @property
    def hparams_n_actions(self) -> int:
        return self.nets[0].n_actions

    # ---- learning ---------------------------------------------------------------------------------------------
    def configure_optimizers(self):
        hp = self.hparams
        params = list(self.nets.parameters()) + ([self.w] if self.w is not None else [])
        opts = [torch.optim.Adam(params, lr=hp.lr)]
        if not self.discrete:
            opts.append(torch.optim.Adam(self.actor.parameters(), lr=hp.lr))
        return opts

    def on_fit_start(self):
        dm = self.trainer.datamodule
        self.attach(dm)

    def attach(self, dm: DriftDataModule) -> None:
        """Let ``dm`` act with this module; checks that the env matches the networks.

        Raises:
            ValueError: ``data.env`` differs from ``model.env`` (or the Four Rooms ``grid_size``).
        """
        for key in ("env", "grid_size"):
            if dm.hparams[key] != self.hparams[key] and (key == "env" or dm.hparams.env == "fourrooms"):
                raise ValueError(f"data.{key} {dm.hparams[key]!r} differs from model.{key} {self.hparams[key]!r}")
        self._warmup = dm.hparams.warmup
        dm.policy = self.act
        self._dm = dm

    def training_step(self, batch, batch_idx):
        opts = self.optimizers()
        opts = opts if isinstance(opts, list) else [opts]
        logs = self.learn(batch, opts, backward=self.manual_backward)
        self.log_dict({f"train/{k}": v for k, v in logs.items()}, on_step=True, prog_bar=False)
        self.maybe_evaluate(int(batch["t"]))

    def learn(self, batch: dict, opts: list, backward=None) -> dict[str, float]:
        """One learning step on ``batch`` (then the beaker update and the baselines' schedule); returns losses."""
        backward = backward or (lambda loss: loss.backward())
        t = int(batch["t"])
        self._schedule_baselines(t)
        logs = (
            self._learn_discrete(batch, opts, backward)
            if self.discrete
            else self._learn_continuous(batch, opts, backward)
        )
        if self.chains is not None:
            for chain, net in zip(self.chains, self.nets):
                chain.step(net)
        self.learn_steps += 1
        return logs

    def _penalised(self, loss: torch.Tensor) -> torch.Tensor:
        if self.ewc is None:
            return loss
        return loss + sum(e.penalty(n) for e, n in zip(self.ewc, self.nets))

    def _learn_discrete(self, batch, opts, backward) -> dict[str, float]:
        hp, net, tgt = self.hparams, self.nets[0], self.targets[0]
        with torch.no_grad():
            w = None if self.w is None else self.w.detach()
            # SF: psi' and phi' of next_obs need no graph (phi is detached, psi' only picks a*), and with one-step
            # returns n_obs is next_obs (the replay samples one tensor), so its online Q comes from the same forward
            psi_next, phi_next = net(batch["next_obs"]) if self.w is not None else (None, None)
            shared = psi_next is not None and batch["n_obs"] is batch["next_obs"]
            q_next = psi_next @ w if shared else net.q_values(batch["n_obs"], w)
            y = n_step_double_dqn_target(
                batch["n_return"], batch["n_discount"], q_next, tgt.q_values(batch["n_obs"], w)
            )
        q = net.q_values(batch["obs"], self.w).gather(-1, batch["action"][:, None]).squeeze(-1)
        loss_td = td_loss(q, y)
        loss = loss_td
        logs = {"td_loss": loss_td.item()}
        if self.w is not None:
            loss_w = reward_loss(phi_next, self.w, batch["reward"])
            loss = loss + loss_w
            logs["w_loss"] = loss_w.item()
            if hp.psi_td_weight > 0:
                psi, phi = net(batch["obs"])
                with torch.no_grad():
                    a_star = (psi_next @ self.w).argmax(-1)
                    psi_bar = tgt(batch["next_obs"])[0][torch.arange(len(a_star)), a_star]
                    y_psi = sf_bellman_target(phi, psi_bar, batch["discount"])
                psi_taken = psi[torch.arange(len(a_star)), batch["action"]]
                loss = loss + hp.psi_td_weight * 0.5 * (psi_taken - y_psi).pow(2).sum(-1).mean()
        opts[0].zero_grad()
        backward(self._penalised(loss))
        if self.ewc is not None:
            self.ewc[0].accumulate(net)
        opts[0].step()
        if int(self.learn_steps) % hp.target_every == 0:
            tgt.load_state_dict(net.state_dict())
        return logs

    def _learn_continuous(self, batch, opts, backward) -> dict[str, float]:
        hp = self.hparams
        obs, act, nxt = batch["obs"], batch["action"], batch["next_obs"]
        w = None if self.w is None else self.w.detach()
        with torch.no_grad():
            noise = (torch.randn_like(act) * hp.target_noise).clamp(-hp.noise_clip, hp.noise_clip)
            a2 = (self.actor_target(nxt) + noise).clamp(-1, 1)
            y = td3_target(
                batch["reward"],
                batch["discount"],
                self.targets[0].q_values(nxt, w, a2)[:, 0],
                self.targets[1].q_values(nxt, w, a2)[:, 0],
            )
        heads = [n(obs, act) for n in self.nets]  # (Q or psi, phi): phi of net 0 comes from its TD forward
        loss = sum(F.mse_loss((h if self.w is None else h @ self.w)[:, 0], y) for h, _ in heads)
        logs = {"td_loss": loss.item()}
        if self.w is not None:
            phi = heads[0][1]
            loss_w = reward_loss(phi, self.w, batch["reward"])
            loss = loss + loss_w
            logs["w_loss"] = loss_w.item()
        opts[0].zero_grad()
        backward(self._penalised(loss))
        if self.ewc is not None:
            for e, n in zip(self.ewc, self.nets):
                e.accumulate(n)
        opts[0].step()
        if int(self.learn_steps) % hp.policy_delay == 0:
            actor_loss = -self.nets[0].q_values(obs, w, self.actor(obs)).mean()
            opts[1].zero_grad()
            backward(actor_loss)
            opts[1].step()
            logs["actor_loss"] = actor_loss.item()
            with torch.no_grad():
                for src, dst in ((self.nets, self.targets), (self.actor, self.actor_target)):
                    torch._foreach_lerp_(list(dst.parameters()), list(src.parameters()), hp.tau)
        return logs

    def _schedule_baselines(self, t: int) -> None:
        hp = self.hparams
        if hp.consolidation == "reset" and t // hp.reset_every > int(self.resets_done):
            for n in self.nets:
                reset_layers(n.last_two_layers())
            self.resets_done += 1
        if hp.consolidation == "injection" and t >= hp.inject_at and not bool(self.nets[0].head.injected):
            for n in self.nets:
                n.head.inject()
