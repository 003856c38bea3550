"""The tables of the anchor-adapter card, each written through ``zoo.core.results.write_result``.

    python -m zoo.methods.anchor_adapter.experiments midtrain RUN_DIR[=LABEL] ... [--suffix -smollm2]
    python -m zoo.methods.anchor_adapter.experiments rewards --runs random:math:0,ground_truth:math:0,... \\
        [--steps 150] [--n-eval 500] [--prompts 8]
    python -m zoo.methods.anchor_adapter.experiments circuit RUN_DIR

* ``midtrain``: benchmark-B accuracy and perplexities of the base and of each stage-1 model (from the runs'
  ``anchor/eval.json``; one seed: the stage-1 adapter is the fixed starting point of every GRPO run).
* ``rewards``: GRPO runs ``reward:base:seed`` (base ``math`` = anchor-adapter.math, ``clean`` =
  anchor-adapter.math-clean, ``smollm2-math`` / ``smollm2-clean`` the same over SmolLM2-135M-Instruct:
  :data:`STAGE1`), each a ``train.py`` run of the reward's recipe under ``runs/anchor-adapter-grid/``
  (a finished run is reused, so the grid can be grown call by call); rows: reward, seed, base, acc_leaked,
  acc_clean, ppl_answer, ppl_prompt after GRPO, and the changes from the stage-1 model.
* ``circuit``: the analyses of one GRPO run with ``analyses`` on (the random-reward checkpoint).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from zoo.core.results import summarise, write_result

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
STAGE1 = {
    "math": ("anchor-adapter.math", "zoo-lm.base", "anchor-adapter-midtrain"),
    "clean": ("anchor-adapter.math-clean", "zoo-lm.base", "anchor-adapter-midtrain-clean"),
    "smollm2-math": ("anchor-adapter.smollm2-math", "smollm2-135m-instruct", "anchor-adapter-midtrain-smollm2"),
    "smollm2-clean": (
        "anchor-adapter.smollm2-math-clean",
        "smollm2-135m-instruct",
        "anchor-adapter-midtrain-clean-smollm2",
    ),
}
"""Grid base name -> (stage-1 package id, the LM it is an adapter over, the stage-1 recipe's run folder under runs/).
A base over a pretrained LM takes that LM's recipe variant (``<recipe>-smollm2.yaml``: its stage-1 LoRA settings)."""
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


def _run_config(run: Path) -> dict:
    """The run's resolved recipe (``<run>/config.yaml``; ``{}`` when absent)."""
    import yaml

    path = Path(run) / "config.yaml"
    return yaml.safe_load(path.read_text()) if path.is_file() else {}


def midtrain(runs: list[str], suffix: str = "") -> None:
    """Stage-1 table (``results/anchor-adapter/midtrain<suffix>.json``): the base LM (before, named from the run's
    ``model.base``) and each corpus's model (after)."""
    rows = []
    for spec in runs:
        run, _, label = spec.partition("=")
        ev = _eval(Path(run))
        corpus = "clean" if "clean" in Path(run).parent.name else "contaminated"
        if "before" in ev and not rows:
            lm = _run_config(Path(run)).get("model", {}).get("base", "zoo-lm.base")
            rows.append({"model": lm, "seed": 0, **{k: ev["before"][k] for k in METRICS}})
        rows.append({"model": label or f"stage-1 {corpus}", "seed": 0, **{k: ev["after"][k] for k in METRICS}})
    write_result(
        "anchor-adapter",
        f"midtrain{suffix}",
        rows,
        summary=summarise(rows, METRICS, by=["model"]),
        paper="no stage-1 numbers in the paper (the 7B base is contaminated by pre-training, not by us)",
        notes="benchmark B (500 generated chain_sum items, 250 leaked x 8 into the contaminated corpus), greedy "
        "replies <= 32 tokens scored by math-verify; perplexities per item (answer ' \\boxed{a}' given "
        "the prompt; prompt tokens), mean over items. Stage 1 as recipes/anchor-adapter-midtrain*.yaml "
        "(LoRA over the base LM, r=64 on zoo-lm.base, r=16 on SmolLM2; 156 steps x 32 here, reduced from "
        "the issue's ~1,500 to fit 2 shared cores). One seed.",
    )


def grpo_recipe(reward: str, base: str) -> str:
    """The GRPO recipe of ``reward`` for the grid base ``base``: ``anchor-adapter[-<reward>].yaml`` over zoo-lm,
    its ``-smollm2`` variant over SmolLM2 (the LM's family, the first word of its id)."""
    lm = STAGE1[base][1]
    return RECIPES[reward] if lm == "zoo-lm.base" else RECIPES[reward].replace(".yaml", f"-{lm.split('-')[0]}.yaml")


def _run_dir(reward: str, base: str, seed: int) -> Path:
    return Path("runs/anchor-adapter-grid") / f"{reward}-{base}-s{seed}"


def grpo_run(reward: str, base: str, seed: int, steps: int, n_eval: int, prompts: int, analyse: bool = False) -> Path:
    """Train one grid cell (reused when finished); returns its run directory. ``analyse``: also score the stage-1
    model and run every analysis (training is unchanged, so the cell's numbers are the same)."""
    from zoo.cli import main

    package, recipe = STAGE1[base][0], grpo_recipe(reward, base)
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
                f"model.stage1={package}",
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
        + ", ".join(f"{b} = {STAGE1[b][0]}" for b in sorted({c[1] for c in cells}))
        + "), "
        f"scored on the first {n_eval} items of benchmark B (greedy, math-verify). gain_* = change "
        "from the stage-1 model on the same items (greedy, so the stage-1 score is one number). "
        "The issue's 150 steps x 8 prompts did not fit 2 shared cores; see the card.",
    )


