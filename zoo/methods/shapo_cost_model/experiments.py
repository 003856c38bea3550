"""The cost model's held-out tables: accuracy, cost gap and loss on ``preference_val`` (where a checkpoint is selected)
and on ``preference_eval`` (the test part: conversations never trained or selected on).

    python -m zoo.methods.shapo_cost_model.experiments [--weights shapo-cost-model.zoo-lm-hh]
    python -m zoo.methods.shapo_cost_model.experiments --recipe shapo-cost-model-smollm2.yaml --seeds 0 1 2

``--weights``: loads the zoo weights (sha256-verified), evaluates them with their recipe's validation data exactly as
``zoo eval`` does, and writes ``results/shapo-cost-model/heldout.json``.

``--recipe``: trains the recipe once per seed (``resume=auto`` under ``--work``, so a killed run restarts where it
stopped; a finished seed's row is cached there), takes each run's best checkpoint by ``val/accuracy``, and scores the
test pairs; each seed's test accuracy comes with a percentile bootstrap CI over the test pairs (ours: the pairs are
resampled, the model fixed). Writes ``results/shapo-cost-model/heldout-<recipe stem>.json`` (rows per seed, mean and
sd over seeds). Both through :func:`zoo.core.results.write_result`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from zoo.core.results import summarise, write_result
from zoo.core.stats import bootstrap_ci

SPLIT_NOTES = (
    "HH-RLHF harmless pairs split by conversation (data/hh-rlhf-harmless/preference_split.json): val_* on "
    "preference_val (87 pairs, where the checkpoint was selected), test_* on preference_eval (277 pairs "
    "sharing no conversation with training or zoo-lm.chat's SFT data). accuracy = share of pairs whose "
    "rejected reply costs more (c_l > c_w; a tie counts 0.5); cost_gap = mean c_l - c_w; loss = the "
    "Bradley-Terry loss."
)


@torch.no_grad()
def test_pair_scores(module, cfg: dict) -> torch.Tensor:
    """Per-pair accuracy ``(n,)`` in {0, 0.5, 1} of ``module`` on its recipe's test pairs (``preference_eval``),
    encoded with the model's own tokenizer."""
    from zoo.core.build import build_datamodule
    from zoo.methods.shapo_cost_model.module import pair_accuracy
    from zoo.models.causal_lm import tokenizer_for

    model = cfg["model"]
    data = dict(cfg.get("data") or {}, tokenizer=tokenizer_for(model["arch"], model.get("tokenizer")))
    dm = build_datamodule(dict(cfg, data=data))
    dm.setup("test")
    module.eval()
    return torch.cat([pair_accuracy(*module._pair(batch)) for batch in dm.test_dataloader()])


def seed_row(recipe: str, seed: int, work: Path, overrides: list[str]) -> dict:
    """Train ``recipe`` at ``seed`` (or resume it) and measure its best checkpoint: ``{"seed", "val_accuracy",
    "test_accuracy", "test_ci_lo", "test_ci_hi", "test_pairs", "wall_s"}`` (``val_accuracy``: the selected checkpoint's
    score on ``preference_val``); cached in ``work/seed-<S>.json``."""
    cache = work / f"seed-{seed}.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    from zoo.cli import compose_and_validate
    from zoo.core.loading import load_module
    from zoo.core.run import find_checkpoint
    from zoo.core.training import train

    t0 = time.time()
    cfg = compose_and_validate(
        [f"recipe={recipe}", f"seed={seed}", f"out_dir={work / f'seed-{seed}'}", "resume=auto", *overrides]
    )
    run_dir = train(cfg)
    module, run_cfg = load_module(str(run_dir), "best")
    scores = test_pair_scores(module, run_cfg)
    lo, hi = bootstrap_ci(scores.tolist(), seed=seed)
    ckpt = torch.load(find_checkpoint(run_dir, "best"), map_location="cpu", mmap=True, weights_only=False)
    best = [
        c["best_model_score"]
        for c in ckpt.get("callbacks", {}).values()
        if isinstance(c, dict) and c.get("monitor") == "val/accuracy" and c.get("best_model_score") is not None
    ]
    row = {
        "seed": seed,
        "val_accuracy": float(best[0]) if best else None,
        "test_accuracy": float(scores.mean()),
        "test_ci_lo": lo,
        "test_ci_hi": hi,
        "test_pairs": int(scores.numel()),
        "wall_s": round(time.time() - t0, 1),
    }
    cache.write_text(json.dumps(row))
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", default="shapo-cost-model.zoo-lm-hh")
    ap.add_argument("--recipe", default=None, help="train this recipe per seed instead of evaluating --weights")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--work", default="runs/shapo-cost-model-seeds", help="runs and per-seed rows (resume)")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="recipe overrides for every seed")
    ap.add_argument("--results-dir", default=None, help="write the results file under this folder instead")
    args = ap.parse_args(argv)
    results_dir = None if args.results_dir is None else Path(args.results_dir)
    if args.recipe is not None:
        work = Path(args.work) / Path(args.recipe).stem
        work.mkdir(parents=True, exist_ok=True)
        rows = [seed_row(args.recipe, s, work, args.set) for s in args.seeds]
        print(
            write_result(
                "shapo-cost-model",
                f"heldout-{Path(args.recipe).stem}",
                rows,
                summary=summarise(rows, ["val_accuracy", "test_accuracy"]),
                results_dir=results_dir,
                paper="the paper's cost model is a released Llama-based model (no held-out accuracy given); the zoo-lm "
                "judge it replaces ranks the test pairs at 0.574",
                notes=f"recipes/{args.recipe} trained once per seed (overrides: {' '.join(args.set) or 'none'}); each run's "
                "best checkpoint by val_accuracy scored on the test pairs, with a 95% percentile bootstrap CI over "
                "those pairs (2000 resamples). " + SPLIT_NOTES,
            )
        )
        return
    from zoo.core.evaluation import evaluate
    from zoo.core.loading import load_module

    module, cfg = load_module(args.weights)
    metrics = evaluate(module, cfg)
    row = {"weights": args.weights} | {
        k.replace("/", "_"): float(v) for k, v in metrics.items() if k.startswith(("val/", "test/"))
    }
    print(
        write_result(
            "shapo-cost-model",
            "heldout",
            [row],
            results_dir=results_dir,
            paper="the paper's cost model is a released Llama-based model (no held-out accuracy given)",
            notes="The packaged weights (the checkpoint with the best val_accuracy) evaluated on the " + SPLIT_NOTES,
        )
    )


if __name__ == "__main__":
    main()
