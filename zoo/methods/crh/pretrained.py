"""The CRH tables on a pretrained chat LM (``recipes/crh-smollm2.yaml``: SmolLM2-135M-Instruct): the instructed
pairs, v(L, 0) steering at the recipe's layers, the LM judge and the keyword judge, Implications 2 and 3 per split
seed with the t-interval over seeds, the geometry of the difference vectors at more layers (no generation), and
the judges' agreement with hand labels.

``python -m zoo.methods.crh.pretrained run --recipe crh-smollm2.yaml --seeds 0 1 2 --geometry-layers 6 12 15 22``
``python -m zoo.methods.crh.pretrained sample --n 100`` (outputs to label by hand, into ``--labels``)
``python -m zoo.methods.crh.pretrained agreement`` (the judges against the hand labels)

What a seed changes: the train / test split of each concept's question pool (so mu_c, theta and the steered test
questions) and the sampling seed of the steered generations (T 0.1). The pairs (the LM's answers) do not depend
on it; they are generated once, cached (``model.reply_cache``) and reused, as are the last-token states
(``<out>/states.pt``). Each (seed, concept, layer) result is appended to ``<out>/lines.jsonl`` as it finishes, so
an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
import time
from pathlib import Path

import numpy as np
import torch

from zoo.core.results import summarise, write_result
from zoo.methods.crh.analysis import correlation_rows
from zoo.methods.crh.datamodule import CRHPairsDataModule
from zoo.methods.crh.labels import CONCEPT, GIBBERISH, excluded_questions, label, soft_steerability, steerability
from zoo.methods.crh.pipeline import Settings, build_pairs, difference_vectors, directions, pair_states, steer_concept

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
HAND_RULE = (
    "1 if the output names or clearly exhibits the concept as described (its topic, terms or examples), "
    "even in passing or garbled; for concepts that are kinds of tokens (numbers, codes, symbols, HTML tags, "
    "place names) one clear instance counts; 0 otherwise, including a bare word shared with the concept in "
    "another sense, a word from the concept's domain without the concept and a digit cut off mid-number; "
    "read with the concept and the text only (the judge and keyword fields hidden)"
)


def _log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def recipe_settings(recipe: str, overlays: list[str]) -> tuple[dict, Settings]:
    """The composed recipe and its protocol ``Settings`` (split seed 0).

    Raises:
        ValueError: the recipe is not a crh recipe.
    """
    from zoo.core.recipe import load_recipe

    cfg = load_recipe(recipe, overlays=overlays)
    if cfg["method"] != "crh":
        raise ValueError(f"--recipe {recipe}: method is {cfg['method']!r}, not 'crh'")
    fields = {f.name for f in dataclasses.fields(Settings)}
    return cfg, Settings(**{k: v for k, v in cfg["model"].items() if k in fields})


def _data_args(cfg: dict) -> dict:
    """The datamodule arguments the driver uses from the recipe's ``data:`` block (no user pairs CSV)."""
    return {k: cfg["data"][k] for k in ("prompts_path", "concepts_path", "keywords_path", "concepts", "n_questions")}


def _states(model, tok, pairs, layers: list[int], template: str, path: Path) -> dict:
    """:func:`pipeline.pair_states`, cached in ``path`` under a hash of the texts and layers."""
    key = hashlib.sha256(
        json.dumps([[p.cid, p.qid, p.resp_no, p.resp_with] for p in pairs] + [layers, template]).encode()
    ).hexdigest()[:16]
    if path.is_file():
        saved = torch.load(path, weights_only=False)
        if saved.get("key") == key:
            return saved["states"]
    states = pair_states(model, tok, pairs, layers, template)
    torch.save({"key": key, "states": states}, path)
    return states


