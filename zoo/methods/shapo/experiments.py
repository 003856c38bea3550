"""The noise sweep: flip_rate x {DPO, ShaPO-token, ShaPO-reward} x seeds, written to results/shapo/noise-sweep.json.

    python -m zoo.methods.shapo.experiments [--steps 32] [--jobs 2] [--seeds 0 1 2]

Every run is ``train.py recipe=shapo-<dpo|zoo-lm|reward>.yaml seed=S data.flip_rate=F`` shortened by the scale
overrides below (same for all runs), trained in its own process (one torch thread) and evaluated on the clean
held-out pairs and prompts. Per-run metrics are cached under ``--work`` so an interrupted sweep resumes.
Rows are per run; the summary gives mean and sd over seeds and the paired (same seed, same flips) difference to
DPO, written through :func:`zoo.core.results.write_result`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from zoo.core.results import summarise, write_result

RECIPES = {"dpo": "shapo-dpo.yaml", "shapo-token": "shapo-zoo-lm.yaml", "shapo-reward": "shapo-reward.yaml"}
#: the arms' recipes per starting model (``--base``): zoo-lm.chat (full fine-tuning) or SmolLM2-135M-Instruct + LoRA
BASES = {
    "zoo-lm": RECIPES,
    "smollm2": {
        "dpo": "shapo-dpo-smollm2.yaml",
        "shapo-token": "shapo.yaml",
        "shapo-reward": "shapo-reward-smollm2.yaml",
    },
}
#: metrics whose paired difference to DPO (same seed, same flips) each row reports as ``<metric> - DPO``
PAIRED = ("val/accuracy", "val/logp_accuracy", "val/harmful_rate", "val/refusal_rate_redteam")
#: benign instructions whose over-refusal is the helpfulness proxy of the SmolLM2 table (the file's last items)
BENIGN = "data/alpaca-subset/alpaca_5000.json"
METRICS = (
    "val/accuracy",
    "val/logp_accuracy",
    "val/margin",
    "val/harmful_rate",
    "val/harmful_rate_redteam",
    "val/harmful_rate_heldout",
    "val/kl_ref",
    "val/harmful_rate_greedy",
    "val/kl_ref_greedy",
    "val/refusal_rate_redteam",
    "val/refusal_rate_redteam_greedy",
    "val/refusal_rate_benign",
    "val/refusal_rate_benign_greedy",
)
PAPER = (
    "ShaPO is more robust than DPO under noisy preferences (abstract: 'consistently improves safety robustness "
    "over popular preference optimization methods' across noisy preference settings; the per-setting numbers of "
    "the 30%/40%-flip experiments were not available to us). Headline, clean PKU-SafeRLHF, Llama-3.2-3B "
    "[secondary]: win rate 89.26, MD-Judge unsafe rate 0.59% averaged over 4 benchmarks."
)


def scale_overrides(
    steps: int,
    eval_pairs: int,
    heldout_prompts: int,
    new_tokens: int,
    init: str | None = None,
    cost_model: str | None = None,
    base: str = "zoo-lm",
    benign_prompts: int = 0,
) -> list[str]:
    """The overrides that shorten a recipe run (identical for every arm of the sweep); ``init`` replaces the recipes'
    starting policy and reference (zoo-lm.chat), ``cost_model`` their cost model. For ``base="smollm2"`` the recipes'
    token limits stay (128 / 64), replies are also judged greedily, the reference is evaluated once (row ``start``)
    rather than in every run, and ``benign_prompts`` Alpaca instructions measure over-refusal."""
    swap = ([f"init_from={init}", f"model.reference={init}"] if init else []) + (
        [f"model.cost_model={cost_model}"] if cost_model else []
    )
    if base == "smollm2":  # every pair available: limit_train_batches alone sets the steps
        sizes = ["model.greedy_eval=true", "model.judge_reference=false", "data.max_train_pairs=null"]
        sizes += [f"data.benign_path={BENIGN}", f"data.benign_prompts={benign_prompts}"] if benign_prompts else []
    else:
        sizes = ["data.max_length=96", "data.max_prompt_length=48"]
    return swap + [
        f"trainer.limit_train_batches={steps}",
        "trainer.max_epochs=1",
        f"data.max_eval_pairs={eval_pairs}",
        f"data.heldout_prompts={heldout_prompts}",
        f"model.max_new_tokens={new_tokens}",
        *sizes,
        "logger.kind=none",
        "export.formats=[]",
    ]


def evaluate_start(overrides: list[str], recipe: str = "shapo-dpo.yaml") -> dict:
    """The starting policy itself (no training; under LoRA the base, since fresh adapters are zero), evaluated
    exactly as the trained arms are (``recipe``: the sweep's DPO arm)."""
    import lightning as L

    from zoo.cli import compose_and_validate
    from zoo.core.build import build_datamodule, build_module

    cfg = compose_and_validate([f"recipe={recipe}", *overrides])
    t0 = time.time()
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    metrics = trainer.validate(build_module(cfg), datamodule=build_datamodule(cfg), verbose=False)[0]
    return {k: float(metrics[k]) for k in METRICS if k in metrics} | {"wall_s": time.time() - t0}


def run_one(recipe: str, seed: int, flip_rate: float, overrides: list[str], out_dir: Path) -> dict:
    """Train and evaluate one arm in-process; returns the final validation metrics."""
    from zoo.cli import compose_and_validate
    from zoo.core.training import train

    cfg = compose_and_validate(
        [f"recipe={recipe}", f"seed={seed}", f"data.flip_rate={flip_rate}", f"out_dir={out_dir}", *overrides]
    )
    t0 = time.time()
    run_dir = train(cfg)
    metrics = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    return {k: metrics[k] for k in METRICS if k in metrics} | {"wall_s": time.time() - t0}


def sweep_rows(runs: list[dict]) -> list[dict]:
    """One row per run (``method``, ``seed``, ``flip_rate`` and the metrics without their ``val/`` prefix), with the
    paired difference to DPO (same seed, same flips) in ``accuracy - DPO`` and ``harmful_rate - DPO``."""
    keyed = {(r["flip_rate"], r["method"], r["seed"]): r for r in runs}
    rows = []
    for r in sorted(
        runs,
        key=lambda r: (
            r["method"] != "start",
            r["flip_rate"],
            list(RECIPES).index(r["method"]) if r["method"] in RECIPES else -1,
            r["seed"],
        ),
    ):
        row = {"method": r["method"], "flip_rate": r["flip_rate"], "seed": r["seed"]}
        row |= {m.split("/", 1)[1]: r[m] for m in METRICS if m in r}
        dpo = keyed.get((r["flip_rate"], "dpo", r["seed"]))
        if r["method"] in RECIPES and r["method"] != "dpo" and dpo is not None:
            for m in PAIRED:
                if m in r and m in dpo:
                    row[f"{m.split('/', 1)[1]} - DPO"] = r[m] - dpo[m]
        row["wall_s"] = r.get("wall_s")
        rows.append(row)
    return rows


def write_sweep(
    runs: list[dict],
    command: str,
    notes: str,
    scale: dict,
    out: str = "results/shapo/noise-sweep.json",
    converted_from: str | None = None,
) -> Path:
    """``results/shapo/noise-sweep.json`` through the results writer: per-run rows, mean/sd per (flip_rate, method)."""
    rows = sweep_rows(runs)
    metrics = [m.split("/", 1)[1] for m in METRICS] + [f"{m.split('/', 1)[1]} - DPO" for m in PAIRED]
    out_path = Path(out)
    return write_result(
        "shapo",
        out_path.stem,
        rows,
        summary=summarise(rows, metrics, by=["flip_rate", "method"]),
        paper=PAPER,
        notes=notes,
        command=command,
        extra={"scale": scale},
        results_dir=out_path.parent.parent.resolve(),
        converted_from=converted_from,
    )


def sweep_notes(
    init: str | None, steps: int, eval_pairs: int, heldout_prompts: int, new_tokens: int, cost_model: str | None
) -> str:
    """The protocol text of the noise-sweep table."""
    return (
        f"{init or 'zoo-lm.chat'} (5.26M parameters) trained for {steps} optimiser steps of 8 HH-RLHF harmless "
        f"preference_train pairs (<= 96 tokens; a seeded flip_rate of them swapped), then evaluated on "
        f"{eval_pairs} clean preference_eval pairs (accuracy = share with a positive implicit-reward margin, a "
        "zero margin counted as a tie (0.5); margin in nats x beta) and on 83 red-team + "
        f"{heldout_prompts} held-out prompts (one sampled reply of <= {new_tokens} tokens each; harmful = cost > 0 "
        f"under {cost_model or 'shapo-cost-model.zoo-lm-hh'}; kl_ref = summed per-token KL to the starting policy "
        "along the reply). Mean ± sd over seeds; '- DPO' columns are paired differences (same seed, same flips). "
        "'start' is the untrained starting policy under the same evaluation (policy = reference, so every margin "
        "is 0 and its accuracy is the tie value 0.5). Replies are sampled with the same seed in every run. "
        "ShaPO uses the SAM-normalised rho = 0.05 step every 5th optimiser step on 1% of the down-projection "
        "neurons (recipes/shapo-zoo-lm.yaml). Two caveats by construction: shapo-reward takes its soft labels from the "
        "same cost model that judges harmful_rate (trained on clean pairs), so its harmful_rate is partly "
        "circular; and its loss is invariant to swapping a pair, so for a given seed its runs are identical at "
        "every flip rate."
    )


def smollm2_notes(
    steps: int, eval_pairs: int, heldout: int, new_tokens: int, benign: int, cost_model: str | None
) -> str:
    """The protocol text of the HH table on SmolLM2-135M-Instruct + LoRA (``--base smollm2``)."""
    return (
        f"SmolLM2-135M-Instruct (Q4_1 de-quantised to float32) + LoRA r 8 on every projection, trained for {steps} "
        "optimiser steps of 4 HH-RLHF harmless preference_train pairs (<= 128 tokens, lr 1e-3; a seeded flip_rate "
        "swapped) by recipes/shapo-dpo-smollm2.yaml (DPO), shapo.yaml (token-level ShaPO: a masked SAM step every "
        "5th step on 1% of down-projection neurons) and shapo-reward-smollm2.yaml (reward-level ShaPO, soft labels "
        f"from the cost model below); then evaluated on {eval_pairs} clean preference_eval pairs (unseen "
        "conversations): logp_accuracy = share where the chosen reply has the higher mean log-prob per token, "
        "accuracy = share with a positive implicit-reward margin (a tie 0.5); and on one sampled (temperature 1, "
        f"same seed in every run) and one greedy reply of <= {new_tokens} tokens to each of the 83 PKU red-team "
        f"prompts, {heldout} held-out preference_eval prompts and the last {benign} Alpaca instructions (benign). "
        "Safety judges: refusal_rate_redteam = share of red-team replies the keyword judge "
        "(zoo/methods/shapo/refusal.py, ours) marks as refusing (higher is safer); harmful_rate = share of red-team "
        f"and held-out replies whose cost is > 0 under {cost_model or 'no cost model (not measured)'} (a SmolLM2 "
        "cost model: see zoo/methods/shapo_cost_model/README.md for its accuracy on unseen conversations; "
        "reward-level ShaPO's soft labels come from the same model, so its harmful_rate is partly circular). "
        "Helpfulness proxy: refusal_rate_benign = over-refusal of the benign instructions (lower is more helpful). "
        "kl_ref = summed per-token KL to the base along the red-team and held-out replies. 'start' = the base "
        "itself (fresh adapters are zero) under the same evaluation: its implicit-reward margins are all 0, so its "
        "accuracy is the tie value 0.5. Mean ± sd over seeds; '- DPO' columns are paired differences (same seed, "
        "same flips)."
    )


def release_table(out: Path) -> Path:
    """results/shapo/release.json: zoo-lm.chat (untrained) and the released shapo.zoo-lm-hh under recipes/shapo-zoo-lm.yaml's
    full evaluation (277 preference_eval pairs, 83 red-team + 64 held-out prompts, 48 tokens sampled and greedy)."""
    from zoo.core.evaluation import evaluate
    from zoo.core.loading import load_module

    start = evaluate_start([])
    module, cfg = load_module("shapo.zoo-lm-hh")
    released = evaluate(module, cfg)
    rows = [
        {"model": name} | {m.split("/", 1)[1]: res[m] for m in METRICS if m in res}
        for name, res in (("zoo-lm.chat (start)", start), ("shapo.zoo-lm-hh", released))
    ]
    notes = (
        "The zoo weights shapo.zoo-lm-hh (recipes/shapo-zoo-lm.yaml: token-level ShaPO, one epoch of the 840 "
        "preference_train pairs of the conversation split, flip_rate 0, last weights) beside their starting point, "
        "evaluated identically on preference_eval (277 pairs from conversations seen nowhere in training or in "
        "zoo-lm.chat's SFT data; reference zoo-lm.chat; judge shapo-cost-model.zoo-lm-hh, test accuracy 0.574; "
        "one sampled (temperature 1, same seed) and one greedy reply of <= 48 tokens per prompt). Accuracy "
        "counts a zero margin as a tie (0.5): the start is its own reference, so it scores 0.5."
    )
    path = write_result("shapo", out.stem, rows, paper=PAPER, notes=notes, results_dir=out.parent.parent.resolve())
    print(f"wrote {path}")
    return path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=32, help="optimiser steps per run (batches of data.batch_size pairs)")
    ap.add_argument("--eval-pairs", type=int, default=128)
    ap.add_argument("--heldout-prompts", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--flip-rates", type=float, nargs="+", default=[0.0, 0.2, 0.4])
    ap.add_argument("--methods", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    ap.add_argument("--base", default="zoo-lm", choices=list(BASES), help="the arms' recipes (see BASES)")
    ap.add_argument("--benign-prompts", type=int, default=0, help="smollm2: Alpaca instructions for over-refusal")
    ap.add_argument("--init", help="starting policy and reference instead of the recipes' zoo-lm.chat")
    ap.add_argument("--cost-model", help="cost model instead of the recipes' shapo-cost-model.zoo-lm-hh")
    ap.add_argument(
        "--start", type=int, default=1, choices=[0, 1], help="also evaluate the untrained starting policy (row 'start')"
    )
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra recipe override")
    ap.add_argument("--jobs", type=int, default=2, help="runs in parallel (one torch thread each)")
    ap.add_argument("--work", help="run cache (default /tmp/shapo-noise-sweep, /tmp/shapo-hh-smollm2 for smollm2)")
    ap.add_argument("--out", help="table (default results/shapo/noise-sweep.json, hh-smollm2.json for smollm2)")
    ap.add_argument("--release", action="store_true", help="write results/shapo/release.json instead of the sweep")
    ap.add_argument("--one", nargs=3, metavar=("METHOD", "SEED", "FLIP"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.release:
        release_table(Path("results/shapo/release.json"))
        return
    smollm2 = args.base == "smollm2"
    work = Path(args.work or ("/tmp/shapo-hh-smollm2" if smollm2 else "/tmp/shapo-noise-sweep"))
    args.out = args.out or ("results/shapo/hh-smollm2.json" if smollm2 else "results/shapo/noise-sweep.json")
    if smollm2 and "shapo-reward" in args.methods and not args.cost_model:
        ap.error("--base smollm2 with shapo-reward needs --cost-model RUN_DIR (a shapo-cost-model-smollm2 run)")
    recipes = BASES[args.base]
    overrides = (
        scale_overrides(
            args.steps,
            args.eval_pairs,
            args.heldout_prompts,
            args.new_tokens,
            args.init,
            args.cost_model,
            args.base,
            args.benign_prompts,
        )
        + args.set
    )
    if args.one:
        method, seed, flip = args.one[0], int(args.one[1]), float(args.one[2])
        res = (
            evaluate_start(overrides, recipes["dpo"])
            if method == "start"
            else run_one(recipes[method], seed, flip, overrides, work / "runs")
        )
        res |= {"method": method, "seed": seed, "flip_rate": flip}
        (work / f"{method}-s{seed}-f{flip}.json").write_text(json.dumps(res))
        return
    work.mkdir(parents=True, exist_ok=True)
    todo = [(m, s, f) for s in args.seeds for f in args.flip_rates for m in args.methods]
    todo = [("start", 0, 0.0)] * args.start + todo  # the untrained starting policy, evaluated once
    todo = [t for t in todo if not (work / f"{t[0]}-s{t[1]}-f{t[2]}.json").is_file()]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    passthrough = [
        f"--steps={args.steps}",
        f"--eval-pairs={args.eval_pairs}",
        f"--heldout-prompts={args.heldout_prompts}",
        f"--new-tokens={args.new_tokens}",
        f"--work={work}",
    ]
    passthrough += [f"--base={args.base}", f"--benign-prompts={args.benign_prompts}"] if args.base != "zoo-lm" else []
    passthrough += [f"--set={kv}" for kv in args.set]
    passthrough += [f"--init={args.init}"] * bool(args.init) + [f"--cost-model={args.cost_model}"] * bool(
        args.cost_model
    )
    running: list[tuple[subprocess.Popen, tuple, object]] = []
    t0 = time.time()
    while todo or running:
        while todo and len(running) < args.jobs:
            m, s, f = todo.pop(0)
            log = open(work / f"{m}-s{s}-f{f}.log", "w")  # noqa: SIM115 (closed when the run ends)
            cmd = [sys.executable, "-m", "zoo.methods.shapo.experiments", *passthrough, "--one", m, str(s), str(f)]
            running.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), (m, s, f), log))
        time.sleep(2)
        for entry in list(running):
            proc, key, log = entry
            if proc.poll() is not None:
                running.remove(entry)
                log.close()
                print(f"[{time.time() - t0:7.0f}s] {key} exit {proc.returncode}", flush=True)
    runs = [json.loads(p.read_text()) for p in sorted(work.glob("*-s*-f*.json"))]
    runs = [
        r
        for r in runs
        if (r["method"] in args.methods and r["seed"] in args.seeds and r["flip_rate"] in args.flip_rates)
        or (r["method"] == "start" and args.start)
    ]
    shown = [a for a in passthrough if not a.startswith("--work")]
    command = (
        "python -m zoo.methods.shapo.experiments "
        + " ".join(shown)
        + f" --seeds {' '.join(map(str, args.seeds))} --flip-rates {' '.join(map(str, args.flip_rates))}"
    )
    notes = (
        smollm2_notes(
            args.steps, args.eval_pairs, args.heldout_prompts, args.new_tokens, args.benign_prompts, args.cost_model
        )
        if args.base == "smollm2"
        else sweep_notes(args.init, args.steps, args.eval_pairs, args.heldout_prompts, args.new_tokens, args.cost_model)
    )
    scale = {"overrides": overrides, "wall_s_total": sum(r.get("wall_s", 0.0) for r in runs)}
    print(f"wrote {write_sweep(runs, command, notes, scale, args.out)}")


if __name__ == "__main__":
    main()
