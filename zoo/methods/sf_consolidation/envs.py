"""Environments under drift: a fixed-layout slippery Four Rooms (minigrid), HalfCheetah-v5 with drifting mass and
inertia (MuJoCo), and Miniworld's 3D Four Rooms behind ``data.env=miniworld-fourrooms`` (``PYGLET_HEADLESS=True``).

:class:`DriftWrapper` owns the global step counter ``t`` (it does not restart at episode ends) and applies the
schedule every step: the slip probability replaces a discrete action by a uniform one; the mass scale sets
``body_mass = base * s`` and ``body_inertia = base * s`` (friction likewise on ``geom_friction[:, 0]``) and calls
``mujoco.mj_setConst`` so derived quantities follow (on a scratch ``MjData``: it runs the model at ``qpos0`` in the
data it is given, which would reset the live state and corrupt the forward-velocity reward). Edits to ``model`` survive ``reset`` (which only resets
``qpos``/``qvel``). The two Four Rooms tasks (ours; :func:`layout`) alternate every ``task_period`` steps,
switching at the next reset. With ``task_period > 0`` Miniworld's Four Rooms becomes the authors' two-task domain
(:func:`_miniworld_two_tasks_cls`, after their ``Miniworld_Two_Tasks``).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from zoo.methods.sf_consolidation.drift import DriftSchedule

ENVS = ("fourrooms", "halfcheetah", "miniworld-fourrooms")


def layout(size: int) -> tuple[tuple, tuple[int, int], tuple]:
    """Fixed Four Rooms layout of a ``size x size`` grid (ours; MiniGrid redraws doorways at every reset):
    ``(doors, start, goals)`` with ``m = size // 2``, ``q = m // 2``: doorways ``(m, q), (m, m+q), (q, m), (m+q, m)``,
    start ``(q, q)`` facing north, goal A ``(m+2, q)`` just past the east doorway, goal B ``(q, m+2)`` past the south
    one. ``size = 19`` is MiniGrid's FourRooms; ``size = 11`` the compact one of the CPU experiment.

    Raises:
        ValueError: a size below 9 or even.
    """
    if size < 9 or size % 2 == 0:
        raise ValueError(f"data.grid_size must be odd and >= 9, got {size}")
    m = size // 2
    q = m // 2
    return ((m, q), (m, m + q), (q, m), (m + q, m)), (q, q), ((m + 2, q), (q, m + 2))


def _fourrooms_cls():
    from minigrid.core.grid import Grid
    from minigrid.core.world_object import Goal
    from minigrid.envs.fourrooms import FourRoomsEnv
    from minigrid.minigrid_env import MiniGridEnv

    class FixedFourRooms(FourRoomsEnv):
        """``MiniGrid-FourRooms-v0`` with fixed doorways, a fixed start facing north and the goal of ``self.task``
        (:func:`layout`), an explicit ``max_steps``; actions {0 left, 1 right, 2 forward}."""

        def __init__(self, size: int = 19, max_steps: int = 100, **kw):
            self.task, self.size = 0, size
            self.doors, self.start, self.goals = layout(size)
            self._agent_default_pos, self._goal_default_pos = self.start, self.goals[0]
            MiniGridEnv.__init__(
                self, mission_space=self._mission_space(), width=size, height=size, max_steps=max_steps, **kw
            )
            self.action_space = gym.spaces.Discrete(3)

        @staticmethod
        def _mission_space():
            from minigrid.core.mission import MissionSpace

            return MissionSpace(mission_func=FourRoomsEnv._gen_mission)

        def _gen_grid(self, width, height):
            self.grid = Grid(width, height)
            self.grid.wall_rect(0, 0, width, height)
            self.grid.vert_wall(width // 2, 0)
            self.grid.horz_wall(0, height // 2)
            for pos in self.doors:
                self.grid.set(*pos, None)
            self.agent_pos, self.agent_dir = self.start, 3  # facing north (a wall): each goal needs a turn
            self.put_obj(Goal(), *self.goals[self.task])

        def gen_obs(self):
            """No egocentric image (the pose one-hot replaces it): skips MiniGrid's per-step view rendering."""
            return {"direction": self.agent_dir, "mission": self.mission}

    return FixedFourRooms


