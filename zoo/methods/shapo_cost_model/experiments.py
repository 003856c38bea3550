"""The released cost model's held-out table: accuracy, cost gap and loss on ``preference_val`` (where its checkpoint was
selected) and on ``preference_eval`` (the test part, nothing selected on it).

    python -m zoo.methods.shapo_cost_model.experiments [--weights shapo-cost-model.zoo-lm-hh]

Loads the zoo weights (sha256-verified), evaluates them with their recipe's validation data exactly as ``zoo eval``
does, and writes ``results/shapo-cost-model/heldout.json`` through :func:`zoo.core.results.write_result`.
"""
from __future__ import annotations

import argparse

from zoo.core.results import write_result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", default="shapo-cost-model.zoo-lm-hh")
    args = ap.parse_args(argv)
    from zoo.core.build import evaluate, load_module

    module, cfg = load_module(args.weights)
    metrics = evaluate(module, cfg)
    row = {"weights": args.weights} | {k.replace("/", "_"): float(v) for k, v in metrics.items()
                                        if k.startswith(("val/", "test/"))}
    print(write_result("shapo-cost-model", "heldout", [row],
                       paper="the paper's cost model is a released Llama-based model (no held-out accuracy given)",
                       notes="The packaged weights (the checkpoint with the best val_accuracy) evaluated on the HH-RLHF "
                             "harmless pairs split by conversation (data/hh-rlhf-harmless/preference_split.json): "
                             "val_* on preference_val (87 pairs, where the checkpoint was selected), test_* on "
                             "preference_eval (277 pairs sharing no conversation with training or zoo-lm.chat's SFT "
                             "data). accuracy = share of pairs whose rejected reply costs more (c_l > c_w; a tie "
                             "counts 0.5); cost_gap = mean c_l - c_w; loss = the Bradley-Terry loss."))


if __name__ == "__main__":
    main()
