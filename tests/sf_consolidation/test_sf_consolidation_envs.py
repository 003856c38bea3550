"""Environments and drift: slip rate, MuJoCo mass edits that survive reset, fixed doorways, modulators, CSV errors."""

import math

import numpy as np
import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("minigrid")
from zoo.core.data import DataError
from zoo.methods.sf_consolidation.drift import DriftSchedule, build_schedule, read_drift_csv
from zoo.methods.sf_consolidation.envs import make_env
from zoo.methods.sf_consolidation.modulators import noisy_sine, ou_drift


def const(mass=1.0, slip=0.0):
    return DriftSchedule(np.zeros(1, np.int64), np.array([mass]), np.ones(1), np.array([slip]))


def test_slip_rate_within_binomial_ci():
    env = make_env("fourrooms", const(slip=0.3), seed=1)
    env.reset()
    n, k = 3000, 0
    for _ in range(n):
        _, _, term, trunc, _ = env.step(2)
        k += env.slipped
        if term or trunc:
            env.reset()
    half = 3.29 * math.sqrt(0.3 * 0.7 / n)  # 99.9% normal-approximation interval
    assert abs(k / n - 0.3) < half


def test_fixed_doorways_and_start_across_resets():
    env = make_env("fourrooms", const(), seed=0)
    grids = []
    for seed in (0, 1, 2):
        obs, _ = env.reset(seed=seed)
        grids.append(env.unwrapped.grid.encode().copy())
        assert obs.sum() == 1 and tuple(env.unwrapped.agent_pos) == (4, 4)
    assert all((g == grids[0]).all() for g in grids)


def test_layouts():
    from zoo.methods.sf_consolidation.envs import layout

    assert layout(19) == (((9, 4), (9, 13), (4, 9), (13, 9)), (4, 4), ((11, 4), (4, 11)))
    assert layout(11) == (((5, 2), (5, 7), (2, 5), (7, 5)), (2, 2), ((7, 2), (2, 7)))
    env = make_env("fourrooms", const(), seed=0, grid_size=11)
    obs, _ = env.reset()
    assert obs.shape == (11 * 11 * 4,) and obs.argmax() == (2 * 11 + 2) * 4 + 3  # (2, 2) facing north
    with pytest.raises(ValueError, match="grid_size"):
        layout(10)


def test_tasks_alternate_with_task_period():
    env = make_env("fourrooms", const(), seed=0, task_period=5)
    env.reset()
    assert env.unwrapped.task == 0
    for _ in range(5):
        env.step(0)
    env.reset()
    assert env.unwrapped.task == 1


def test_mass_is_base_times_scale_and_survives_reset():
    pytest.importorskip("mujoco")
    sched = DriftSchedule(np.array([0, 3]), np.array([1.0, 1.3]), np.ones(2), np.zeros(2))
    env = make_env("halfcheetah", sched, seed=0)
    m = env.unwrapped.model
    base_mass, base_inertia = env.base[0].copy(), env.base[1].copy()
    env.reset(seed=0)
    for _ in range(4):
        env.step(np.zeros(6, np.float32))
    assert np.allclose(m.body_mass, base_mass * 1.3) and np.allclose(m.body_inertia, base_inertia * 1.3)
    env.reset(seed=1)  # reset only touches qpos/qvel
    assert np.allclose(m.body_mass, base_mass * 1.3)


def test_drift_keeps_the_live_state():
    pytest.importorskip("mujoco")
    sched = DriftSchedule(np.arange(3), np.array([1.0, 1.2, 0.8]), np.ones(3), np.zeros(3))
    env = make_env("halfcheetah", sched, seed=0)
    env.reset(seed=0)
    for _ in range(3):
        x0 = float(env.unwrapped.data.qpos[0])
        _, _, _, _, info = env.step(np.ones(6, np.float32))
        dt = env.unwrapped.dt  # reward uses (x_after - x_before) / dt
        assert info["x_velocity"] == pytest.approx((info["x_position"] - x0) / dt, rel=1e-6, abs=1e-9)


def test_mass_drift_changes_the_dynamics():
    pytest.importorskip("mujoco")
    finals = []
    for mass in (0.6, 1.4):
        env = make_env("halfcheetah", const(mass=mass), seed=0)
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        for _ in range(50):
            obs, *_ = env.step(rng.uniform(-1, 1, 6).astype(np.float32))
        finals.append(obs)
    assert np.abs(finals[0] - finals[1]).max() > 0.1


def test_modulators_ranges_and_ou_mean():
    v = noisy_sine(5000, 1000, 0.6, 1.4, seed=0)
    assert v.min() >= 0.6 and v.max() <= 1.4 and v.max() - v.min() > 0.6
    x = ou_drift(200000, mu=1.0, theta=0.05, sigma=0.02, low=0.5, high=1.5, seed=0)
    assert abs(x.mean() - 1.0) < 0.01  # stationary mean mu
    assert abs(x.std() - 0.02 / math.sqrt(2 * 0.05 - 0.05**2)) < 0.01  # AR(1) stationary sd


def test_csv_replays_exactly_and_bad_rows_name_file_line_column(tmp_path):
    f = tmp_path / "drift.csv"
    f.write_text("step,mass_scale,friction_scale,slip_prob\n0,1.0,1.0,0.1\n100,1.2,0.9,0.3\n")
    s = build_schedule("csv", 0, "slip", 0, 0, 1, path=str(f))
    assert s.at(0) == (1.0, 1.0, 0.1) and s.at(99) == (1.0, 1.0, 0.1) and s.at(100) == (1.2, 0.9, 0.3)
    for body, col in (
        ("0,1,1,0.1\n5,1,1,0.1\n3,1,1,0.1\n", "step"),
        ("0,-1,1,0.1\n", "mass_scale"),
        ("0,1,1,1.5\n", "slip_prob"),
    ):
        f.write_text("step,mass_scale,friction_scale,slip_prob\n" + body)
        with pytest.raises(DataError, match=rf"drift.csv:\d+: column '{col}'"):
            read_drift_csv(str(f))


def test_unknown_env_names_key_and_choices():
    with pytest.raises(ValueError, match=r"data.env: unknown environment 'pong'; choices"):
        make_env("pong", const())


def test_miniworld_two_tasks_rewards_the_task_goal_and_penalises_the_other():
    import os

    os.environ.setdefault("PYGLET_HEADLESS", "True")  # before pyglet is imported, as make_env does
    pytest.importorskip("miniworld")
    env = make_env("miniworld-fourrooms", const(), seed=0, max_steps=50, task_period=5, obs_size=16)
    u = env.unwrapped
    obs, _ = env.reset()
    assert obs.shape == (3, 16, 16) and u.task == 0
    assert [tuple(g.pos) for g in u.goals] == [(-4.0, 0.0, 4.0), (4.0, 0.0, -4.0)]  # top-left, bottom-right rooms
    rewards = []
    for task_goal in (0, 1):  # agent put beside goal 0 (the task's, then the other's)
        env.reset()
        u.task = task_goal
        u.agent.pos = u.goals[0].pos + np.array([0.8, 0.0, 0.0])
        _, r, term, _, _ = env.step(0)  # turn left: stays beside the box
        assert term
        rewards.append(r)
    assert rewards[0] > 0 and rewards[1] == pytest.approx(-rewards[0])
    for _ in range(6):  # DriftWrapper switches the task at the reset after 5 steps
        env.step(0)
    env.reset()
    assert u.task == 1