class PoseOneHot(gym.ObservationWrapper):
    """Observation = one-hot of the agent's ``(x, y, dir)``: ``(N*N*4,)`` float32, index ``(y*N+x)*4+dir``."""

    def __init__(self, env):
        super().__init__(env)
        self.n = env.unwrapped.width
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.n * self.n * 4,), np.float32)

    def observation(self, obs):
        u = self.env.unwrapped
        out = np.zeros(self.n * self.n * 4, np.float32)
        out[pose_index(*u.agent_pos, u.agent_dir, self.n)] = 1.0
        return out


def pose_index(x: int, y: int, direction: int, size: int) -> int:
    """Index of pose ``(x, y, dir)`` in the one-hot observation of a ``size x size`` grid."""
    return (int(y) * size + int(x)) * 4 + int(direction)


class PixelsCHW(gym.ObservationWrapper):
    """Miniworld's ``(H, W, 3)`` uint8 view -> ``(3, H, W)`` float32 in [0, 1]; actions {turn left, right, forward}."""

    def __init__(self, env):
        super().__init__(env)
        h, w, c = env.observation_space.shape
        self.observation_space = gym.spaces.Box(0.0, 1.0, (c, h, w), np.float32)
        self.action_space = gym.spaces.Discrete(3)

    def observation(self, obs):
        return np.ascontiguousarray(obs.transpose(2, 0, 1), dtype=np.float32) / 255.0