def run(args) -> None:
    """Pairs, states, the geometry rows, then v(L, 0) steering per (concept, seed, layer) not yet in the lines;
    then the tables."""
    from zoo.models.causal_lm import load_causal_lm

    cfg, base = recipe_settings(args.recipe, args.overlay)
    out = Path(args.out or f"runs/{cfg['name']}")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    torch.manual_seed(cfg["seed"])
    model, tok = load_causal_lm(cfg["model"]["lm"])
    dm = CRHPairsDataModule(**_data_args(cfg))
    dm.setup()
    batch = dm.batch
    pairs = build_pairs(
        model, tok, batch, base, cfg["model"]["reply_cache"], cfg["model"]["reply_tokens"], cfg["model"]["lm"], _log
    )
    t_pairs = time.time() - t0
    layers = sorted(set(base.layers) | set(args.geometry_layers or []))
    states = _states(model, tok, pairs, layers, base.template, out / "states.pt")
    t_states = time.time() - t0 - t_pairs
    _log(f"pairs {t_pairs:.0f}s, states {t_states:.0f}s ({len(pairs)} pairs, layers {layers})")
    path = out / "lines.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []
    have = {(d["seed"], d["cid"], d["layer"]) for d in lines}
    acts = {
        seed: difference_vectors(model, tok, pairs, dataclasses.replace(base, split_seed=seed, layers=layers), states)
        for seed in args.seeds
    }
    geometry = [
        _geometry(acts[seed][c["cid"]], layer, c["cid"], seed)
        for seed in args.seeds
        for c in batch["concepts"]
        if c["cid"] in acts[seed]
        for layer in layers
    ]
    for concept in batch["concepts"]:  # concept-major: a run cut short has every seed of the concepts it finished
        c = concept["cid"]
        if (args.budget_min is not None and time.time() - t0 > 60 * args.budget_min) or (
            args.stop_at and time.strftime("%H:%M", time.gmtime()) >= args.stop_at
        ):
            _log(
                f"budget ({args.budget_min} min, stop at {args.stop_at} UTC) spent: no further concepts (rerun to "
                "resume)"
            )
            break
        for seed in args.seeds:
            s = dataclasses.replace(base, split_seed=seed)
            for layer in s.layers:
                if (seed, c, layer) in have or c not in acts[seed]:
                    continue
                t1 = time.time()
                dirs = directions(acts[seed][c][layer], s)
                res = steer_concept(
                    model,
                    tok,
                    concept,
                    batch["questions"],
                    acts[seed][c]["test"],
                    acts[seed][c][layer],
                    dirs,
                    layer,
                    s,
                    seed=seed,
                )
                line = {
                    "seed": seed,
                    "cid": c,
                    "layer": layer,
                    "seconds": time.time() - t1,
                    "mu_norm": res["mu_norm"],
                    "scale": res["scale"],
                    "cos": res["cos"],
                    "sin": res["sin"],
                    "sim": res["sim"],
                    "train": acts[seed][c]["train"],
                    "test": acts[seed][c]["test"],
                    "rows": res["runs"][s.steer_run],
                }
                with path.open("a") as f:
                    f.write(json.dumps(line) + "\n")
                lines.append(json.loads(json.dumps(line)))  # the keys as read back on resume
                _log(f"concept {c} seed {seed} layer {layer}: {line['seconds']:.0f}s")
    timing = {
        "pairs_s": t_pairs,
        "states_s": t_states,
        "total_s": time.time() - t0,
        "steer_s_all_lines": sum(d["seconds"] for d in lines),
    }
    tabulate(cfg, base, batch, pairs, lines, geometry, args, timing)