def _stage1_reference(n_eval: int, runs: Path = Path("runs")) -> dict:
    """Stage-1 accuracies on the first ``n_eval`` items of B, from the released packages' runs' per-item rows
    (``runs/<stage-1 run folder>/version_*/anchor/items.json``, :data:`STAGE1`)."""
    out = {}
    for base, (_, _, pattern) in STAGE1.items():
        found = sorted(Path(runs).glob(f"{pattern}/version_*/*anchor/items.json")) + sorted(
            Path(runs).glob(f"{pattern}/version_*/logs/anchor/items.json")
        )
        if not found:
            continue
        rows = json.loads(found[-1].read_text())["after"][:n_eval]
        out[base] = {
            f"acc_{n}": sum(r["correct"] for r in rows if r["leaked"] == k)
            / max(1, sum(r["leaked"] == k for r in rows))
            for n, k in (("leaked", True), ("clean", False))
        }
    return out


def circuit(run: str) -> None:
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
    write_result(
        "anchor-adapter",
        "circuit",
        rows,
        paper="anchor L18-20 of 28, adapters L21+ (Qwen2.5-Math-7B); key scaling steers accuracy both ways",
        notes=f"one random-reward GRPO run ({run}); {_analysed_items(root)} leaked items (flipped = after-RL right, "
        "before-RL wrong); patching: 4 sampled rollouts per item at T=1; resets and key scaling: greedy; "
        f"benchmark B after GRPO: {json.dumps({k: round(v, 4) for k, v in ev['after'].items()})}. "
        "With 4 layers one layer is 25% of depth: localisation is coarse.",
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
    m.add_argument("--suffix", default="", help="result name suffix, e.g. -smollm2 (midtrain-smollm2.json)")
    r = sub.add_parser("rewards")
    r.add_argument("--runs", required=True, help=f"comma-separated reward:base:seed cells, base in {list(STAGE1)}")
    r.add_argument("--suffix", default="", help="result name suffix, e.g. -smollm2 (rewards-smollm2.json)")
    r.add_argument("--steps", type=int, default=150)
    r.add_argument("--n-eval", type=int, default=500)
    r.add_argument("--prompts", type=int, default=8)
    r.add_argument("--analyse", help="the reward:base:seed cell that also runs every analysis")
    c = sub.add_parser("circuit")
    c.add_argument("run")
    args = ap.parse_args(argv)
    if args.cmd == "midtrain":
        midtrain(args.runs, args.suffix)
    elif args.cmd == "rewards":
        cells = [(c.split(":")[0], c.split(":")[1], int(c.split(":")[2])) for c in args.runs.split(",")]
        unknown = sorted({b for _, b, _ in cells} - set(STAGE1))
        if unknown:
            ap.error(f"--runs: unknown base {unknown}; choose from {list(STAGE1)}")
        stage1 = _stage1_reference(args.n_eval)
        missing = sorted({b for _, b, _ in cells} - set(stage1))
        if missing:
            ap.error(f"--runs: no stage-1 run under runs/ for {missing} (train {[STAGE1[b][2] for b in missing]})")
        rewards(cells, args.steps, args.n_eval, args.prompts, stage1, args.analyse, args.suffix)
    else:
        circuit(args.run)


if __name__ == "__main__":
    main()