class DriftWrapper(gym.Wrapper):
    """Apply a :class:`DriftSchedule` at every step (see the module docstring).

    Attributes:
        t: global environment step (drift time); ``frozen`` keeps it fixed (evaluation at the current dynamics).
        slipped: whether the last action was replaced (slip).
    """

    def __init__(self, env, schedule: DriftSchedule, task_period: int = 0, seed: int = 0):
        super().__init__(env)
        self.schedule, self.task_period = schedule, int(task_period)
        self.t, self.frozen, self.slipped = 0, False, False
        self.rng = np.random.default_rng(seed)
        u = env.unwrapped
        self.mujoco = hasattr(u, "model") and hasattr(u.model, "body_mass")
        if self.mujoco:
            import mujoco

            m = u.model
            self.base = (m.body_mass.copy(), m.body_inertia.copy(), m.geom_friction[:, 0].copy())
            self._scratch = mujoco.MjData(m)  # mj_setConst works at qpos0 in the data it is given: not the live one
            self._applied = None
        self.discrete = isinstance(env.action_space, gym.spaces.Discrete)
        self.apply(self.t)

    @property
    def current(self) -> tuple[float, float, float]:
        """``(mass_scale, friction_scale, slip_prob)`` now."""
        return self.schedule.at(self.t)

    def apply(self, t: int) -> None:
        """Set the physics of step ``t`` (a no-op for envs without a MuJoCo model)."""
        if not self.mujoco:
            return
        import mujoco

        mass, friction, _ = self.schedule.at(t)
        if self._applied == (mass, friction):
            return
        u = self.env.unwrapped
        m0, i0, f0 = self.base
        u.model.body_mass[:] = m0 * mass
        u.model.body_inertia[:] = i0 * mass
        u.model.geom_friction[:, 0] = f0 * friction
        mujoco.mj_setConst(u.model, self._scratch)
        self._applied = (mass, friction)

    def reset(self, **kw):
        u = self.env.unwrapped
        if self.task_period > 0 and hasattr(u, "task"):
            u.task = (self.t // self.task_period) % 2
        return self.env.reset(**kw)

    def step(self, action):
        self.apply(self.t)
        _, _, slip = self.schedule.at(self.t)
        self.slipped = bool(self.discrete and slip > 0 and self.rng.random() < slip)
        if self.slipped:
            action = int(self.rng.integers(self.env.action_space.n))
        if not self.frozen:
            self.t += 1
        return self.env.step(action)


def _miniworld_two_tasks_cls():
    """Miniworld's FourRooms with the authors' two tasks (their ``domain/Miniworld/Miniworld_Two_Tasks.py``: a goal
    in the top-left room and one in the bottom-right, the agent starting anywhere; reaching the task's goal gives
    Miniworld's reward, the other goal minus it, and either ends the episode). Ours: both goals are red boxes at the
    rooms' centres (the authors' env registrations are not public)."""
    from gymnasium import spaces, utils
    from miniworld.entity import Box
    from miniworld.miniworld import MiniWorldEnv

    class FourRoomsTwoTasks(MiniWorldEnv, utils.EzPickle):
        """Four Rooms (Miniworld's layout) with goal ``goals[task]``; ``task`` (0 or 1) is set between episodes."""

        GOAL_POS = ((-4.0, 0.0, 4.0), (4.0, 0.0, -4.0))  # top-left room, bottom-right room

        def __init__(self, max_episode_steps: int = 250, **kwargs):
            self.task = 0
            MiniWorldEnv.__init__(self, max_episode_steps=max_episode_steps, **kwargs)
            utils.EzPickle.__init__(self, max_episode_steps=max_episode_steps, **kwargs)
            self.action_space = spaces.Discrete(self.actions.move_forward + 1)

        def _gen_world(self):
            rooms = [
                self.add_rect_room(min_x=-7, max_x=-1, min_z=1, max_z=7),
                self.add_rect_room(min_x=1, max_x=7, min_z=1, max_z=7),
                self.add_rect_room(min_x=1, max_x=7, min_z=-7, max_z=-1),
                self.add_rect_room(min_x=-7, max_x=-1, min_z=-7, max_z=-1),
            ]
            self.connect_rooms(rooms[0], rooms[1], min_z=3, max_z=5, max_y=2.2)
            self.connect_rooms(rooms[1], rooms[2], min_x=3, max_x=5, max_y=2.2)
            self.connect_rooms(rooms[2], rooms[3], min_z=-5, max_z=-3, max_y=2.2)
            self.connect_rooms(rooms[3], rooms[0], min_x=-5, max_x=-3, max_y=2.2)
            self.goals = [self.place_entity(Box(color="red"), pos=np.array(p), dir=0.0) for p in self.GOAL_POS]
            self.place_agent()

        def step(self, action):
            obs, reward, terminated, truncated, info = super().step(action)
            for k, goal in enumerate(self.goals):
                if self.near(goal):
                    reward += self._reward() if k == self.task else -self._reward()
                    terminated = True
                    break
            return obs, reward, terminated, truncated, info

    return FourRoomsTwoTasks


def make_env(
    name: str,
    schedule: DriftSchedule,
    seed: int = 0,
    max_steps: int = 100,
    task_period: int = 0,
    obs_size: int = 60,
    grid_size: int = 19,
) -> DriftWrapper:
    """Build env ``name`` (one of :data:`ENVS`) under ``schedule``.

    Args:
        max_steps: episode limit (Four Rooms, Miniworld); HalfCheetah keeps gymnasium's 1,000.
        task_period: alternate the two tasks every this many steps (0: one task; Miniworld: stock FourRooms).
        obs_size: Miniworld image side in pixels.
    Raises:
        ValueError: an unknown name (naming ``data.env`` and the choices).
    """
    if name == "fourrooms":
        env = PoseOneHot(_fourrooms_cls()(size=grid_size, max_steps=max_steps))
    elif name == "halfcheetah":
        env = gym.make("HalfCheetah-v5")
    elif name == "miniworld-fourrooms":
        import os

        os.environ.setdefault("PYGLET_HEADLESS", "True")
        import miniworld  # noqa: F401  (registers MiniWorld-*)

        if task_period > 0:  # the authors' two tasks, alternating every task_period steps
            env = PixelsCHW(
                gym.wrappers.TimeLimit(
                    _miniworld_two_tasks_cls()(max_episode_steps=max_steps, obs_width=obs_size, obs_height=obs_size),
                    max_steps,
                )
            )
        else:
            env = PixelsCHW(
                gym.make("MiniWorld-FourRooms-v0", obs_width=obs_size, obs_height=obs_size, max_episode_steps=max_steps)
            )
    else:
        raise ValueError(f"data.env: unknown environment {name!r}; choices {list(ENVS)}")
    env.reset(seed=seed)
    env.action_space.seed(seed)
    return DriftWrapper(env, schedule, task_period=task_period, seed=seed)


def env_spaces(name: str, obs_size: int = 60, grid_size: int = 19) -> tuple[tuple[int, ...], int, int]:
    """``(obs_shape, n_actions, action_dim)`` of env ``name`` without building it (``n_actions = 0`` for continuous
    control, ``action_dim = 0`` for discrete).

    Raises:
        ValueError: an unknown name.
    """
    if name == "fourrooms":
        return (grid_size * grid_size * 4,), 3, 0
    if name == "halfcheetah":
        return (17,), 0, 6
    if name == "miniworld-fourrooms":
        return (3, obs_size, obs_size), 3, 0
    raise ValueError(f"data.env: unknown environment {name!r}; choices {list(ENVS)}")