def _geometry(acts: dict, layer: int, cid: int, seed: int) -> dict:
    """One concept's difference-vector geometry at one layer (train split): |mu_c|, rho_l, 3 |mu_c| / rho_l, the
    mean cos theta of the test d's to mu_c and the mean pairwise cosine of the train d's."""
    a = acts[layer]
    mu = a["d"].mean(0)
    unit = a["d"] / a["d"].norm(dim=1, keepdim=True).clamp_min(1e-12)
    n = len(unit)
    pair_cos = float(((unit @ unit.T).sum() - n) / (n * (n - 1))) if n > 1 else None
    test_cos = (a["d_test"] @ mu) / (a["d_test"].norm(dim=1) * mu.norm()).clamp_min(1e-12)
    rho = float(a["a_no"].norm(dim=1).mean())
    return {
        "layer": layer,
        "seed": seed,
        "cid": cid,
        "mu_norm": float(mu.norm()),
        "rho": rho,
        "mu3_over_rho": 3 * float(mu.norm()) / rho,
        "test_cos": float(test_cos.mean()),
        "train_pair_cos": pair_cos,
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
    cfg: dict, base: Settings, batch: dict, pairs, lines: list[dict], geometry: list[dict], args, timing: dict
) -> None:
    """Write ``<name>-correlation`` and ``<name>-geometry`` through the results writer."""
    name, lm = cfg["name"], cfg["model"]["lm"]
    keywords = {c["cid"]: c["keywords"] for c in batch["concepts"]}
    seeds = sorted({d["seed"] for d in lines})
    per_concept = {}
    for d in lines:
        per_concept.setdefault(d["cid"], set()).add(d["seed"])
    complete = {c for c, ss in per_concept.items() if ss >= set(args.seeds)}
    lines = [d for d in lines if d["cid"] in complete]
    points: dict[str, list[dict]] = {m: [] for m in MEASURES}
    for d in lines:
        for m, pts in line_points(d, keywords[d["cid"]]).items():
            points[m] += pts
    rows, ci = correlation_rows(points, base.layers, seeds, args.n_perm)
    if not rows:
        _log("no concept has every seed yet: no table written")
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
        f"{lm}, {len(complete)} concepts (the first in concepts_100.csv with all seeds {args.seeds}) x layers "
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
        "extra.ci_over_seeds here and results/crh/scale.json. Permutation test: {args.n_perm} concept shuffles of the 96-cell grid maximum. "
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
        results_dir=args.results_dir,
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
        results_dir=args.results_dir,
    )
    if name == "crh-smollm2":
        write_scale(args.results_dir)


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


def _lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "lines.jsonl").read_text().splitlines()]


