"""Evaluation during training, outputs at the end of a run (curve JSON and PNGs) and ``zoo predict``: a mixin of
:class:`~.module.SFConsolidationModule` (split out to keep each file short)."""

from __future__ import annotations

import argparse
import copy
import json
import random
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from zoo.methods.sf_consolidation.drift import DriftSchedule
from zoo.methods.sf_consolidation.envs import layout, make_env
from zoo.methods.sf_consolidation.metrics import auc_return


class ReportingMixin:
    """Needs ``self.nets``, ``self.chains``, ``self.w``, ``self.act``, ``self.hparams`` (``eval_every``,
    ``eval_episodes``) and, during fit, ``self._dm``."""

    def maybe_evaluate(self, t: int) -> None:
        """Every ``eval_every`` env steps: eval return, length and success under the *current* dynamics, the
        drift values, beaker-to-online distances and (Four Rooms) the value map."""
        hp = self.hparams
        if t < hp.eval_every * (len(self.history) + 1):
            return
        dm = self._dm
        res = dm.evaluate(lambda o: self.act(o, None, greedy=not self.discrete), hp.eval_episodes)
        mass, _friction, slip = dm.env.current
        row = {
            "step": t,
            "eval_return": res["return"],
            "eval_length": res["length"],
            "eval_success": res["success"],
            "mass_scale": mass,
            "slip_prob": slip,
            "task": int(getattr(dm.env.unwrapped, "task", 0)),
            "beaker_distances": self.chains[0].distances(self.nets[0]) if self.chains is not None else [],
        }
        if hp.env == "fourrooms":
            row["value_map"] = self.value_map().tolist()
        self.history.append(row)
        if self._trainer is not None:
            self.log_dict({"train/eval_return": res["return"], "train/eval_success": res["success"]})

    @torch.no_grad()
    def value_map(self, net=None) -> np.ndarray:
        """Four Rooms ``(N, N)`` map of ``max_{dir, a} Q`` over the cells (walls hold ``nan``)."""
        n = self.hparams.grid_size
        eye = torch.eye(n * n * 4)
        q = self.q_values(eye, net).max(-1).values.view(n, n, 4).max(-1).values.numpy()
        wall = np.zeros((n, n), bool)
        wall[[0, -1, n // 2], :] = True
        wall[:, [0, -1, n // 2]] = True
        for x, y in layout(n)[0]:
            wall[y, x] = False
        q[wall] = np.nan
        return q

    def evaluate(self, datamodule) -> dict[str, float]:
        """``zoo eval``: eval return, length and success of the online net at the drift of steps 0, T/4, T/2, 3T/4
        (``eval_episodes`` episodes each), averaged, plus the values at each point."""
        hp, steps = self.hparams, datamodule.hparams.steps
        seed = int(datamodule.hparams.seed)  # slips and resets draw from these: seeded, zoo eval repeats itself
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        datamodule._eval_env = None
        out: dict[str, float] = {}
        for i in range(4):
            t = i * steps // 4
            r = datamodule.evaluate(lambda o: self.act(o, None, greedy=not self.discrete), hp.eval_episodes, t=t)
            out.update({f"eval/return@{t}": r["return"], f"eval/success@{t}": r["success"]})
        for key in ("return", "success"):
            vals = [v for k, v in out.items() if k.startswith(f"eval/{key}@")]
            out[f"eval/{key}"] = float(np.mean(vals))
        return out

    def run_summary(self) -> dict:
        """Training-return AUC, final eval return, the curve and the episode log of the run."""
        dm = self._dm
        steps = dm.hparams.steps
        ev = [h["eval_return"] for h in self.history]
        return {
            "auc_return": auc_return(dm.episodes, steps),
            "final_eval_return": ev[-1] if ev else None,
            "mean_eval_return": float(np.mean(ev)) if ev else None,
            "episodes": dm.episodes,
            "history": self.history,
            "steps": steps,
            "drift": {
                "mass_scale": dm.schedule.mass_scale[::100].tolist(),
                "slip_prob": dm.schedule.slip_prob[::100].tolist(),
                "every": 100,
            },
        }

    def on_train_end(self):
        dm = getattr(self, "_dm", None)
        if dm is None or dm.env.t == dm.restored_steps:  # a resumed, finished pass: its outputs are already written
            return
        out = self.artifact_dir()
        if self.trainer.is_global_zero:
            self.write_outputs(out)

    def write_outputs(self, out: Path) -> None:
        """``curve.json`` and the PNGs (return vs step over the drift, beaker distances, value maps) in ``out``."""
        from zoo.methods.sf_consolidation import plots

        out.mkdir(parents=True, exist_ok=True)
        s = self.run_summary()
        (out / "curve.json").write_text(json.dumps(s))
        name = f"{self.hparams.critic}-{self.hparams.consolidation}"
        plots.plot_curves({name: [s]}, out / "return_vs_step.png")
        if self.chains is not None and self.history:
            plots.plot_distances(self.history, self.chains[0].tau[1:], out / "beaker_distances.png")
        maps = [h for h in self.history if "value_map" in h]
        if len(maps) >= 2:
            lo, hi = min(maps, key=lambda h: h["slip_prob"]), max(maps, key=lambda h: h["slip_prob"])
            plots.plot_value_maps([lo, hi], out / "value_maps.png")

    # ---- zoo predict -----------------------------------------------------------------------------------------
    predict_schema: ClassVar = {
        "env": str,
        "slip": float,
        "mass": float,
        "task": int,
        "episodes": int,
        "beakers": [{"beaker": int, "tau_steps": int, "success": float, "mean_steps": float, "mean_return": float}],
    }

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> dict:
        """``--slip P`` (Four Rooms) or ``--mass S`` (HalfCheetah) ``[--episodes N] [--task 0|1] [--seed S]``:
        success rate, steps and return acting from each beaker's value net (K rows; one without beakers)."""
        p = argparse.ArgumentParser(prog="zoo predict sf-consolidation")
        p.add_argument("--slip", type=float, default=0.0)
        p.add_argument("--mass", type=float, default=1.0)
        p.add_argument("--episodes", type=int, default=20)
        p.add_argument("--task", type=int, default=0, choices=[0, 1])
        p.add_argument("--seed", type=int, default=0)
        a = p.parse_args(inputs)
        if not 0 <= a.slip <= 1 or a.mass <= 0:
            raise ValueError(f"--slip must be in [0, 1] and --mass > 0, got {a.slip}, {a.mass}")
        hp = self.hparams
        sched = DriftSchedule(np.zeros(1, np.int64), np.array([a.mass]), np.ones(1), np.array([a.slip]))
        env = make_env(hp.env, sched, a.seed, 100, 0, hp.obs_size, hp.grid_size)
        env.frozen = True
        if hasattr(env.unwrapped, "task"):
            env.unwrapped.task = a.task
        np.random.seed(a.seed)
        ks = range(self.chains[0].K) if self.chains is not None else [0]
        out = {"env": hp.env, "slip": a.slip, "mass": a.mass, "task": a.task, "episodes": a.episodes, "beakers": []}
        for k in ks:
            net = self.nets[0] if k == 0 else self.chains[0].copy_into(self.nets[0], k, copy.deepcopy(self.nets[0]))
            rets, lens, succ = [], [], []
            for _ in range(a.episodes if self.discrete else max(1, a.episodes // 10)):
                obs, _ = env.reset()
                ret, n, done = 0.0, 0, False
                while not done:
                    obs, r, term, trunc, _ = env.step(self._act_from(net, obs))
                    ret, n, done = ret + float(r), n + 1, term or trunc
                rets.append(ret)
                lens.append(n)
                succ.append(float(term and r > 0))
            tau = self.chains[0].tau[k] if self.chains is not None else 0
            out["beakers"].append(
                {
                    "beaker": int(k),
                    "tau_steps": int(tau),
                    "success": float(np.mean(succ)),
                    "mean_steps": float(np.mean(lens)),
                    "mean_return": float(np.mean(rets)),
                }
            )
        return out

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record` as a table: one row per beaker (tau in steps, success rate, mean steps, return)."""
        out = self.predict_record(inputs, out_dir)
        lines = [
            f"{out['env']} slip={out['slip']} mass={out['mass']} task={out['task']} episodes={out['episodes']}",
            "beaker  tau_steps  success  mean_steps  mean_return",
        ]
        lines += [
            f"{b['beaker']:>6}  {b['tau_steps']:>9}  {b['success']:>7.2f}  {b['mean_steps']:>10.1f}  "
            f"{b['mean_return']:>11.3f}"
            for b in out["beakers"]
        ]
        return "\n".join(lines)

    @torch.no_grad()
    def _act_from(self, net, obs):
        """Greedy action from ``net``'s Q (discrete: eps_eval-greedy; continuous: best of 32 candidates around the
        actor's action by ``net``'s Q)."""
        if self.discrete:
            return self.act(obs, None, net=net)
        o = torch.as_tensor(obs, dtype=torch.float32)[None]
        a0 = self.actor(o)
        cand = torch.cat([a0, (a0 + 0.2 * torch.randn(31, a0.shape[1])).clamp(-1, 1)])
        q = net.q_values(o.expand(32, -1), None if self.w is None else self.w, cand)[:, 0]
        return cand[int(q.argmax())].numpy()
