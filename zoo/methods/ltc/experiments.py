"""The 3-seed table of docs/results.md (``## ltc``): LTC and its baselines on ``waterbirds-cifar``.

``python -m zoo.methods.ltc.experiments [--seeds 0 1 2] [--rate 0.95] [--epochs 20]``

Per pretraining seed, ``recipes/ltc.yaml`` trains the tiny CLIP (the seed sets initialisation and batch order; the
data split is the same, data seed 0) and the post-hoc pipeline locates that model's own heads on val and scores
test. Finished seeds are kept in ``runs/ltc-experiments/r<rate>_e<epochs>/seed_<k>.json`` (an interrupted run
resumes). Writes ``results/ltc/waterbirds-cifar[-r0.99].json`` through ``write_result``: rows ``seed, method, wg,
avg, gap`` (percent), top-level ``seeds``, notes opening with the verdict against the paper's ">50% WG gain over
non-training post-hoc baselines" (both relative and absolute gains are reported).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

from zoo.core.data import repo_root
from zoo.core.recipe import load_recipe, validate
from zoo.core.results import summarise, write_result
from zoo.core.training import train

METHOD = "ltc"
POST_HOC = ("zero-shot", "roboshot", "ortho-cali", "textspan")  # non-training post-hoc baselines
ORDER = (
    "zero-shot",
    "roboshot",
    "ortho-cali",
    "textspan",
    "random-heads",
    "ltc",
    "ltc-ablate",
    "ltc-inject",
    "ltc-full",
    "probe-erm",
    "probe-balanced",
)
PAPER = {
    "claim": "LTC: >50% gain in worst-group accuracy over non-training post-hoc baselines (abstract; relative or "
    "absolute not stated); heads found on ViT-B-16 Waterbirds: spurious (10,10), (11,3), salient "
    "(11,5), (10,2) (authors' code)"
}


def run_seed(seed: int, rate: float, epochs: int, out: Path, batch_size: int = 128, lr: float = 1e-3) -> dict:
    """Train + pipeline for one seed (cached in ``out/seed_<seed>.json``)."""
    cache = out / f"seed_{seed}.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    start = time.time()
    cfg = load_recipe(
        "ltc.yaml",
        [
            f"seed={seed}",
            f"data.rate={rate}",
            f"trainer.max_epochs={epochs}",
            f"data.batch_size={batch_size}",
            f"model.optimizer.lr={lr}",
            f"out_dir={out / 'runs'}",
            "export.formats=[]",
            "logger.kind=none",
        ],
    )
    validate(cfg)
    run_dir = train(cfg)
    rows = json.loads((run_dir / "ltc" / "rows.json").read_text())
    doc = {"seed": seed, "rows": rows, "seconds": time.time() - start, "run_dir": str(run_dir)}
    out.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(doc, indent=1))
    return doc


def verdict(summary: dict[str, dict]) -> tuple[str, str]:
    """``(verdict, sentence)`` from mean WG per method: LTC vs the best non-training post-hoc baseline.
    ``reproduced``: > 50 % relative and >= 5 points absolute; ``partly``: >= 2 points; else ``not at this scale``."""
    base_name = max(POST_HOC, key=lambda m: summary[m]["wg"])
    base, ltc = summary[base_name]["wg"], summary["ltc"]["wg"]
    absolute = ltc - base
    relative = absolute / base * 100 if base > 0 else float("inf")
    if relative > 50 and absolute >= 5:
        v = "reproduced"
    elif absolute >= 2:  # a real but smaller gain (a relative gain over a near-zero WG alone does not count)
        v = "partly"
    else:
        v = "not at this scale"
    return v, (
        f"LTC mean WG {ltc:.1f} vs best non-training post-hoc baseline ({base_name}) {base:.1f}: "
        f"{absolute:+.1f} points absolute, {relative:+.1f}% relative (claim: >50%)"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--rate", type=float, default=0.95)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--name", default=None, help="results file stem (default waterbirds-cifar[-r<rate>])")
    a = ap.parse_args(argv)
    out = repo_root() / "runs" / "ltc-experiments" / f"r{a.rate:g}_e{a.epochs}_b{a.batch_size}_lr{a.lr:g}"
    docs = [run_seed(s, a.rate, a.epochs, out, a.batch_size, a.lr) for s in a.seeds]
    rows, located = [], []
    for d in docs:
        rows += [
            {"seed": d["seed"], "method": r["method"], "wg": r["wg"], "avg": r["avg"], "gap": r["gap"]}
            for r in d["rows"]
            if "wg" in r
        ]
        loc = next(r for r in d["rows"] if r["method"] == "located")
        located.append(
            f"seed {d['seed']}: S={loc['spurious']} Y={loc['salient']} (full: S={loc['full']['spurious']}"
            f" Y={loc['full']['salient']}; TextSpan place heads {loc['textspan']})"
        )
    rows.sort(key=lambda r: (ORDER.index(r["method"]), r["seed"]))
    summary = summarise(rows, ["wg", "avg", "gap"], by=["method"])
    means = {s["method"]: {k: s[k]["mean"] for k in ("wg", "avg", "gap")} for s in summary}
    v, sentence = verdict(means)
    zs_gap = means["zero-shot"]["gap"]
    losses = [json.loads((Path(d["run_dir"]) / "metrics.json").read_text())["metrics"].get("train/loss") for d in docs]
    loss_note = (
        f"Final CLIP training loss per seed {[round(x, 3) for x in losses if x is not None]} against "
        f"ln(batch) = {math.log(a.batch_size):.2f} (chance) and ln(batch/2) = {math.log(a.batch_size / 2):.2f} "
        "(what knowing only the place gives). "
    )
    minutes = statistics.fmean(d["seconds"] for d in docs) / 60
    notes = (
        f"Verdict: {v}. {sentence}. Protocol: waterbirds-cifar (ours: real CIFAR-10 objects of 8 classes on two "
        f"real photos; pretrain place = class at rate {a.rate:g}; val/test balanced, 200 images per group), tiny "
        f"open_clip CLIP (ViT 6x4 heads, width 128, patch 8; 2-layer text tower) pretrained {a.epochs} epochs "
        f"(batch {a.batch_size}, AdamW lr {a.lr:g}, cosine) per seed ({minutes:.1f} min/seed on the shared 2-core CPU), heads located on val's bias-conflicting "
        f"groups (1/K rule), corrected on test. WG/Avg/Gap in %, mean (sd) over pretraining seeds "
        f"{a.seeds}. random-heads: mean of 20 draws of |S| heads from layers 3-5 (|S| >= 1). probes are trained "
        f"references (logistic regression on pretrain embeddings; balanced = inverse group-frequency weights). "
        f"Zero-shot Gap {zs_gap:.1f} points. "
        + loss_note
        + "Located heads (layer, head), 0-based: "
        + "; ".join(located)
        + "."
    )
    name = a.name or ("waterbirds-cifar" if a.rate == 0.95 else f"waterbirds-cifar-r{a.rate:g}")
    path = write_result(
        METHOD,
        name,
        rows,
        summary=summary,
        paper=PAPER,
        notes=notes,
        packages=["open-clip-torch"],
        extra={"seeds": a.seeds, "rate": a.rate, "epochs": a.epochs, "batch_size": a.batch_size, "lr": a.lr},
    )
    print(path)
    print(notes)


if __name__ == "__main__":
    main()