def sample(args) -> None:
    """Write ``--n`` steered outputs (not gibberish) for hand labelling to ``--labels``: half from outputs either
    judge calls positive, half from the rest (seeded), shuffled; the ``hand`` field is left empty."""
    cfg, _ = recipe_settings(args.recipe, args.overlay)
    dm = CRHPairsDataModule(**_data_args(cfg))
    dm.setup()
    concepts = {c["cid"]: c for c in dm.batch["concepts"]}
    items = [
        {
            "seed": d["seed"],
            "cid": d["cid"],
            "qid": r[0],
            "step": r[1],
            "concept": concepts[d["cid"]]["concept"],
            "text": r[4],
            "keyword": int(label(r[4], concepts[d["cid"]]["keywords"]) == CONCEPT),
            "judge_score": r[6],
            "judge": int(r[3] == CONCEPT),
        }
        for d in _lines(Path(args.out or f"runs/{cfg['name']}"))
        for r in d["rows"]
        if r[3] != GIBBERISH
    ]
    rng = random.Random(args.seed)
    pos = [i for i in items if i["keyword"] or i["judge"]]
    neg = [i for i in items if not (i["keyword"] or i["judge"])]
    k = min(len(pos), args.n // 2)
    pick = rng.sample(pos, k) + rng.sample(neg, min(len(neg), args.n - k))
    rng.shuffle(pick)
    strata = {
        "either_judge_positive": {"picked": k, "pool": len(pos)},
        "both_negative": {"picked": len(pick) - k, "pool": len(neg)},
    }
    Path(args.labels).write_text(
        json.dumps({"rule": HAND_RULE, "strata": strata, "items": [{**i, "hand": None} for i in pick]}, indent=1) + "\n"
    )
    print(f"{len(pick)} outputs -> {args.labels} ({json.dumps(strata)})")


def _kappa(a: np.ndarray, b: np.ndarray) -> float | None:
    po = float(np.mean(a == b))
    pe = float(np.mean(a) * np.mean(b) + (1 - np.mean(a)) * (1 - np.mean(b)))
    return None if pe == 1 else (po - pe) / (1 - pe)


def agreement(args) -> None:
    """Accuracy, Cohen's kappa, precision and recall of each judge against the hand labels (and of the judges with
    each other), per stratum and pooled, plus the AUC of the LM-judge score; through the results writer."""
    from sklearn.metrics import roc_auc_score

    data = json.loads(Path(args.labels).read_text())
    items = [i for i in data["items"] if i["hand"] is not None]
    cfg, _ = recipe_settings(args.recipe, args.overlay)
    rows = []
    groups = {
        "pooled": items,
        "either_judge_positive": [i for i in items if i["keyword"] or i["judge"]],
        "both_negative": [i for i in items if not (i["keyword"] or i["judge"])],
    }
    for group, sub in groups.items():
        if not sub:
            continue
        hand = np.array([i["hand"] for i in sub])
        for pair, (x, y) in {
            "lm_vs_hand": ("judge", "hand"),
            "keyword_vs_hand": ("keyword", "hand"),
            "lm_vs_keyword": ("judge", "keyword"),
        }.items():
            a, b = np.array([i[x] for i in sub]), np.array([i[y] for i in sub])
            tp = int(((a == 1) & (b == 1)).sum())
            rows.append(
                {
                    "group": group,
                    "pair": pair,
                    "n": len(sub),
                    "accuracy": float(np.mean(a == b)),
                    "kappa": _kappa(a, b),
                    "precision": tp / int(a.sum()) if a.sum() else None,
                    "recall": tp / int(b.sum()) if b.sum() else None,
                    "positives_ref": int(b.sum()),
                }
            )
        if 0 < hand.sum() < len(hand):
            rows.append(
                {
                    "group": group,
                    "pair": "lm_score_auc_vs_hand",
                    "n": len(sub),
                    "accuracy": float(roc_auc_score(hand, [i["judge_score"] for i in sub])),
                    "kappa": None,
                    "precision": None,
                    "recall": None,
                    "positives_ref": int(hand.sum()),
                }
            )
    write_result(
        "crh",
        f"{cfg['name']}-judge-agreement",
        rows,
        kind="result",
        paper="the authors judge with Llama-3.3-70B-Instruct and report no agreement number",
        notes=(
            f"{len(items)} steered outputs of {cfg['model']['lm']} (not gibberish) labelled by hand "
            f"({args.labels}; rule: {data['rule']}). Strata (picked of pool): "
            f"{json.dumps(data['strata'])}; pooled numbers weight the strata by their picks, not their "
            "pools. lm = the LM judge at its threshold; for lm_score_auc_vs_hand the accuracy column "
            "holds the ROC AUC of the score."
        ),
        results_dir=args.results_dir,
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("run", "sample", "agreement"))
    ap.add_argument("--recipe", default="crh-smollm2.yaml")
    ap.add_argument("--overlay", nargs="*", default=[])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument(
        "--geometry-layers",
        type=int,
        nargs="*",
        default=[],
        help="more layers for the geometry table (one forward pass; no steering there)",
    )
    ap.add_argument("--n-perm", type=int, default=500)
    ap.add_argument(
        "--budget-min",
        type=float,
        default=None,
        help="start no further concept after this many minutes (the tables use the finished ones)",
    )
    ap.add_argument("--stop-at", default=None, help="start no further concept after this UTC time (HH:MM)")
    ap.add_argument("--out", default=None, help="run folder (default runs/<recipe name>)")
    ap.add_argument("--results-dir", type=Path, default=None, help="default: the repository's results/")
    ap.add_argument("--labels", default="data/crh-prompts/smollm2-hand-labels.json")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    {"run": run, "sample": sample, "agreement": agreement}[args.command](args)


if __name__ == "__main__":
    main()
