"""The drift experiment (paper §2.5): variants x seeds on the slippery Four Rooms and HalfCheetah with drifting
mass; AUC of training return, eval return under the current dynamics, ranking by AUC with bootstrap CIs.

Each run builds the recipe's module and datamodule and drives the module's own ``learn`` step over the
datamodule's stream (:func:`fit_direct`; the Lightning Trainer's per-batch collection handling cost ~10 ms a batch
on the loaded 2-core machine, as much as the learning step), and caches its curve in
``runs/sf-consolidation-experiments/<env>/<variant>-s<seed>.json`` (a rerun skips cached runs: the full plan can be
spread over sessions). ``--write`` turns every cached run into ``results/sf-consolidation/drift.json`` (rows: env,
variant, seed, auc_return, final_eval_return, mean_eval_return, steps, seconds) and the PNGs.

    python -m zoo.methods.sf_consolidation.experiments --env fourrooms --steps 30000 --seeds 0 1 2
    python -m zoo.methods.sf_consolidation.experiments --write
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from zoo.core.data import repo_root
from zoo.core.provenance import cached_runs_provenance, git_at_start

VARIANTS = {  # name -> (critic, consolidation)
    "sf-multi": ("sf", "multi"),
    "sf-single": ("sf", "single"),
    "q-multi": ("q", "multi"),
    "plain": ("q", "none"),
    "sf-plain": ("sf", "none"),
    "ewc": ("sf", "ewc"),
    "reset": ("sf", "reset"),
    "injection": ("sf", "injection"),
}
RECIPES = {"fourrooms": "sf-consolidation.yaml", "halfcheetah": "sf-consolidation-halfcheetah.yaml"}
PAPER = (
    "figure only (no table): under gradual drift SF + multi-timescale consolidation > SF + single-timescale > "
    "Q + consolidation, and consolidation > resets / plasticity injection (abstract; notes §2.5)"
)


def cache_dir() -> Path:
    return repo_root() / "runs" / "sf-consolidation-experiments"


def run_one(env: str, variant: str, seed: int, steps: int, overrides: list[str] = ()) -> dict:
    """Train one (env, variant, seed) for ``steps`` env steps; returns the run summary (see ``run_summary``)."""
    from zoo.core.build import build_datamodule, build_module
    from zoo.core.data import set_seed
    from zoo.core.recipe import load_recipe

    critic, cons = VARIANTS[variant]
    cfg = load_recipe(
        RECIPES[env],
        [
            f"model.critic={critic}",
            f"model.consolidation={cons}",
            f"seed={seed}",
            f"data.seed={seed}",
            f"data.steps={steps}",
            *overrides,
        ],
    )
    set_seed(seed)
    module, dm = build_module(cfg), build_datamodule(cfg)
    t0 = time.time()
    fit_direct(module, dm)
    s = module.run_summary()
    s.update(env=env, variant=variant, seed=seed, seconds=time.time() - t0, overrides=list(overrides))
    s["git"] = git_at_start()  # the commit this run's code came from (drift.json's own SHA is the aggregator's)
    return s


def runs_provenance(runs: list[dict]) -> tuple[dict, str]:
    """The commits the cached ``runs`` were made at, and a sentence for the table's notes
    (:func:`zoo.core.provenance.cached_runs_provenance`): ``drift.json``'s own provenance is that of the ``--write``
    process, which only aggregates."""
    return cached_runs_provenance([r.get("git") for r in runs])


def fit_direct(module, dm) -> None:
    """What ``trainer.fit`` does for this method, without the Trainer: the module acts in ``dm``'s stream and
    takes one learning step (``module.learn``) per yielded batch, evaluating every ``eval_every`` steps."""
    module.attach(dm)
    opts = module.configure_optimizers()
    for batch in dm.run():
        module.learn(batch, opts)
        module.maybe_evaluate(int(batch["t"]))


def run_plan(env: str, variants: list[str], seeds: list[int], steps: int, overrides: list[str]) -> None:
    out = cache_dir() / env
    out.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        for v in variants:
            f = out / f"{v}-s{seed}.json"
            if f.exists() and json.loads(f.read_text())["steps"] == steps:
                continue
            s = run_one(env, v, seed, steps, overrides)
            f.write_text(json.dumps(s))
            print(
                f"{env} {v} seed {seed}: auc {s['auc_return']:.4f} final eval {s['final_eval_return']} "
                f"({s['seconds']:.0f} s)",
                flush=True,
            )


def write(results_dir: Path | None = None) -> Path:
    """Aggregate the cached runs into ``drift.json`` and the PNGs."""
    from zoo.core.results import summarise, write_result
    from zoo.methods.sf_consolidation import plots
    from zoo.methods.sf_consolidation.metrics import ranking

    runs = [json.loads(f.read_text()) for f in sorted(cache_dir().glob("*/*.json"))]
    if not runs:
        raise SystemExit(f"no cached runs under {cache_dir()}")
    rows, ranks, figs = [], {}, repo_root() / "results" / "sf-consolidation"
    figs.mkdir(parents=True, exist_ok=True)
    order = list(VARIANTS)
    runs.sort(key=lambda r: (r["env"], order.index(r["variant"]), r["seed"]))
    for r in runs:
        rows.append(
            {
                "env": r["env"],
                "variant": r["variant"],
                "seed": r["seed"],
                "steps": r["steps"],
                "auc_return": r["auc_return"],
                "final_eval_return": r["final_eval_return"],
                "mean_eval_return": r["mean_eval_return"],
                "seconds": round(r["seconds"], 1),
            }
        )
        if r["env"] == "fourrooms":  # training-episode success per goal, and when the first goal was first reached
            eps = r["episodes"]
            for task, key in ((0, "success_goal_a"), (1, "success_goal_b")):
                mine = [e["success"] for e in eps if e["task"] == task]
                rows[-1][key] = sum(mine) / len(mine) if mine else None
            rows[-1]["first_success_step"] = next((e["step"] for e in eps if e["success"]), None)
    for env in sorted({r["env"] for r in runs}):
        by = {}
        for r in runs:
            if r["env"] == env:
                by.setdefault(r["variant"], []).append(r)
        ranks[env] = ranking({v: [x["auc_return"] for x in rs] for v, rs in by.items()})
        plots.plot_curves(by, figs / f"{env}-return-vs-step.png", f"{env}: eval return under the current drift")
        plots.plot_auc_bars(ranks[env], figs / f"{env}-auc.png", f"{env}: AUC of training return (95% bootstrap CI)")
        multi = [x for x in by.get("sf-multi", []) if x["history"] and x["history"][-1]["beaker_distances"]]
        if multi:
            from zoo.methods.sf_consolidation.beakers import storage_timescales

            plots.plot_distances(
                multi[0]["history"], storage_timescales(5, 0.05)[1:], figs / f"{env}-beaker-distances.png"
            )
        maps = [h for h in (multi[0]["history"] if multi else []) if "value_map" in h]
        if len(maps) >= 2:
            plots.plot_value_maps(
                [min(maps, key=lambda h: h["slip_prob"]), max(maps, key=lambda h: h["slip_prob"])],
                figs / f"{env}-value-maps.png",
            )
    order_text = "; ".join(
        f"{env}: " + " > ".join(f"{x['variant']} {x['mean']:.3f} [{x['lo']:.3f}, {x['hi']:.3f}]" for x in rk)
        for env, rk in ranks.items()
    )
    protocol = sorted({(r["env"], r["steps"], " ".join(r["overrides"])) for r in runs})
    run_git, run_note = runs_provenance(runs)
    if run_git["unpinned"]:
        print(f"warning: {run_note}", flush=True)
    notes = (
        "Drift experiment (ours): each env's recipe (`sf-consolidation.yaml`: compact 11x11 Four Rooms, slip "
        "noisy sine in [0, 0.45], two goals alternating; `sf-consolidation-halfcheetah.yaml`: mass and inertia "
        "noisy sine x[0.6, 1.4]) with these steps and overrides: "
        + "; ".join(f"{e}: {s} steps, {o or 'none'}" for e, s, o in protocol)
        + ". Variants: sf-multi = SF + 5 beakers, sf-single = SF + 2 beakers, q-multi = Q net + 5 beakers, "
        "plain = DQN/TD3 with a Q critic, ewc / reset / injection = SF net with online EWC, resets of the last "
        "two layers, plasticity injection. auc_return = mean over env steps of the last finished episode's "
        "return; eval under the current dynamics every model.eval_every steps (final and mean over evals). "
        "Ranking by AUC with 95% bootstrap CIs over seeds: " + order_text + ". " + run_note
    )
    return write_result(
        "sf-consolidation",
        "drift",
        rows,
        summary=summarise(
            rows,
            [
                "auc_return",
                "final_eval_return",
                "mean_eval_return",
                "success_goal_a",
                "success_goal_b",
                "first_success_step",
                "seconds",
            ],
            by=["env", "variant"],
        ),
        paper=PAPER,
        notes=notes,
        packages=["gymnasium", "mujoco", "minigrid"],
        extra={"ranking": ranks, "run_commits": run_git},
        results_dir=results_dir,
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m zoo.methods.sf_consolidation.experiments")
    p.add_argument("--env", choices=list(RECIPES))
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=30000)
    p.add_argument("--override", nargs="*", default=[], help="recipe overrides key=value for every run")
    p.add_argument("--write", action="store_true", help="aggregate cached runs into results/ and PNGs")
    a = p.parse_args(argv)
    if a.env:
        run_plan(a.env, a.variants, a.seeds, a.steps, a.override)
    if a.write:
        print(write())


if __name__ == "__main__":
    main()
