"""sf-consolidation speed against stable-baselines3: environment steps per second *with learning*, same nets
(64-64), batch, update schedule and drift, in one process.

Peers: SB3 ``DQN`` on the slippery Four Rooms (batch 64, one update per 4 env steps) and SB3 ``TD3`` on HalfCheetah
with drifting mass (batch 128, one update per 2 env steps). Ours: the module's own ``learn`` step driven over the
datamodule's stream (as the experiments do), as the plain baseline (``q`` critic, no consolidation: the like-for-like
pair), as SF + 5 beakers (the cost of SF and consolidation), and, for the per-stage breakdown, as SF without
consolidation and as the Q net with 5 beakers. After a warm-up block (replay filled, learning on),
blocks of ``--steps`` env steps are timed by ``zoo.core.timing.compare`` (one more untimed block per side, then
blocks interleaved in alternating order, one thread); ratios are of median CPU seconds per block (process time: on this shared 2-core machine the other
core's job inflates wall time, not our CPU time; wall figures beside them). Targets (issue 26): ours plain >= 0.8x SB3; SF + beakers <= 1.15x the plain time.

    nice -n 10 python benchmarks/sf_consolidation.py [--steps 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess

from zoo.core.results import write_result
from zoo.core.timing import compare
from zoo.methods.sf_consolidation.baselines import sb3_reference
from zoo.methods.sf_consolidation.datamodule import DriftDataModule
from zoo.methods.sf_consolidation.module import SFConsolidationModule

SETTINGS = {  # env -> (datamodule kwargs, SB3 algo)
    "fourrooms": ({"batch_size": 64, "learn_every": 4, "n_step": 1, "drift_period": 25000}, "dqn"),
    "halfcheetah": ({"batch_size": 128, "learn_every": 2, "n_step": 1, "drift_low": 0.6, "drift_high": 1.4}, "td3"),
}


class Ours:
    """Our agent as a resumable stream: ``block(n)`` runs ``n`` more env steps with learning."""

    def __init__(self, env: str, critic: str, consolidation: str, total: int, warmup: int):
        dm_kw, _ = SETTINGS[env]
        self.dm = DriftDataModule(env=env, steps=total, warmup=warmup, buffer_size=total, seed=0, **dm_kw)
        self.module = SFConsolidationModule(
            env=env, critic=critic, consolidation=consolidation, lr=1e-3, eval_every=10**9
        )
        self.module.attach(self.dm)
        self.opts = self.module.configure_optimizers()
        self.gen = self.dm.run()

    def block(self, n: int) -> None:
        end = self.dm.env.t + n
        while self.dm.env.t < end:
            self.module.learn(next(self.gen), self.opts)


class Peer:
    """SB3 DQN/TD3 continuing ``learn`` over the same drifting env."""

    def __init__(self, env: str, total: int, warmup: int):
        dm_kw, algo = SETTINGS[env]
        dm = DriftDataModule(env=env, steps=total, warmup=warmup, seed=0, **dm_kw)
        self.model = sb3_reference(
            dm.env,
            algo,
            steps=1,
            batch_size=dm_kw["batch_size"],
            train_freq=dm_kw["learn_every"],
            learning_starts=warmup,
            lr=1e-3,
        )

    def block(self, n: int) -> None:
        self.model.learn(total_timesteps=n, reset_num_timesteps=False)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--envs", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    a = p.parse_args(argv)
    total = a.warmup + a.steps * (a.repeats + 1) + 10
    rows, load = [], [os.getloadavg()[0]]
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    for env in a.envs:
        sides = {
            "sb3": Peer(env, total, a.warmup),
            "ours-plain": Ours(env, "q", "none", total, a.warmup),
            "ours-sf-multi": Ours(env, "sf", "multi", total, a.warmup),
            "ours-sf": Ours(env, "sf", "none", total, a.warmup),
            "ours-q-multi": Ours(env, "q", "multi", total, a.warmup),
        }
        for side in sides.values():
            side.block(a.warmup)  # fill the replay, learning starts
        t = compare(
            {name: functools.partial(side.block, a.steps) for name, side in sides.items()},
            repeats=a.repeats,
            warmup=1,
            threads=1,
        )
        load.append(os.getloadavg()[0])
        med = {k: a.steps / t.median(k, "cpu") for k in sides}
        wall = {k: a.steps / t.median(k) for k in sides}
        rows.append(
            {
                "env": env,
                "peer": "stable-baselines3 " + SETTINGS[env][1].upper(),
                "sb3_steps_per_s": med["sb3"],
                "ours_plain_steps_per_s": med["ours-plain"],
                "ours_sf_multi_steps_per_s": med["ours-sf-multi"],
                "ratio_plain_vs_sb3": med["ours-plain"] / med["sb3"],
                "ratio_sf_multi_vs_sb3": med["ours-sf-multi"] / med["sb3"],
                "time_ratio_sf_multi_vs_plain": med["ours-plain"] / med["ours-sf-multi"],
                "time_ratio_sf_vs_plain": med["ours-plain"] / med["ours-sf"],
                "time_ratio_q_multi_vs_plain": med["ours-plain"] / med["ours-q-multi"],
                "time_ratio_sf_multi_vs_plain_wall": wall["ours-plain"] / wall["ours-sf-multi"],
                "ratio_plain_vs_sb3_wall": wall["ours-plain"] / wall["sb3"],
                "repeats": a.repeats,
                "block_steps": a.steps,
                "clock": "cpu",
            }
        )
        print(rows[-1], flush=True)
    loads = ", ".join(f"{x:.1f}" for x in load)
    notes = (
        f"Env steps/s with learning (one process, blocks of {a.steps} steps after a {a.warmup}-step replay "
        f"fill; {t.describe()}), 64-64 nets, same batch and update schedule and the same drift "
        "on both sides. Targets: ratio_plain_vs_sb3 >= 0.8; time_ratio_sf_multi_vs_plain <= 1.15 (SF head + 5 "
        "beakers over the plain Q net); time_ratio_sf_vs_plain (SF head alone) and time_ratio_q_multi_vs_plain "
        "(5 beakers alone) split that cost. Steps/s and ratios from median CPU seconds (wall-clock ratios beside "
        f"them). Load (1-min average) during the run: {loads}; uptime at start: {uptime}."
    )
    print(
        write_result(
            "sf-consolidation",
            "bench-steps",
            rows,
            kind="benchmark",
            notes=notes,
            packages=["stable-baselines3", "gymnasium", "mujoco", "minigrid"],
        )
    )


if __name__ == "__main__":
    main()
