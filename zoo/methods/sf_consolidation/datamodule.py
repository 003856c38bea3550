"""``DriftDataModule``: owns the environment, its drift and the replay buffer; its IterableDataset steps the
environment with the module's current policy and yields one sampled batch every ``learn_every`` steps.

Inputs: ``env`` is ``fourrooms`` (MiniGrid Four Rooms, fixed doorways, one-hot ``(x, y, dir)``, two alternating
goals, slippery), ``halfcheetah`` (gymnasium HalfCheetah-v5, drifting mass and inertia) or ``miniworld-fourrooms``
(pixels; ``PYGLET_HEADLESS=True``). The drift is a modulator (``sine``, ``aperiodic``, ``ou``, ``none``) over
``[drift_low, drift_high]`` with period ``drift_period`` steps, or a user's CSV (``drift=csv``,
``drift_path=FILE``; schema and errors in :mod:`.drift`: ``step,mass_scale,friction_scale,slip_prob``, rows that
decrease, negative scales or slips outside [0, 1] fail naming file, line and column before a run directory exists).

A batch is a dict of tensors: ``obs (B, *obs)``, ``action (B,)`` long or ``(B, A)`` float, ``reward (B,)`` the
one-step reward, ``next_obs``, ``discount (B,)`` = ``gamma (1 - terminal)``, ``n_return (B,)``, ``n_obs``,
``n_discount (B,)`` = ``gamma^k (1 - terminal)``, and ``t`` (the environment step, a 0-d long tensor).

Training is one pass of ``steps`` environment steps (a second epoch in the same process yields no batch). A
checkpoint records the environment step reached (:meth:`DriftDataModule.state_dict`): resuming a finished pass
trains nothing more, as the uninterrupted run would; a pass stopped half-way is refused on resume, since the
environment, the replay buffer and the episode log live outside checkpoints (start the run again instead).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Annotated, Literal

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from zoo.core.constraints import DataFile, Discount, NonNegativeInt, PositiveInt
from zoo.core.recipe import RecipeError
from zoo.methods.sf_consolidation.drift import COLUMNS, build_schedule
from zoo.methods.sf_consolidation.envs import make_env
from zoo.methods.sf_consolidation.losses import n_step_return


class ReplayBuffer:
    """Uniform replay over n-step transitions (observations stored as uint8 when ``obs_scale`` is set)."""

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...],
        obs_scale: float | None,
        seed: int = 0,
        n_step: int = 1,
    ):
        self.capacity, self.size, self.pos, self.scale = int(capacity), 0, 0, obs_scale
        dt = np.uint8 if obs_scale else np.float32
        # one-step returns: n_obs is next_obs, stored once and sampled as the same tensor (the module shares the
        # forward on it)
        self.keys = ("obs", "next_obs") if n_step == 1 else ("obs", "next_obs", "n_obs")
        self.obs = {k: np.zeros((self.capacity, *obs_shape), dt) for k in self.keys}
        self.action = np.zeros((self.capacity, *action_shape), np.int64 if not action_shape else np.float32)
        self.scalars = {
            k: np.zeros(self.capacity, np.float32) for k in ("reward", "discount", "n_return", "n_discount")
        }
        self.rng = np.random.default_rng(seed)

    def add(self, obs, action, reward, next_obs, discount, n_return, n_obs, n_discount) -> None:
        i = self.pos
        for k, v in zip(self.keys, (obs, next_obs, n_obs)):
            self.obs[k][i] = v * self.scale if self.scale else v
        self.action[i] = action
        for k, v in (("reward", reward), ("discount", discount), ("n_return", n_return), ("n_discount", n_discount)):
            self.scalars[k][i] = v
        self.pos = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size: int) -> dict[str, torch.Tensor]:
        idx = self.rng.integers(0, self.size, batch_size)
        out = {k: torch.from_numpy(v[idx].astype(np.float32) / (self.scale or 1.0)) for k, v in self.obs.items()}
        out.setdefault("n_obs", out["next_obs"])
        out["action"] = torch.from_numpy(self.action[idx])
        out.update({k: torch.from_numpy(v[idx]) for k, v in self.scalars.items()})
        return out


class _Stepper(IterableDataset):
    def __init__(self, dm: DriftDataModule):
        self.dm = dm

    def __iter__(self):
        return self.dm.run()


class DriftDataModule(L.LightningDataModule):
    """See the module docstring. The module sets ``policy(obs, t) -> action`` before fitting.

    Args:
        env: ``fourrooms`` | ``halfcheetah`` | ``miniworld-fourrooms``.
        steps: environment steps of the run.
        drift, drift_path, drift_low, drift_high, drift_period: the drift (mass scale for HalfCheetah, slip
            probability otherwise).
        task_period: Four Rooms goal alternation period in steps (0: one task).
        max_episode_steps: episode limit (Four Rooms, Miniworld).
        batch_size, buffer_size, learn_every, warmup: replay settings (one batch per ``learn_every`` steps after
            ``warmup`` steps).
        n_step, gamma: n-step return and discount.
        obs_size: Miniworld image side.  grid_size: Four Rooms side (19: MiniGrid's; 11: compact, ours).
        seed: env, drift-noise and replay seed.
    """

    def __init__(
        self,
        env: Literal["fourrooms", "halfcheetah", "miniworld-fourrooms"] = "fourrooms",
        steps: PositiveInt = 50000,
        drift: str = "sine",
        drift_path: Annotated[str | None, DataFile("csv", COLUMNS)] = None,
        drift_low: float = 0.0,
        drift_high: float = 0.45,
        drift_period: PositiveInt = 25000,
        task_period: NonNegativeInt = 10000,
        max_episode_steps: PositiveInt = 100,
        batch_size: PositiveInt = 64,
        buffer_size: PositiveInt = 50000,
        learn_every: PositiveInt = 4,
        warmup: NonNegativeInt = 1000,
        n_step: PositiveInt = 10,
        gamma: Discount = 0.99,
        obs_size: PositiveInt = 60,
        grid_size: PositiveInt = 19,
        seed: NonNegativeInt = 0,
    ):
        super().__init__()
        self.save_hyperparameters()
        target = "mass" if env == "halfcheetah" else "slip"
        self.schedule = build_schedule(drift, steps, target, drift_low, drift_high, drift_period, seed, drift_path)
        self.env = make_env(env, self.schedule, seed, max_episode_steps, task_period, obs_size, grid_size)
        self._eval_env = None
        self.discrete = self.env.discrete
        obs_shape = self.env.observation_space.shape
        scale = {"fourrooms": 1.0, "miniworld-fourrooms": 255.0}.get(env)
        act_shape = () if self.discrete else self.env.action_space.shape
        self.buffer = ReplayBuffer(buffer_size, obs_shape, act_shape, scale, seed, n_step)
        self.policy: Callable | None = None
        self.episodes: list[dict] = []
        self.slips: list[bool] = []
        self.restored_steps = 0

    def state_dict(self) -> dict[str, int]:
        """``{"env_steps": t}``: how far the environment stream got (in every checkpoint)."""
        return {"env_steps": int(self.env.t)}

    def load_state_dict(self, state: dict) -> None:
        """On resume: a finished pass stays finished (the stream yields nothing more).

        Raises:
            RecipeError: the checkpoint was written mid-pass (its environment and replay buffer are not saved).
        """
        t = int(state.get("env_steps", 0))
        if t < self.hparams.steps:
            raise RecipeError(
                f"sf-consolidation: this checkpoint was written at environment step {t} of data.steps="
                f"{self.hparams.steps}; the environment, its replay buffer and the episode log are not saved in "
                "checkpoints, so the run cannot continue where it stopped: start it again without resume"
            )
        self.env.t = self.restored_steps = t

    def train_dataloader(self):
        return DataLoader(_Stepper(self), batch_size=None, num_workers=0)

    def run(self):
        """Step the environment ``steps`` times with ``self.policy``; yield a batch every ``learn_every`` steps."""
        hp, env, buf = self.hparams, self.env, self.buffer
        if self.policy is None:
            raise RuntimeError("DriftDataModule.policy is unset: the module sets it in on_fit_start")
        obs, _ = env.reset()
        pending: deque = deque()
        ep_ret, ep_len = 0.0, 0
        while env.t < hp.steps:
            t = env.t
            action = self.policy(obs, t)
            nxt, r, term, trunc, _ = env.step(action)
            self.slips.append(env.slipped) if len(self.slips) < 100000 else None
            ep_ret, ep_len = ep_ret + float(r), ep_len + 1
            pending.append((obs, action, float(r), nxt, bool(term)))
            done = term or trunc
            while pending and (len(pending) == hp.n_step or done):
                o, a, r1, o1, term1 = pending[0]
                rew = [p[2] for p in pending]
                last = pending[-1]
                buf.add(
                    o,
                    a,
                    r1,
                    o1,
                    hp.gamma * (1.0 - term1),
                    n_step_return(rew, hp.gamma),
                    last[3],
                    hp.gamma ** len(rew) * (1.0 - last[4]),
                )
                pending.popleft()
                if not done:
                    break
            obs = nxt
            if done:
                self.episodes.append(
                    {
                        "step": env.t,
                        "return": ep_ret,
                        "length": ep_len,
                        "success": bool(term and r > 0),
                        "task": getattr(env.unwrapped, "task", 0),
                    }
                )
                obs, _ = env.reset()
                ep_ret, ep_len = 0.0, 0
            if env.t >= hp.warmup and buf.size >= hp.batch_size and env.t % hp.learn_every == 0:
                batch = buf.sample(hp.batch_size)
                batch["t"] = torch.tensor(env.t)
                yield batch

    def evaluate(self, policy: Callable, episodes: int = 5, t: int | None = None) -> dict[str, float]:
        """Run ``episodes`` episodes with ``policy(obs) -> action`` under the dynamics of step ``t`` (default: now),
        on a separate env copy whose drift is frozen at ``t``; returns mean return, length and success rate."""
        hp = self.hparams
        if self._eval_env is None:
            self._eval_env = make_env(
                hp.env, self.schedule, hp.seed + 10_000, hp.max_episode_steps, 0, hp.obs_size, hp.grid_size
            )
            self._eval_env.frozen = True
        ev = self._eval_env
        ev.t = self.env.t if t is None else t
        ev.apply(ev.t)
        if hasattr(ev.unwrapped, "task"):
            ev.unwrapped.task = getattr(self.env.unwrapped, "task", 0)
        rets, lens, succ = [], [], []
        for _ in range(episodes):
            obs, _ = ev.reset()
            ret, n, done = 0.0, 0, False
            while not done:
                obs, r, term, trunc, _ = ev.step(policy(obs))
                ret, n, done = ret + float(r), n + 1, term or trunc
            rets.append(ret)
            lens.append(n)
            succ.append(float(term and r > 0))
        return {"return": float(np.mean(rets)), "length": float(np.mean(lens)), "success": float(np.mean(succ))}
