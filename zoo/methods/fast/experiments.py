"""FAST vs block training: the tables of docs/results.md and the figures, on zoo-lm.chat or SmolLM2-135M-Instruct.

``python -m zoo.methods.fast.experiments [--recipe R]`` trains, for each pipeline (``fast``, ``bt_pretrain`` = BT(P),
``bt_chat`` = BT(F)), SAE (Standard, JumpReLU) and seed, the recipe (``fast-sae.yaml``: zoo-lm.chat;
``fast-smollm2.yaml``: SmolLM2) through ``zoo.core.training.train`` (equal token budgets, the same LM layer), then
measures on the validation conversations (each alone): log₂ MSE and log₂ MSE_st (eq. 7), L0 (and its fraction of
the dictionary), explained variance, dead/dense features, Delta loss (*ours*), GSNR at the start and end of training
(*ours*); ``--quality`` adds the high-quality feature fraction (*ours*, MiniLM). ``--sweep`` first runs a short
sparsity sweep on the FAST pipeline and trains the grid with the settings it chooses (:func:`choose_setting`). Rows
are saved as they come (``runs/fast-exp/<name>.jsonl``), so a stopped run resumes. ``--layer1`` adds layer 1 with
one seed; ``--steer`` the steering sweep (zoo-lm); ``--peer`` sae-lens' own runner on BT(P) and ``--gap`` our
trainer with sae-lens' trainer settings added in turn (zoo-lm). Results: ``results/fast/*.json``, figures
``results/fast/figures/*.png``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from zoo.core.results import summarise, write_result
from zoo.methods.fast.grid import (
    METRICS,
    SAE_SETTINGS,
    SETTING_COLUMNS,
    load_setup,
    recipe_overrides,
    save_setup,
    train_one,
)

PAPER = {
    "log2_mse_st": "Qwen2.5-7B-Instruct L18 8x Standard: FAST 0.6468, BT(P) 5.1985, BT(F) 1.5093; JumpReLU: "
    "FAST -9.7604, BT(P) -4.0005, BT(F) -8.0743 (log2 MSE_st, paper Table)",
    "log2_mse": "Llama-3.2-3B-Instruct L20 8x Standard: FAST -0.9527, BT(P) -0.6926, BT(F) -0.9186",
    "high_quality": "Llama-3.2-3B-Instruct 8x JumpReLU, GPT-4o score 4-5: FAST 21.1%, BT(P) 7.0%, BT(F) 10.2%",
    "delta_loss": "FAST -0.51% to +0.37% (ICML abstract; definition not given)",
    "gsnr": "FAST higher than BT (ICML abstract; no number)",
}


def row_key(row: dict) -> tuple:
    """What identifies a trained SAE in the resume log: pipeline, SAE, seed, layer and its sparsity setting."""
    return (row["pipeline"], row["sae"], row["seed"], row["layer"], *(row.get(c) for c in SETTING_COLUMNS.values()))


def choose_setting(rows: list[dict], max_l0_fraction: float) -> dict:
    """The sparsity setting the grid uses, from a sweep's rows listed from the weakest penalty to the strongest: the
    first whose validation L0 is at most ``max_l0_fraction`` of the dictionary (the best reconstruction among the
    sparse enough), else the sparsest one (*ours*).

    Args:
        rows: sweep rows of one SAE architecture, each with ``l0``, ``d_sae`` and its setting in ``setting``.

    Raises:
        ValueError: no rows.
    """
    if not rows:
        raise ValueError("choose_setting: no sweep rows")
    sparse = [r for r in rows if r["l0"] <= max_l0_fraction * r["d_sae"]]
    return dict((sparse[0] if sparse else min(rows, key=lambda r: r["l0"]))["setting"])


def notes_text(c: dict, args) -> str:
    """The notes of a pipelines results file, from :func:`zoo.methods.fast.grid.describe_setup`."""
    boundary = f"documents ending in {c['boundary']}" if c["boundary"] else "documents wrapped in BOS/EOS"
    return (
        f"{c['lm']} ({c['blocks']} decoder blocks, d = {c['d']}), residual stream after block "
        f"{args.layer_used}; SAEs {c['d_sae'] // c['d']}x ({c['d_sae']:,} features). Each pipeline harvests "
        f"{c['harvest']:,} distinct tokens once (FAST: deduplicated chat conversations of {c['chat']} rendered "
        f"with the LM's own chat template, each alone, cut at {c['max_length']} tokens; BT(F): the same "
        f"templated conversations packed in {c['block_size']}-token blocks; BT(P): {c['pretrain']} without a "
        f"template, {boundary}, packed in {c['block_size']}-token blocks"
        f"{', blocks shuffled' if c['shuffle_blocks'] else ''}) and every SAE trains on {c['tokens']:,} tokens "
        f"(batch {c['batch']:,}, passes in the `passes` column) through a {c['buffer']:,}-token mixing buffer. "
        f"Activations scaled to mean norm sqrt(d) for the SAE; metrics in the LM's units. Sparsity settings in "
        f"the l1 / l0_coef / threshold columns; L0 and its fraction of the {c['d_sae']:,} features in l0 / "
        f"l0_fraction. Adam {c['lr']} -> {c['lr_end']} (5% warm-up, cosine over the last 20%), sparsity warm-up "
        f"3%, gradient-norm clip {c['clip']}. Evaluation: the first {c['val']} non-empty val conversations, each "
        f"alone (eq. 7; MSE_st on the template tokens {', '.join(map(repr, c['template']))}; log2_mse_st_after0: "
        f"the same without position 0, whose activation is the same in every conversation). Delta loss (ours): "
        f"% change of the LM's next-token CE on the first {args.delta_convs} of them with the reconstruction "
        f"spliced in. GSNR (ours): median over parameters of E[g]^2/Var[g] over {args.gsnr_batches} minibatches "
        "of 256 activations of the pipeline's own stream, at the end of training."
        + (
            " high_quality (ours): share of 128 random live features whose top-5 16-token contexts have mean "
            "pairwise MiniLM cosine above the 95th percentile of random 5-context sets; compare orderings, not "
            "levels."
            if args.quality
            else ""
        )
    )


def parse_jumprelu(items: list[str]) -> list[dict]:
    """``THRESHOLD:L0_COEF`` items as JumpReLU settings."""
    out = []
    for item in items:
        threshold, coef = item.split(":")
        out.append({"jumprelu_init_threshold": float(threshold), "l0_coefficient": float(coef)})
    return out


def past(stop_at: str | None) -> bool:
    """Whether the UTC clock is past ``HH:MM`` today (``--stop-at``: no SAE is started after it)."""
    import datetime as dt

    if not stop_at:
        return False
    now = dt.datetime.now(dt.UTC)
    hour, minute = map(int, stop_at.split(":"))
    return now >= now.replace(hour=hour, minute=minute, second=0, microsecond=0)


def run_logged(args, name: str, grid: list[tuple]) -> list[dict]:
    """Train every ``(layer, sae, setting, pipeline, seed)`` of ``grid`` not yet in ``runs/fast-exp/<name>.jsonl``
    (a killed run resumes where it stopped) and return all rows of that log."""
    import json

    log = Path(args.out_dir) / f"{name}.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
    done = {row_key(r) for r in rows}
    load_setup(args, log)
    for layer, sae, setting, pipeline, seed in grid:
        key = (
            pipeline,
            sae,
            seed,
            layer,
            *(setting.get(k) if k in SAE_SETTINGS[sae] else None for k in SETTING_COLUMNS),
        )
        if key in done:
            continue
        reuse = [r for r in args.reuse if row_key(r) == key]  # the sweep trained this very SAE already
        if reuse or past(args.stop_at):
            if reuse:
                rows.append(reuse[0])
                with log.open("a") as f:
                    f.write(json.dumps(reuse[0]) + "\n")
            continue
        row, probe = train_one(args, pipeline, sae, seed, layer, setting)
        rows.append(row)
        if args.steer and (pipeline, sae, seed) == ("fast", "jumprelu", args.seeds[0]):
            args.probes[(pipeline, sae, seed, layer)] = probe  # kept for steering; others are freed (memory)
        with log.open("a") as f:
            f.write(json.dumps(row) + "\n")
        save_setup(args, log)
    return rows


def table(rows: list[dict]) -> list[dict]:
    """Rows without their curves and settings dicts (those stay in the resume log)."""
    return [{k: v for k, v in r.items() if not isinstance(v, (list, dict)) and v is not None} for r in rows]


def sweep(args, layer: int) -> tuple[dict[str, dict], list[dict]]:
    """The short sparsity sweep (FAST pipeline, first seed, the grid's token budget): Standard λ over ``--sweep-l1``
    and JumpReLU ``(θ₀, λ)`` over ``--sweep-jumprelu``, each listed from the weakest penalty to the strongest;
    writes ``results/fast/<name>-sweep.json`` and returns each SAE's chosen setting (:func:`choose_setting`) and the
    sweep's rows (the grid reuses the chosen ones: the same SAE)."""
    cands = {
        "standard": [{"l1_coefficient": v} for v in args.sweep_l1],
        "jumprelu": parse_jumprelu(args.sweep_jumprelu),
    }
    grid = [(layer, sae, c, "fast", args.seeds[0]) for sae in args.saes for c in cands[sae]]
    rows = run_logged(args, f"{args.name}-sweep", grid)
    chosen = {sae: choose_setting([r for r in rows if r["sae"] == sae], args.max_l0_fraction) for sae in args.saes}
    write_result(
        "fast",
        f"{args.name}-sweep",
        table(rows),
        summary=summarise(
            table(rows),
            ["log2_mse", "log2_mse_st", "delta_loss", "l0", "l0_fraction", "explained_variance", "dead", "dense"],
            by=["sae", *SETTING_COLUMNS.values()],
        ),
        paper="lambda 5 (Standard), 0.01 (JumpReLU, threshold 0.001, bandwidth 0.001) for 40.96M tokens",
        notes=f"Sparsity sweep on the FAST pipeline, seed {args.seeds[0]}, the grid's budgets. Rule (ours): "
        f"the grid takes the weakest setting (listed first) whose validation L0 is at most "
        f"{args.max_l0_fraction:.0%} of the dictionary, else the sparsest. Chosen: "
        + "; ".join(f"{sae} {c}" for sae, c in chosen.items())
        + ". "
        + notes_text(args.context, args),
        packages=["sae-lens"],
        results_dir=args.results_dir,
    )
    return chosen, rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--recipe", default="fast-sae.yaml", help="the recipe every SAE is trained from")
    p.add_argument("--overlay", nargs="*", default=[], help="recipe overlays (tests: tiny/...)")
    p.add_argument("--set", nargs="*", default=[], help="more recipe overrides KEY=VALUE for every SAE")
    p.add_argument("--pipelines", nargs="+", default=["fast", "bt_pretrain", "bt_chat"])
    p.add_argument("--saes", nargs="+", default=["standard", "jumprelu"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--layer", type=int, default=None, help="block read (default: the recipe's model.layer)")
    p.add_argument(
        "--harvest",
        type=int,
        default=None,
        help="distinct tokens run through the LM per pipeline (default: the recipe's)",
    )
    p.add_argument(
        "--tokens", type=int, default=None, help="SAE training tokens, equal for every pipeline (default: the recipe's)"
    )
    p.add_argument("--l1", nargs="+", type=float, default=[2.0], help="Standard SAE lambda(s)")
    p.add_argument(
        "--jumprelu", nargs="+", default=None, help="JumpReLU THRESHOLD:L0_COEF setting(s) (default: the recipe's)"
    )
    p.add_argument(
        "--sweep",
        action="store_true",
        help="run the sparsity sweep first and train the grid with the settings it chooses",
    )
    p.add_argument("--sweep-l1", nargs="+", type=float, default=[2.0, 5.0, 10.0])
    p.add_argument("--sweep-jumprelu", nargs="+", default=["0.001:0.01", "0.5:0.01", "1.0:0.01"])
    p.add_argument("--max-l0-fraction", type=float, default=0.02, help="sweep rule: L0 at most this share of d_sae")
    p.add_argument("--delta-convs", type=int, default=32, help="validation conversations for Delta loss")
    p.add_argument("--gsnr-batches", type=int, default=32, help="minibatches of 256 for GSNR")
    p.add_argument("--quality", action="store_true", help="MiniLM feature-quality fraction (*ours*)")
    p.add_argument("--layer1", action="store_true", help="also layer 1, first seed only")
    p.add_argument("--steer", action="store_true", help="steering sweep on the FAST JumpReLU SAE of the first seed")
    p.add_argument("--write-only", action="store_true", help="write the tables from the rows trained so far")
    p.add_argument("--peer", action="store_true", help="only the sae-lens runner baseline on BT(P)")
    p.add_argument("--gap", action="store_true", help="only the study of our BT(P) trainer vs sae-lens' settings")
    p.add_argument("--compare", action="store_true", help="only the model-size table from the grids' results files")
    p.add_argument(
        "--stop-at",
        default=None,
        help="UTC HH:MM after which no SAE is started (tables are written from the rows so far; rerun to resume)",
    )
    p.add_argument("--out-dir", default="runs/fast-exp", help="run directories and the resume logs")
    p.add_argument("--results-dir", type=Path, default=None, help="where results/ is (default: the repo's)")
    p.add_argument("--name", default="pipelines")
    args = p.parse_args(argv)
    args.random_sets, args.context, args.base_ce, args.probes, args.reuse = None, None, {}, {}, []
    torch.set_num_threads(1)
    if args.peer or args.gap or args.compare:
        from zoo.methods.fast import studies

        return (studies.peer if args.peer else studies.gap if args.gap else studies.compare)(args)
    from zoo.cli import compose_and_validate
    from zoo.methods.fast.plots import plot_all

    recipe = compose_and_validate(recipe_overrides(args) + list(args.set))
    layer = args.layer if args.layer is not None else int(recipe["model"]["layer"])
    args.layer_used = layer
    settings = {
        "standard": [{"l1_coefficient": v} for v in args.l1],
        "jumprelu": parse_jumprelu(args.jumprelu)
        if args.jumprelu
        else [{k: recipe["model"][k] for k in SAE_SETTINGS["jumprelu"]}],
    }
    if args.sweep and not args.write_only:
        chosen, args.reuse = sweep(args, layer)
        settings = {sae: [c] for sae, c in chosen.items()}
    grid = [
        (lay, sae, setting, pipeline, seed)
        for lay in [layer] + ([1] if args.layer1 else [])
        for seed in (args.seeds if lay == layer else args.seeds[:1])  # seeds outermost: a stopped run stays balanced
        for sae in args.saes
        for setting in settings[sae]
        for pipeline in args.pipelines
    ]
    rows = run_logged(args, args.name, [] if args.write_only else grid)
    rows_t = table(rows)
    write_result(
        "fast",
        args.name,
        rows_t,
        summary=summarise(
            rows_t,
            [m for m in [*METRICS, "l0_fraction"] if any(m in r for r in rows_t)],
            by=["layer", "sae", *SETTING_COLUMNS.values(), "pipeline"],
        ),
        paper=PAPER,
        notes=notes_text(args.context, args),
        packages=["sae-lens"],
        results_dir=args.results_dir,
    )
    if args.steer and ("fast", "jumprelu", args.seeds[0], layer) in args.probes:
        from zoo.methods.fast.studies import steering

        steering(args, args.probes, layer)
    figures = None if args.results_dir is None else args.results_dir / "fast" / "figures"
    plot_all(rows, args.name, out_dir=figures, layer=layer, lm=str(recipe["model"]["lm"]))


if __name__ == "__main__":
    main()
