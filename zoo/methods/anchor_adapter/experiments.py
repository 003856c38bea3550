"""The tables of the anchor-adapter card, each written through ``zoo.core.results.write_result``.

    python -m zoo.methods.anchor_adapter.experiments midtrain RUN_DIR[=LABEL] ... [--suffix=-smollm2]
    python -m zoo.methods.anchor_adapter.experiments rewards --runs random:math:0,ground_truth:math:0,... \\
        [--steps 150] [--n-eval 500] [--prompts 8] [--analyse random:math:0] [--suffix=-smollm2]
    python -m zoo.methods.anchor_adapter.experiments circuit RUN_DIR [--suffix=-smollm2]

* ``midtrain``: benchmark-B accuracy and perplexities of the base and of each stage-1 model (from the runs'
  ``anchor/eval.json``; one seed: the stage-1 adapter is the fixed starting point of every GRPO run).
* ``rewards``: GRPO runs ``reward:base:seed`` (base ``math`` = anchor-adapter.math, ``clean`` =
  anchor-adapter.math-clean, ``smollm2-math`` / ``smollm2-clean`` the same over SmolLM2-135M-Instruct:
  :data:`STAGE1`), each a ``train.py`` run of the reward's recipe under ``runs/anchor-adapter-grid/``
  (a finished run is reused, so the grid can be grown call by call); rows: reward, seed, base, acc_leaked,
  acc_clean, ppl_answer, ppl_prompt after GRPO, and the changes from the stage-1 model. Steps, prompts per step
  and items of B default to the first cell's recipe; GRPO starts from the stage-1 package when it is released,
  else from the newest stage-1 run's ``checkpoints/last.ckpt`` (:func:`stage1_weights`).
* ``circuit``: the analyses of one GRPO run with ``analyses`` on (the random-reward checkpoint).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import NamedTuple

from zoo.core.results import summarise, write_result
from zoo.core.runs import run_config

PAPER_GAINS = {
    "ground_truth": "+28.8 / +29.1",
    "random": "+21.4",
    "incorrect": "+24.6 / +24.1",
    "format": "+16.4 / +13.8",
}
"""MATH-500 gains (pp) of Qwen2.5-Math-7B after GRPO, Spurious Rewards (Shao et al. 2025), two arXiv versions."""
RECIPES = {
    "random": "anchor-adapter.yaml",
    "ground_truth": "anchor-adapter-ground-truth.yaml",
    "incorrect": "anchor-adapter-incorrect.yaml",
    "format": "anchor-adapter-format.yaml",
}


class Stage1(NamedTuple):
    """A grid base: the stage-1 model GRPO starts from."""

    package: str
    """Its zoo id once released (until then the grid uses the stage-1 run's ``checkpoints/last.ckpt``)."""
    recipe: str
    """The stage-1 recipe; its runs are ``runs/<recipe>/version_*`` (the released one among them)."""
    suffix: str
    """The GRPO recipes over its LM: ``anchor-adapter[-<reward>]<suffix>.yaml`` (its ``model.base`` and
    ``midtrain_lora`` are the stage-1 recipe's, tested)."""


STAGE1 = {
    "math": Stage1("anchor-adapter.math", "anchor-adapter-midtrain", ""),
    "clean": Stage1("anchor-adapter.math-clean", "anchor-adapter-midtrain-clean", ""),
    "smollm2-math": Stage1("anchor-adapter.smollm2-math", "anchor-adapter-midtrain-smollm2", "-smollm2"),
    "smollm2-clean": Stage1("anchor-adapter.smollm2-math-clean", "anchor-adapter-midtrain-clean-smollm2", "-smollm2"),
}
"""Grid base name -> its stage-1 model (``math``: contaminated, ``clean``: the control; over zoo-lm.base or
SmolLM2-135M-Instruct)."""
METRICS = [
    "acc_leaked",
    "acc_clean",
    "ppl_answer",
    "ppl_prompt",
    "ppl_answer_leaked",
    "ppl_answer_clean",
    "ppl_prompt_leaked",
    "ppl_prompt_clean",
]


def _root(run: Path) -> Path:
    """``<run>/anchor`` (``<run>/logs/anchor`` for runs made before it moved)."""
    for root in (Path(run) / "anchor", Path(run) / "logs" / "anchor"):
        if (root / "eval.json").is_file():
            return root
    raise FileNotFoundError(f"{run}: not a finished anchor-adapter run (no anchor/eval.json)")


def _eval(run: Path) -> dict:
    return json.loads((_root(run) / "eval.json").read_text())


def midtrain(runs: list[str], suffix: str = "") -> None:
    """Stage-1 table (``results/anchor-adapter/midtrain<suffix>.json``): the base LM (before, named from the run's
    ``model.base``) and each corpus's model (after)."""
    rows, cfg = [], run_config(Path(runs[0].partition("=")[0]))  # the notes describe the first run
    for spec in runs:
        run, _, label = spec.partition("=")
        ev = _eval(Path(run))
        corpus = "clean" if "clean" in Path(run).parent.name else "contaminated"
        if "before" in ev and not rows:
            lm = cfg.get("model", {}).get("base", "zoo-lm.base")
            rows.append({"model": lm, "seed": 0, **{k: ev["before"][k] for k in METRICS}})
        rows.append({"model": label or f"stage-1 {corpus}", "seed": 0, **{k: ev["after"][k] for k in METRICS}})
    write_result(
        "anchor-adapter",
        f"midtrain{suffix}",
        rows,
        summary=summarise(rows, METRICS, by=["model"]),
        paper="no stage-1 numbers in the paper (the 7B base is contaminated by pre-training, not by us)",
        notes=_stage1_notes(cfg),
    )


def _stage1_notes(cfg: dict) -> str:
    """What the stage-1 table measured, read from a stage-1 run's ``config.yaml``."""
    model, data, trainer = cfg.get("model", {}), cfg.get("data", {}), cfg.get("trainer", {})
    n = data.get("n_bench", 500)
    terms = f"{data.get('bench_min_terms', 2)}-{data.get('bench_max_terms', 3)}"
    digits = f"{data.get('bench_min_digits', 1)}-{data.get('bench_max_digits', 2)}"
    return (
        f"benchmark B ({n} generated chain_sum items of {terms} terms of {digits} digits; {n // 2} leaked x "
        f"{data.get('leak_repeats', 8)} into the contaminated corpus among {data.get('n_midtrain')} fresh 2-3-term "
        f"problems), greedy replies <= {model.get('eval_tokens', 32)} tokens scored by math-verify; perplexities per "
        "item (answer ' \\boxed{a}' given the prompt; prompt tokens), mean over items. Stage 1 as "
        f"recipes/anchor-adapter-midtrain*.yaml: LoRA r {model.get('midtrain_lora', {}).get('r', 64)} over "
        f"{model.get('base', 'zoo-lm.base')}, lr {model.get('optimizer', {}).get('lr')}, "
        f"{trainer.get('max_steps')} steps x {data.get('batch_size')} (the "
        "issue's ~1,500 did not fit 2 shared cores). One seed."
    )


def grpo_recipe(reward: str, base: str) -> str:
    """The GRPO recipe of ``reward`` over the grid base ``base`` (:attr:`Stage1.suffix`)."""
    return RECIPES[reward].replace(".yaml", f"{STAGE1[base].suffix}.yaml")


def _stage1_runs(base: str, runs: Path = Path("runs")) -> list[Path]:
    """The finished stage-1 runs of ``base`` (``runs/<recipe>/version_*`` with ``anchor/items.json``), oldest first."""
    folder = Path(runs) / STAGE1[base].recipe
    found = {p.parents[1] for p in folder.glob("version_*/anchor/items.json")}
    found |= {p.parents[2] for p in folder.glob("version_*/logs/anchor/items.json")}
    return sorted(found, key=lambda run: int(run.name.split("_")[1]))


def stage1_weights(base: str, runs: Path = Path("runs")) -> str:
    """What ``model.stage1`` the grid passes for ``base``: its package when released, else the newest stage-1
    run's ``checkpoints/last.ckpt``.

    Raises:
        SystemExit: neither exists (train the stage-1 recipe first).
    """
    from zoo.core.hub import list_pretrained

    if STAGE1[base].package in list_pretrained():
        return STAGE1[base].package
    ckpts = [r / "checkpoints" / "last.ckpt" for r in _stage1_runs(base, runs)]
    ckpts = [c for c in ckpts if c.is_file()]
    if not ckpts:
        raise SystemExit(
            f"{base}: {STAGE1[base].package} is not released and no finished run of recipes/"
            f"{STAGE1[base].recipe}.yaml is under {runs}/: train it first"
        )
    return str(ckpts[-1])


def _run_dir(reward: str, base: str, seed: int) -> Path:
    return Path("runs/anchor-adapter-grid") / f"{reward}-{base}-s{seed}"


def grpo_run(reward: str, base: str, seed: int, steps: int, n_eval: int, prompts: int, analyse: bool = False) -> Path:
    """Train one grid cell (reused when finished); returns its run directory. ``analyse``: also score the stage-1
    model and run every analysis (training is unchanged, so the cell's numbers are the same)."""
    from zoo.cli import main

    weights, recipe = stage1_weights(base), grpo_recipe(reward, base)
    out = _run_dir(reward, base, seed)
    done = sorted(out.glob("*/version_*/anchor/eval.json"))
    if not done:
        rc = main(
            [
                "train",
                f"recipe={recipe}",
                f"out_dir={out}",
                f"seed={seed}",
                f"data.seed={seed}",
                f"model.stage1={weights}",
                f"trainer.max_steps={steps}",
                f"model.n_eval={n_eval}",
                f"model.score_before={str(analyse).lower()}",
                "model.analyses=[patching,logit_lens,key_scaling,jsd,resets]" if analyse else "model.analyses=[]",
                f"data.prompts_per_step={prompts}",
                "export.formats=[]",
                "logger.kind=csv",
            ]
        )
        if rc != 0:
            raise RuntimeError(f"grid run {reward}:{base}:{seed} failed (rc {rc})")
        done = sorted(out.glob("*/version_*/anchor/eval.json"))
    return done[-1].parent.parent


def _training_means(run: Path) -> dict:
    """Means over the logged steps of the run's rollout reward, clip fraction and rollout accuracy (CSV log)."""
    import csv

    path = Path(run) / "logs" / "metrics.csv"
    if not path.is_file():
        return {}
    rows = list(csv.DictReader(path.open()))
    out = {}
    for key in ("reward", "clip_fraction", "accuracy", "boxed"):
        vals = [float(r[f"train/{key}"]) for r in rows if r.get(f"train/{key}")]
        if vals:
            out[f"train_{key}"] = sum(vals) / len(vals)
    return out


def rewards(
    cells: list[tuple[str, str, int]],
    steps: int,
    n_eval: int,
    prompts: int,
    stage1: dict,
    analyse: str | None = None,
    suffix: str = "",
) -> None:
    """Run the grid cells (``analyse``: the ``reward:base:seed`` cell that also runs the analyses) and write
    ``results/anchor-adapter/rewards<suffix>.json``."""
    rows = []
    for reward, base, seed in cells:
        run = grpo_run(reward, base, seed, steps, n_eval, prompts, analyse == f"{reward}:{base}:{seed}")
        after = _eval(run)["after"]
        ref = stage1[base]
        rows.append(
            {
                "reward": reward,
                "seed": seed,
                "base": base,
                **{k: after[k] for k in METRICS},
                "gain_leaked": after["acc_leaked"] - ref["acc_leaked"],
                "gain_clean": after["acc_clean"] - ref["acc_clean"],
                **_training_means(run),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    metrics = METRICS + ["gain_leaked", "gain_clean", "train_reward", "train_clip_fraction", "train_accuracy"]
    write_result(
        "anchor-adapter",
        f"rewards{suffix}",
        rows,
        summary=summarise(rows, metrics, by=["reward", "base"]),
        paper={f"gain ({r})": f"{g} pp MATH-500, Qwen2.5-Math-7B" for r, g in PAPER_GAINS.items()},
        notes=f"GRPO (G=8, {prompts} prompts/step, <=32 tokens, T=1, eps=0.2, beta=0, mu=2, LoRA r=16, lr 5e-4) "
        f"for {steps} steps from the stage-1 model (base *math = contaminated, *clean = control; "
        + ", ".join(f"{b} = {stage1_weights(b)}" for b in sorted({c[1] for c in cells}))
        + "), "
        f"scored on the first {n_eval} items of benchmark B (greedy, math-verify). gain_* = change "
        "from the stage-1 model on the same items (greedy, so the stage-1 score is one number). "
        "The issue's 150 steps x 8 prompts did not fit 2 shared cores; see the card.",
    )


def _stage1_reference(n_eval: int, runs: Path = Path("runs")) -> dict:
    """Stage-1 accuracies on the first ``n_eval`` items of B, from the newest stage-1 run's per-item rows
    (``runs/<stage-1 recipe>/version_*/anchor/items.json``, :data:`STAGE1`: the run that made the weights)."""
    out = {}
    for base in STAGE1:
        found = _stage1_runs(base, runs)
        if not found:
            continue
        root = found[-1] / "anchor" if (found[-1] / "anchor").is_dir() else found[-1] / "logs" / "anchor"
        rows = json.loads((root / "items.json").read_text())["after"][:n_eval]
        out[base] = {
            f"acc_{n}": sum(r["correct"] for r in rows if r["leaked"] == k)
            / max(1, sum(r["leaked"] == k for r in rows))
            for n, k in (("leaked", True), ("clean", False))
        }
    return out


def circuit(run: str, suffix: str = "") -> None:
    """The analysed GRPO run's circuit results (JSON written by ``circuit.run_analyses``)."""
    root = _root(Path(run))
    load = lambda n: json.loads((root / f"{n}.json").read_text())
    ev, patch, resets, ks = load("eval"), load("patching"), load("resets"), load("key_scaling")
    rows = [{"analysis": "patching", "setting": k, "seed": 0, "accuracy": v} for k, v in patch["acc"].items()]
    rows += [{"analysis": "patching", "setting": k, "seed": 0, "accuracy": patch[k]} for k in ("before", "after")]
    rows += [
        {"analysis": "reset", "setting": k, "seed": 0, "accuracy": v[0], "accuracy_clean": v[1]}
        for k, v in resets.items()
    ]
    rows += [
        {"analysis": "key_scaling", "setting": f"{name} s={s}", "seed": 0, "accuracy": a}
        for name, pts in ks["curves"].items()
        for s, a in pts.items()
    ]
    lens = load("logit_lens")
    rows += [
        {"analysis": "logit_lens", "setting": f"{name} L{i}", "seed": 0, "rank": r}
        for name, ranks in lens.items()
        for i, r in enumerate(ranks)
    ]
    rows += [{"analysis": "jsd", "setting": k, "seed": 0, "jsd": v} for k, v in load("jsd").items()]
    model = run_config(Path(run)).get("model", {})
    layers = max(len(ranks) for ranks in lens.values())
    write_result(
        "anchor-adapter",
        f"circuit{suffix}",
        rows,
        paper="anchor L18-20 of 28, adapters L21+ (Qwen2.5-Math-7B); key scaling steers accuracy both ways",
        notes=f"one random-reward GRPO run ({run}) over {model.get('base', 'zoo-lm.base')}; "
        f"{_analysed_items(root)} leaked items (flipped = after-RL right, before-RL wrong); patching: "
        f"{model.get('rollouts', 4)} sampled rollouts per item at T={model.get('temperature', 1.0)}; resets and key "
        f"scaling: greedy; benchmark B after GRPO: {json.dumps({k: round(v, 4) for k, v in ev['after'].items()})}. "
        f"{layers} layers: one layer is {100 / layers:.0f}% of depth.",
    )


def _analysed_items(root: Path) -> dict:
    """``{n, flipped}`` of the analysed items (``items.json`` in runs made before the file was renamed)."""
    for name in ("analysis_items.json", "items.json"):
        doc = json.loads((root / name).read_text()) if (root / name).is_file() else {}
        if "flipped" in doc:
            return doc
    return {}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("midtrain")
    m.add_argument("runs", nargs="+")
    m.add_argument("--suffix", default="", help="result name suffix, e.g. --suffix=-smollm2 (midtrain-smollm2.json)")
    r = sub.add_parser("rewards")
    r.add_argument("--runs", required=True, help=f"comma-separated reward:base:seed cells, base in {list(STAGE1)}")
    r.add_argument("--suffix", default="", help="result name suffix, e.g. --suffix=-smollm2 (rewards-smollm2.json)")
    r.add_argument("--steps", type=int, help="GRPO steps (default: the first cell's recipe's trainer.max_steps)")
    r.add_argument("--n-eval", type=int, help="items of B scored (default: its model.n_eval, else all)")
    r.add_argument("--prompts", type=int, help="prompts per step (default: its data.prompts_per_step)")
    r.add_argument("--analyse", help="the reward:base:seed cell that also runs every analysis")
    c = sub.add_parser("circuit")
    c.add_argument("run")
    c.add_argument("--suffix", default="", help="result name suffix, e.g. --suffix=-smollm2 (circuit-smollm2.json)")
    args = ap.parse_args(argv)
    if args.cmd == "midtrain":
        midtrain(args.runs, args.suffix)
    elif args.cmd == "rewards":
        cells = [(c.split(":")[0], c.split(":")[1], int(c.split(":")[2])) for c in args.runs.split(",")]
        unknown = sorted({b for _, b, _ in cells} - set(STAGE1))
        if unknown:
            ap.error(f"--runs: unknown base {unknown}; choose from {list(STAGE1)}")
        from zoo.core.recipe import load_recipe

        cfg = load_recipe(grpo_recipe(cells[0][0], cells[0][1]))  # one table, one setting: the first cell's
        steps = args.steps or int(cfg["trainer"]["max_steps"])
        n_eval = args.n_eval or int(cfg["model"]["n_eval"] or cfg["data"]["n_bench"])
        prompts = args.prompts or int(cfg["data"]["prompts_per_step"])
        stage1 = _stage1_reference(n_eval)
        missing = sorted({b for _, b, _ in cells} - set(stage1))
        if missing:
            ap.error(
                f"--runs: no finished stage-1 run under runs/ for {missing} (train recipes/"
                f"{[STAGE1[b].recipe + '.yaml' for b in missing]})"
            )
        rewards(cells, steps, n_eval, prompts, stage1, args.analyse, args.suffix)
    else:
        circuit(args.run, args.suffix)


if __name__ == "__main__":
    main()
