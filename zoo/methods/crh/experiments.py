"""The CRH tables on zoo-lm.chat: the Implication-2/3 correlation over concepts x layers x split seeds, the
lambda sweep of v(L, lambda) with the baselines, and the unsteered concept and gibberish rates.

``python -m zoo.methods.crh.experiments correlation --concepts 12 --seeds 0 1 2 --layers 2 3``
``python -m zoo.methods.crh.experiments lambda --concepts 6 --seeds 0 1 2 --lambdas 0 0.25 0.5 0.75 1``
``python -m zoo.methods.crh.experiments figures --concepts 10 --questions 300`` (PNGs into results/crh/figures)

Each (seed, concept, layer) result is appended to ``runs/crh-exp/<table>.jsonl`` as it finishes, so an interrupted
run resumes; the table is then written through ``write_result`` from every line present.

Kept as one module: ``correlation`` and ``lambda`` share the resumable grid (``_run_grid``) and
``figures`` reads its JSONL log.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from zoo.core.results import summarise, write_result
from zoo.methods.crh.analysis import correlation_rows, sin_cos
from zoo.methods.crh.datamodule import CRHPairsDataModule
from zoo.methods.crh.labels import CONCEPT, GIBBERISH, label
from zoo.methods.crh.pairs import cached_replies, prompt_text
from zoo.methods.crh.pipeline import (
    Settings,
    difference_vectors,
    directions,
    make_pairs,
    steer_concept,
    summarise_concept,
)
from zoo.methods.crh.steering import steered_generate

PAPER = (
    "figure only: consistent positive correlation of steerability / |mu_c|^2 with sin^2/cos over 100 concepts "
    "(Gemma-2B-it layers 9, 13; Llama-2-7B-chat 16, 24); the paper prints no number"
)
LM = "zoo-lm.chat"
CACHE = "runs/crh-cache/replies.json"


def _log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def _run_grid(
    table: str,
    concepts: int,
    seeds: list[int],
    s_kw: dict,
    out_dir: Path,
    n_questions: int | None = None,
    tabulate_only: bool = False,
) -> list[dict]:
    """Steer every (seed, concept, layer) not yet in ``out_dir/table.jsonl``; return all lines (``tabulate_only``:
    steer nothing, return the lines present)."""
    from zoo.models.causal_lm import load_causal_lm

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{table}.jsonl"
    done = [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []
    if tabulate_only:
        return done
    have = {(d["seed"], d["cid"], d["layer"]) for d in done}
    torch.manual_seed(0)
    model, tok = load_causal_lm(LM)
    dm = CRHPairsDataModule(concepts=concepts, n_questions=n_questions)
    dm.setup()
    batch = dm.batch
    replies = cached_replies(model, tok, batch["questions"], LM, CACHE, "plain", 64)
    pairs = make_pairs(batch["questions"], replies, batch["concepts"], "append")
    for seed in seeds:
        s = Settings(split_seed=seed, **s_kw)
        todo = [(c, layer) for c in batch["concepts"] for layer in s.layers if (seed, c["cid"], layer) not in have]
        if not todo:
            continue
        acts = difference_vectors(model, tok, [p for p in pairs if p.cid in {c["cid"] for c, _ in todo}], s)
        for concept, layer in todo:
            c = concept["cid"]
            t0 = time.time()
            dirs = directions(acts[c][layer], s)
            res = steer_concept(
                model, tok, concept, batch["questions"], acts[c]["test"], acts[c][layer], dirs, layer, s, seed=seed
            )
            summ = summarise_concept(res, s)
            line = {
                "seed": seed,
                "cid": c,
                "layer": layer,
                "seconds": time.time() - t0,
                "mu_norm": res["mu_norm"],
                "cos": res["cos"],
                "sin": res["sin"],
                "sim": res["sim"],
                "steerability": summ["steerability"],
                "soft_steerability": summ["soft_steerability"],
                "question_steerability": summ["question_steerability"],
                "question_soft_steerability": summ["question_soft_steerability"],
                "excluded": summ["excluded"],
                "frac": summ["frac"],
                "runs": {k: [[r[0], r[1], r[3], r[5]] for r in v] for k, v in res["runs"].items()},
                "examples": {k: [r[4] for r in v[:: s.n_steps // 5 or 1]][:10] for k, v in res["runs"].items()},
            }
            with path.open("a") as f:
                f.write(json.dumps(line) + "\n")
            done.append(line)
            _log(f"{table}: seed {seed} concept {c} layer {layer} {line['seconds']:.0f}s")
    return done


def _points(lines: list[dict], run: str) -> list[dict]:
    return [
        {
            "cid": d["cid"],
            "layer": d["layer"],
            "seed": d["seed"],
            "qid": int(q),
            "steerability": d["steerability"][run],
            "soft_steerability": d["soft_steerability"][run],
            "mu_norm": d["mu_norm"],
            "sin": d["sin"][q],
            "cos": c,
            "sim": d["sim"][q],
            "question_steerability": d["question_steerability"][q],
            "question_soft_steerability": d["question_soft_steerability"][q],
            "excluded": int(q) in d["excluded"],
        }
        for d in lines
        for q, c in d["cos"].items()
    ]


def correlation(args) -> None:
    """Implication 2 (steerability / |mu|^2 vs sin^2/cos, Pearson/Spearman, exponent grid + permutation p), the
    LRH contrast (partial correlation given |mu|) and Implication 3 (Spearman of per-question steerability with
    the diff-vector similarity), per layer and seed; CI over seeds."""
    t0 = time.time()
    s_kw = {"layers": args.layers, "lambdas": [0.0], "baselines": []}
    lines = _run_grid(
        "correlation", args.concepts, args.seeds, s_kw, Path(args.out), args.questions, args.tabulate_only
    )
    pts = _points(lines, "lambda=0")
    steer_rows = []
    for p in pts:
        steer_rows.append(
            {
                "concept_id": p["cid"],
                "layer": p["layer"],
                "seed": p["seed"],
                "qid": p["qid"],
                "steerability": p["steerability"],
                "soft_steerability": p["soft_steerability"],
                "mu_norm": p["mu_norm"],
                "cos_theta": p["cos"],
                "sin_cos": float(sin_cos(np.array([p["sin"]]), np.array([p["cos"]]))[0]),
                "excluded": p["excluded"],
            }
        )
    rows, ci = correlation_rows(
        {m: pts for m in ("steerability", "soft_steerability")}, args.layers, args.seeds, args.n_perm
    )
    ci = {k: {c: v[c] for c in ("pearson_r", "lrh_partial_r", "impl3_spearman")} for k, v in ci.items()}
    n_c = len({d["cid"] for d in lines})
    labs = [r[2] for d in lines for r in d["runs"]["lambda=0"]]
    counts = {
        "outputs": len(labs),
        "normal": labs.count(1),
        "concept": labs.count(CONCEPT),
        "gibberish": labs.count(GIBBERISH),
    }
    minutes = (time.time() - t0) / 60
    pool = args.questions or 805
    notes = (
        f"zoo-lm.chat (4 blocks), {n_c} concepts (first in concepts_100.csv) x layers {args.layers} x split "
        f"seeds {args.seeds}; 100 train / 5 test questions per concept from the first {pool} AlpacaEval "
        "questions; pairs ours (greedy 64-token reply + "
        "templated keyword sentence); v(L, 0) = L d_q/|d_q|, L in linspace(0, 3|mu_c|, 26)[1:], added at the "
        "authors' pre-hook site on every forward, T 0.1, 32 tokens; keyword judge; steerability = slope of the "
        "label-2 fraction vs step with step-1-positive questions excluded; one point per (concept, test "
        f"question) as the authors. Labels of all steered outputs: {json.dumps(counts)}. Permutation test: {args.n_perm} concept shuffles of the 96-cell grid "
        f"maximum. 95% t-interval over seeds: {json.dumps(ci)}. Steering + labelling time summed over the "
        f"{len(lines)} (seed, concept, layer) lines: {sum(d['seconds'] for d in lines) / 60:.1f} min "
        f"(2 cores shared with other jobs); this invocation {minutes:.1f} min (finished lines are resumed)."
    )
    write_result(
        "crh",
        "correlation",
        rows,
        summary=summarise(
            rows,
            ["pearson_r", "spearman_rho", "grid_best_r", "grid_perm_p", "lrh_partial_r", "impl3_spearman"],
            by=["measure", "layer"],
        ),
        paper={"pearson_r": PAPER, "impl3_spearman": "about 0 (figure only)"},
        notes=notes,
        extra={"ci_over_seeds": ci, "label_counts": counts},
    )
    write_result(
        "crh",
        "steerability",
        steer_rows,
        paper=PAPER,
        summary=summarise(
            steer_rows,
            ["steerability", "soft_steerability", "mu_norm", "cos_theta", "sin_cos"],
            by=["layer"],
            seed_key="pooled",
        ),  # pooled over concepts, questions and seeds
        notes="per (concept, layer, seed, test question): the concept's steerability (lambda = 0 run), "
        "|mu_c|, cos(theta) and sin^2/cos of the question; from the correlation run.",
    )
    _plots(lines, pts, Path(args.out))


def sweep(args) -> None:
    """v(L, lambda) at each lambda plus the prompt-only baselines; unsteered concept / gibberish rates."""
    from zoo.models.causal_lm import load_causal_lm

    s_kw = {"layers": args.layers, "lambdas": args.lambdas, "baselines": args.baselines}
    lines = _run_grid(args.table, args.concepts, args.seeds, s_kw, Path(args.out), args.questions, args.tabulate_only)
    sel = CRHPairsDataModule(concepts=args.concepts, n_questions=args.questions)
    sel.setup()
    keep = {c["cid"] for c in sel.batch["concepts"]}
    lines = [d for d in lines if d["cid"] in keep and d["seed"] in args.seeds and d["layer"] in args.layers]
    reused = Path(args.out) / "correlation.jsonl"
    if args.reuse_lambda0 and reused.is_file():  # the same (seed, concept, layer) lambda = 0 run, already made
        prev = {(d["seed"], d["cid"], d["layer"]): d for d in map(json.loads, reused.read_text().splitlines())}
        for d in lines:
            old = prev.get((d["seed"], d["cid"], d["layer"]))
            if old is not None and "lambda=0" not in d["steerability"]:
                for key in ("steerability", "soft_steerability", "frac", "runs"):
                    d[key] = {"lambda=0": old[key]["lambda=0"], **d[key]}
    rows = []
    for d in lines:
        for name, st in d["steerability"].items():
            conc = np.mean(d["frac"][name][str(CONCEPT)])
            gib = np.mean(d["frac"][name][str(GIBBERISH)])
            rows.append(
                {
                    "run": name,
                    "layer": d["layer"],
                    "seed": d["seed"],
                    "cid": d["cid"],
                    "steerability": st,
                    "soft_steerability": d["soft_steerability"][name],
                    "concept_rate": float(conc),
                    "gibberish_rate": float(gib),
                }
            )
    per_seed = []
    for key in dict.fromkeys((r["run"], r["layer"], r["seed"]) for r in rows):
        sub = [r for r in rows if (r["run"], r["layer"], r["seed"]) == key]
        st = [r["steerability"] for r in sub if r["steerability"] is not None]
        per_seed.append(
            {
                "run": key[0],
                "layer": key[1],
                "seed": key[2],
                "concepts": len(sub),
                "steerability": float(np.mean(st)) if st else None,
                "soft_steerability": float(np.mean([r["soft_steerability"] for r in sub])),
                "concept_rate": float(np.mean([r["concept_rate"] for r in sub])),
                "gibberish_rate": float(np.mean([r["gibberish_rate"] for r in sub])),
            }
        )
    model, tok = load_causal_lm(LM)
    dm = CRHPairsDataModule(concepts=args.concepts)
    dm.setup()
    qs = sorted({int(q) for d in lines for q in d["cos"]})
    texts = steered_generate(
        model,
        tok,
        [prompt_text(tok, dm.batch["questions"][q]) for q in qs],
        torch.zeros(len(qs), model.config.hidden_size),
        args.layers[0],
        "input",
        seed=0,
    )
    text = dict(zip(qs, texts))
    keywords = {c["cid"]: c["keywords"] for c in dm.batch["concepts"]}
    labs = [label(text[int(q)], keywords[d["cid"]]) for d in lines for q in d["cos"]]  # each concept's own questions
    unsteered = {
        "concept_rate": float(np.mean([lab == CONCEPT for lab in labs])),
        "gibberish_rate": float(np.mean([lab == GIBBERISH for lab in labs])),
        "outputs": len(labs),
    }
    write_result(
        "crh",
        args.table,
        per_seed,
        summary=summarise(
            per_seed, ["steerability", "soft_steerability", "concept_rate", "gibberish_rate"], by=["run", "layer"]
        ),
        paper={
            "steerability": "figure only (§6.2: larger lambda, i.e. less normal-plane part, changes "
            "activation; baselines §5)"
        },
        notes=(
            f"zoo-lm.chat, {len({d['cid'] for d in lines})} concepts x layers {args.layers} x seeds "
            f"{args.seeds}, question pool {args.questions or 805}; runs: v(L, lambda) for lambda in {args.lambdas} (every forward, up to "
            f"3|mu_c|) and prompt-only baselines {args.baselines} (up to 5|mu_c|); 25 steps, 5 test "
            "questions, T 0.1, 32 tokens, keyword judge. concept_rate / gibberish_rate: mean over "
            f"steps. Unsteered (same questions, every concept's keywords): {json.dumps(unsteered)}."
        ),
        extra={"unsteered": unsteered},
    )
    _plots(lines, _points(lines, next(iter(lines[0]["steerability"]))), Path(args.out), prefix=args.table)


def _plots(lines: list[dict], pts: list[dict], out: Path, prefix: str = "correlation") -> None:
    from zoo.methods.crh.plots import label_fractions, steerability_scatter

    for m in ("steerability", "soft_steerability"):
        kept = [p for p in pts if not p["excluded"] and p[m] is not None]
        if kept:
            x = sin_cos(np.array([p["sin"] for p in kept]), np.array([p["cos"] for p in kept]))
            y = np.array([p[m] / p["mu_norm"] ** 2 for p in kept])
            steerability_scatter(
                x,
                y,
                str(out / f"{prefix}_{m}.png"),
                f"{m}: {len(kept)} (concept, question, layer, seed) points",
                ylabel=f"{m} / |mu_c|^2",
            )
    names = list(lines[0]["frac"])
    frac = {
        n: {lab: np.mean([d["frac"][n][lab] for d in lines], axis=0).tolist() for lab in ("1", "2", "3")} for n in names
    }
    label_fractions(frac, str(out / f"{prefix}_label_fractions.png"), "label fractions vs step (mean over concepts)")


def figures(args) -> None:
    """PNGs into ``results/crh/figures`` from the jsonl lines: steerability scatters, label fractions, and the
    cylinder view of one concept (its difference vectors recomputed; test questions coloured by outcome)."""
    from zoo.methods.crh.plots import cylinder_view
    from zoo.models.causal_lm import load_causal_lm

    out = Path("results/crh/figures")
    out.mkdir(parents=True, exist_ok=True)
    for table in ("correlation", "lambda"):
        path = Path(args.out) / f"{table}.jsonl"
        if path.is_file():
            lines = [json.loads(x) for x in path.read_text().splitlines()]
            _plots(lines, _points(lines, next(iter(lines[0]["steerability"]))), out, prefix=table)
    lines = [json.loads(x) for x in (Path(args.out) / "correlation.jsonl").read_text().splitlines()]
    model, tok = load_causal_lm(LM)
    dm = CRHPairsDataModule(concepts=args.concepts, n_questions=args.questions)
    dm.setup()
    concept = dm.batch["concepts"][0]
    replies = cached_replies(model, tok, dm.batch["questions"], LM, CACHE, "plain", 64)
    pairs = make_pairs(dm.batch["questions"], replies, [concept], "append")
    for layer in args.layers:
        s = Settings(layers=[layer], split_seed=args.seeds[0])
        acts = difference_vectors(model, tok, pairs, s)[concept["cid"]]
        line = next(d for d in lines if (d["seed"], d["cid"], d["layer"]) == (args.seeds[0], concept["cid"], layer))
        rows = line["runs"]["lambda=0"]
        outcomes = []
        for q in acts["test"]:
            labs = [r[2] for r in sorted(rows, key=lambda r: r[1]) if r[0] == q]
            first = next((lab for lab in labs if lab in (CONCEPT, GIBBERISH)), None)
            outcomes.append({CONCEPT: "concept reached", GIBBERISH: "gibberish first"}.get(first, "never"))
        cylinder_view(
            acts[layer]["d"],
            acts[layer]["d_test"],
            outcomes,
            str(out / f"cylinder_c{concept['cid']}_l{layer}.png"),
            f"concept {concept['cid']} ({concept['concept'][:50]}), layer {layer}, seed {args.seeds[0]}",
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", choices=("correlation", "lambda", "figures"))
    ap.add_argument("--concepts", type=int, default=12)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--layers", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--lambdas", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0])
    ap.add_argument("--baselines", nargs="*", default=["diffmean", "pca", "probe"])
    ap.add_argument("--name", default=None, help="table name for the lambda sweep (default: lambda)")
    ap.add_argument("--questions", type=int, default=None, help="question pool: the first N (default all 805)")
    ap.add_argument("--tabulate-only", action="store_true", help="write the table from the lines present")
    ap.add_argument(
        "--reuse-lambda0",
        action="store_true",
        help="take the lambda = 0 run from correlation.jsonl instead of steering it again",
    )
    ap.add_argument("--n-perm", type=int, default=500)
    ap.add_argument("--out", default="runs/crh-exp")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.table == "correlation":
        correlation(args)
    elif args.table == "figures":
        figures(args)
    else:
        args.table = args.name or "lambda"
        sweep(args)


if __name__ == "__main__":
    main()
