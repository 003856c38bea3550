"""The tables of the CRH run on a pretrained chat LM (:mod:`zoo.methods.crh.pretrained`), from its
``lines.jsonl``: the Implication 2 and 3 correlations per measure and layer with the t-interval over split seeds
(``<name>-correlation``), the difference-vector geometry (``<name>-geometry``) and the model-size axis beside
zoo-lm.chat (``scale``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from zoo.core.results import summarise, write_result
from zoo.methods.crh.analysis import correlation_rows
from zoo.methods.crh.labels import CONCEPT, GIBBERISH, excluded_questions, label, soft_steerability, steerability
from zoo.methods.crh.pipeline import Settings

PAPER = (
    "figure only: consistent positive correlation of steerability / |mu_c|^2 with sin^2/cos over 100 concepts "
    "(Gemma-2B-it layers 9, 13; Llama-2-7B-chat 16, 24); the paper prints no number"
)
MEASURES = {
    "steerability": "label slope, LM judge (the paper's measure with our judge)",
    "keyword_steerability": "label slope, keyword judge",
    "judge_steerability": "slope of the mean LM-judge score (ours, graded)",
    "soft_steerability": "slope of the keyword-token probability (ours, graded)",
}


def line_points(line: dict, keywords: list[str]) -> dict[str, list[dict]]:
    """The per-question points of one line for every measure of :data:`MEASURES`, each with its own exclusions
    (questions whose step-1 output already has the concept by that measure's judge)."""
    rows = line["rows"]
    trip = {
        "lm": [(q, k, lab) for q, k, _, lab, *_ in rows],
        "keyword": [(q, k, label(text, keywords)) for q, k, _, _, text, *_ in rows],
    }
    graded = {
        "judge_steerability": [(q, k, score or 0.0) for q, k, _, _, _, _, score in rows],
        "soft_steerability": [(q, k, mass) for q, k, _, _, _, mass, _ in rows],
    }
    out = {}
    for m in MEASURES:
        t = trip["keyword" if m == "keyword_steerability" else "lm"]
        excl = excluded_questions(t)
        if m in graded:
            value = soft_steerability(graded[m], excl)
            per_q = {q: soft_steerability([r for r in graded[m] if r[0] == q]) for q in line["test"]}
        else:
            value = steerability(t)
            per_q = {q: steerability([r for r in t if r[0] == q]) for q in line["test"]}
        out[m] = [
            {
                "cid": line["cid"],
                "layer": line["layer"],
                "seed": line["seed"],
                "qid": q,
                m: value,
                f"question_{m}": per_q[q],
                "mu_norm": line["mu_norm"],
                "sin": line["sin"][str(q)],
                "cos": line["cos"][str(q)],
                "sim": line["sim"][str(q)],
                "excluded": q in excl,
            }
            for q in line["test"]
        ]
    return out


def tabulate(
    cfg: dict,
    base: Settings,
    batch: dict,
    pairs,
    lines: list[dict],
    geometry: list[dict],
    timing: dict,
    seeds: list[int],
    n_perm: int,
    results_dir: Path | None = None,
) -> None:
    """Write ``<name>-correlation`` (the concepts with a line for every seed of ``seeds``; ``n_perm`` concept
    shuffles for the grid maximum's p) and ``<name>-geometry`` through the results writer (``results_dir``: default
    the repository's results/); for ``crh-smollm2`` also ``scale`` (:func:`write_scale`)."""
    name, lm = cfg["name"], cfg["model"]["lm"]
    keywords = {c["cid"]: c["keywords"] for c in batch["concepts"]}
    run_seeds = sorted({d["seed"] for d in lines})
    per_concept = {}
    for d in lines:
        per_concept.setdefault(d["cid"], set()).add(d["seed"])
    complete = {c for c, ss in per_concept.items() if ss >= set(seeds)}
    lines = [d for d in lines if d["cid"] in complete]
    points: dict[str, list[dict]] = {m: [] for m in MEASURES}
    for d in lines:
        for m, pts in line_points(d, keywords[d["cid"]]).items():
            points[m] += pts
    rows, ci = correlation_rows(points, base.layers, run_seeds, n_perm)
    if not rows:
        print("no concept has every seed yet: no table written", flush=True)
        return
    counts = {}
    for judge in ("lm", "keyword"):
        labs = [r[3] if judge == "lm" else label(r[4], keywords[d["cid"]]) for d in lines for r in d["rows"]]
        counts[judge] = {
            "outputs": len(labs),
            "normal": labs.count(1),
            "concept": labs.count(CONCEPT),
            "gibberish": labs.count(GIBBERISH),
        }
    by_step = {
        judge: [
            float(
                np.mean(
                    [
                        (r[3] if judge == "lm" else label(r[4], keywords[d["cid"]])) == CONCEPT
                        for d in lines
                        for r in d["rows"]
                        if r[1] == k
                    ]
                )
            )
            for k in range(1, base.n_steps + 1)
        ]
        for judge in ("lm", "keyword")
    }
    comply = {
        "r_with": float(np.mean([label(p.resp_with, keywords[p.cid]) == CONCEPT for p in pairs])),
        "r_no": float(np.mean([label(p.resp_no, keywords[p.cid]) == CONCEPT for p in pairs])),
    }
    scale = float(np.mean([d["scale"] for d in lines])) if lines else None
    notes = (
        f"{lm}, {len(complete)} concepts (the first in concepts_100.csv with all seeds {seeds}) x layers "
        f"{base.layers}; pairs: the LM's own greedy {cfg['model']['reply_tokens']}-token answers through its chat "
        f"template without / with the concept instruction ({base.directive} directive), {base.pair_questions} "
        f"questions per concept from the first {cfg['data']['n_questions']} AlpacaEval questions, {base.n_train} "
        f"train / {base.n_test} test per split seed; keyword judge finds the concept in {comply['r_with']:.1%} "
        f"of r_with and {comply['r_no']:.1%} of r_no. v(L, 0) = L d_q/|d_q| added with the authors' pre-hook on "
        f"block l (= block l-1's output) on every forward; L_k = (k/{base.n_steps}) {base.penalty_c:g} rho_l, "
        f"k = 1..{base.n_steps} (rho_l = mean last-token residual norm of the no-concept texts; mean "
        f"{scale if scale is None else round(scale, 1)}); T {base.temperature:g}, {base.max_new_tokens} tokens. "
        f"Judges: the LM asked yes/no (label 2 when P(yes)/(P(yes)+P(no)) >= {base.judge_threshold:g}) and our "
        f"keywords; gibberish by the authors' regex first. Measures: {json.dumps(MEASURES)}. Label counts: "
        f"{json.dumps(counts)}; concept rate per step: {json.dumps(by_step)}. 95% t-intervals over seeds: "
        "extra.ci_over_seeds here and results/crh/scale.json. Permutation test: {n_perm} concept shuffles of the 96-cell grid maximum. "
        f"Time (one thread, shared CPU): {json.dumps({k: round(v) for k, v in timing.items()})}."
    )
    write_result(
        "crh",
        f"{name}-correlation",
        rows,
        summary=summarise(
            rows,
            ["pearson_r", "spearman_rho", "grid_best_r", "grid_perm_p", "lrh_partial_r", "impl3_spearman"],
            by=["measure", "layer"],
        ),
        paper={"pearson_r": PAPER, "impl3_spearman": "about 0 (figure only)"},
        notes=notes,
        extra={
            "ci_over_seeds": ci,
            "label_counts": counts,
            "concept_rate_by_step": by_step,
            "pair_keyword_rate": comply,
            "timing_s": timing,
        },
        results_dir=results_dir,
    )
    geo_rows = []
    for layer in sorted({g["layer"] for g in geometry}):
        for seed in sorted({g["seed"] for g in geometry}):
            sub = [g for g in geometry if g["layer"] == layer and g["seed"] == seed]
            geo_rows.append(
                {
                    "layer": layer,
                    "seed": seed,
                    "concepts": len(sub),
                    **{
                        k: float(np.mean([g[k] for g in sub if g[k] is not None]))
                        for k in ("mu_norm", "rho", "mu3_over_rho", "test_cos", "train_pair_cos")
                    },
                }
            )
    write_result(
        "crh",
        f"{name}-geometry",
        geo_rows,
        summary=summarise(geo_rows, ["mu_norm", "rho", "mu3_over_rho", "test_cos", "train_pair_cos"], by=["layer"]),
        paper="no number (the paper's Figure 2 shows the difference vectors as a cylinder around mu_c)",
        notes=(
            f"{lm}: the difference vectors of the same pairs at more layers (one forward pass, no "
            "steering), mean over concepts: |mu_c| (mean of the train d's), rho_l (mean last-token "
            "no-concept residual norm), 3|mu_c|/rho_l (the paper's largest steering length relative to the "
            "residual), mean cos(theta) of the test d's to mu_c, mean pairwise cosine of the train d's."
        ),
        results_dir=results_dir,
    )
    if name == "crh-smollm2":
        write_scale(results_dir)


SCALE_SOURCES = {
    "zoo-lm.chat": ("correlation.json", ("steerability", "soft_steerability")),
    "smollm2-135m-instruct": ("crh-smollm2-correlation.json", tuple(MEASURES)),
}


def write_scale(results_dir: Path | None = None) -> Path | None:
    """``results/crh/scale.json``: Implication 2 (Pearson r of steerability / |mu_c|^2 with sin^2/cos) and
    Implication 3 (Spearman of per-question steerability with the diff-vector similarity) per model, measure and
    layer, mean over seeds with the 95% t-interval, read from the models' correlation tables; ``None`` when none
    is present."""
    from zoo.core.data import repo_root

    root = results_dir or repo_root() / "results"
    out, sources = [], []
    for model, (name, measures) in SCALE_SOURCES.items():
        f = root / "crh" / name
        if not f.is_file():
            continue
        doc = json.loads(f.read_text())
        counts = doc["label_counts"].get("lm", doc["label_counts"])
        for key, ci in doc["ci_over_seeds"].items():
            measure, layer = key.rsplit(" layer ", 1)
            if measure not in measures:
                continue
            r, i3 = ci["pearson_r"], ci["impl3_spearman"]
            out.append(
                {
                    "model": model,
                    "measure": measure,
                    "layer": int(layer),
                    "seeds": r["n"],
                    "concepts": max(row["n_concepts"] for row in doc["rows"]),
                    "concept_outputs": f"{counts['concept']}/{counts['outputs']}",
                    "impl2_pearson_r": r["mean"],
                    "impl2_lo": r["low"],
                    "impl2_hi": r["high"],
                    "impl3_spearman": i3["mean"],
                    "impl3_lo": i3["low"],
                    "impl3_hi": i3["high"],
                }
            )
        sources.append(f"results/crh/{name}")
    if not out:
        return None
    return write_result(
        "crh",
        "scale",
        out,
        results_dir=results_dir,
        paper={"impl2_pearson_r": PAPER, "impl3_spearman": "about 0 (figure only)"},
        notes=(
            "Model-size axis of the CRH correlation tests: mean over split seeds with the 95% "
            "t-interval (None: the measure is constant, e.g. no output ever judged to hold the "
            "concept); concept_outputs = steered outputs labelled 2 by the run's main judge (the "
            f"LM judge for SmolLM2, keywords for zoo-lm.chat). Read from {', '.join(sources)}."
        ),
    )
