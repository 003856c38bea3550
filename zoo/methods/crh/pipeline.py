"""The CRH protocol end to end for one LM: pairs -> last-token difference vectors -> the four directions and the
cylinder geometry -> steered generations -> labels -> steerability (§5.2-5.5). Shared by ``CRHModule`` (a recipe
run) and ``experiments.py`` (the seed x layer grid). One file (~450 lines) because it is one ordered protocol whose
steps hand each other the same pairs, vectors and labels; the geometry, labels and steering it calls live in their
own modules."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from zoo.methods.crh.geometry import (
    DIRECTIONS,
    cylinder,
    diffmean,
    mean_center,
    pca_direction,
    penalty_vector,
    probe_direction,
    steer_lengths,
)
from zoo.methods.crh.labels import (
    CONCEPT,
    GIBBERISH,
    NORMAL,
    excluded_questions,
    label,
    soft_steerability,
    steerability,
)
from zoo.methods.crh.pairs import Pair, concept_sentence, prompt_text, split_questions, with_concept
from zoo.methods.crh.steering import last_token_states, steered_generate


@dataclass
class Settings:
    """Protocol settings (defaults: the authors' values, layers for a 4-block LM).

    ``baselines``: directions steered prompt-only at lengths up to ``baseline_c |mu_c|`` (§5.3); ``lambdas``:
    penalties of the v(L, lambda) runs, steered on every forward up to ``penalty_c |mu_c|`` (§5.4);
    ``steer_run``: the run whose steerability enters the correlation (the authors use lambda = 0).

    ``pairs``: ``template`` (ours for LMs that cannot follow an instruction: greedy reply + keyword sentence) or
    ``instructed`` (the authors': the LM's own answers without / with a concept instruction, :mod:`.instructed`;
    ``pair_questions`` per concept, ``directive``, ``reply_temperature``: 0 greedy). ``length_unit``: the scale of the
    length grid, ``mu`` (the paper's ``c |mu_c|``) or ``residual`` (``c rho_l``, rho_l = mean norm of the no-concept
    last-token states of the concept's train questions at the layer). ``judge``: ``keyword`` or ``lm``
    (:mod:`.judge`, label 2 when the score is >= ``judge_threshold``)."""

    layers: list[int] = field(default_factory=lambda: [2, 3])
    n_train: int = 100
    n_test: int = 5
    split_seed: int = 0
    baselines: list[str] = field(default_factory=list)
    lambdas: list[float] = field(default_factory=lambda: [0.0])
    baseline_c: float = 5.0
    penalty_c: float = 3.0
    n_steps: int = 25
    hook_site: str = "input"
    pca_sign: str = "none"
    template: str = "plain"
    max_new_tokens: int = 32
    temperature: float = 0.1
    batch_size: int = 128
    probe_steps: int = 200
    authors_escapes: bool = False
    steer_run: str = "lambda=0"
    pairs: str = "template"
    pair_questions: int | None = None
    directive: str = "short"
    reply_temperature: float = 0.0
    length_unit: str = "mu"
    judge: str = "keyword"
    judge_threshold: float = 0.5

    def __post_init__(self):
        for name, allowed in (
            ("pairs", ("template", "instructed")),
            ("length_unit", ("mu", "residual")),
            ("judge", ("keyword", "lm")),
            ("directive", ("short", "authors")),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        bad = [b for b in self.baselines if b not in DIRECTIONS]
        if bad:
            raise ValueError(f"baselines: unknown {bad}; choose from {list(DIRECTIONS)}")
        if any(not 0.0 <= lam <= 1.0 for lam in self.lambdas):
            raise ValueError(f"lambdas must lie in [0, 1], got {self.lambdas}")
        if self.n_steps < 2:
            raise ValueError(f"n_steps must be >= 2 (a slope needs two steps), got {self.n_steps}")


def run_name(lam: float) -> str:
    """The name of a v(L, lambda) run: ``lambda=0.25``."""
    return f"lambda={lam:g}"


def make_pairs(questions: dict[int, str], replies: dict[int, str], concepts: list[dict], insert: str) -> list[Pair]:
    """Our pairs (see ``pairs``): every question with a non-empty reply, for every concept ``{cid, concept,
    keywords}``."""
    return [
        Pair(
            q,
            c["cid"],
            questions[q],
            c["concept"],
            replies[q],
            with_concept(replies[q], concept_sentence(c["keywords"], q, c["cid"]), insert),
        )
        for c in concepts
        for q in sorted(questions)
        if replies[q].strip()
    ]


def pair_states(model, tokenizer, pairs: list[Pair], layers: list[int], template: str) -> dict:
    """Last-token states of both texts of each pair (prompt of the plain question + the answer), each distinct
    ``r_no`` text once.

    Returns:
        ``{"no": {(qid, question, r_no): row}, "with": {(cid, qid): row}, "a_no": {layer: [N_no, D]},
        "a_with": {layer: [N_pairs, D]}}``.
    """
    special = template == "plain"
    keys_no = list(dict.fromkeys((p.qid, p.question, p.resp_no) for p in pairs))
    a_no = last_token_states(
        model,
        tokenizer,
        [prompt_text(tokenizer, q, template) + r for _, q, r in keys_no],
        layers,
        add_special_tokens=special,
    )
    a_with = last_token_states(
        model,
        tokenizer,
        [prompt_text(tokenizer, p.question, template) + p.resp_with for p in pairs],
        layers,
        add_special_tokens=special,
    )
    return {
        "no": {k: i for i, k in enumerate(keys_no)},
        "with": {(p.cid, p.qid): i for i, p in enumerate(pairs)},
        "a_no": a_no,
        "a_with": a_with,
    }


def difference_vectors(model, tokenizer, pairs: list[Pair], s: Settings, states: dict | None = None) -> dict:
    """Last-token states of both responses of each pair, ``d = a_with - a_no``, grouped by concept and split.

    Args:
        states: :func:`pair_states` of (at least) the split's pairs, computed once and reused across split seeds;
            ``None``: computed here for the pairs the split needs.

    Returns:
        ``{cid: {"train": [qid], "test": [qid], layer: {"a_no", "a_with", "d": [N, D] train, "d_test": [n_test, D]}}}``.
    """
    by_cid: dict[int, dict[int, Pair]] = {}
    for p in pairs:
        by_cid.setdefault(p.cid, {})[p.qid] = p
    split = {c: split_questions(list(ps), c, s.n_train, s.n_test, s.split_seed) for c, ps in by_cid.items()}
    if states is None:
        need = {(c, q) for c, (tr, te) in split.items() for q in tr + te}
        states = pair_states(model, tokenizer, [p for p in pairs if (p.cid, p.qid) in need], s.layers, s.template)
    out: dict = {}
    for c, (tr, te) in split.items():
        out[c] = {"train": tr, "test": te}
        for layer in s.layers:

            def rows(qs, c=c, layer=layer):
                no = torch.stack(
                    [states["a_no"][layer][states["no"][(q, by_cid[c][q].question, by_cid[c][q].resp_no)]] for q in qs]
                )
                wi = torch.stack([states["a_with"][layer][states["with"][(c, q)]] for q in qs])
                return no, wi

            no_tr, wi_tr = rows(tr)
            no_te, wi_te = rows(te)
            out[c][layer] = {"a_no": no_tr, "a_with": wi_tr, "d": wi_tr - no_tr, "d_test": wi_te - no_te}
    return out


def directions(acts: dict, s: Settings) -> torch.Tensor:
    """The four §5.3 directions of one concept at one layer, stacked in ``DIRECTIONS`` order: ``[4, D]``
    (diffmean and mean-center unnormalised, PCA and probe unit)."""
    d = acts["d"]
    return torch.stack(
        [
            diffmean(d),
            mean_center(acts["a_with"], acts["a_no"]),
            pca_direction(d, s.pca_sign),
            probe_direction(acts["a_with"], acts["a_no"], s.probe_steps, seed=s.split_seed),
        ]
    )


def keyword_token_ids(tokenizer, keywords: list[str]) -> list[int]:
    """First token of each keyword, bare and after a space, lower-case and capitalised (ours: what the soft judge
    watches)."""
    ids = set()
    for kw in keywords:
        for form in (kw, kw[:1].upper() + kw[1:]):
            for text in (form, " " + form):
                tokens = tokenizer.encode(text, add_special_tokens=False)
                if tokens:
                    ids.add(tokens[0])
    return sorted(ids)


def length_scale(acts: dict, mu_norm: float, s: Settings) -> float:
    """The unit of the length grid: ``|mu_c|`` (the paper) or ``rho_l``, the mean norm of the concept's train
    no-concept last-token states at the layer (``length_unit: residual``)."""
    return mu_norm if s.length_unit == "mu" else float(acts["a_no"].norm(dim=1).mean())


def label_outputs(model, tokenizer, texts: list[str], concept: dict, s: Settings) -> tuple[list[int], list]:
    """Labels 1/2/3 of ``texts`` and the judge scores (``None`` each with the keyword judge, or for gibberish).

    Gibberish (the authors' regex) comes first, as in their pipeline; the LM judge scores only the rest."""
    from zoo.methods.crh.judge import judge_scores
    from zoo.methods.crh.labels import gibberish_rule

    gib = [gibberish_rule(t, s.authors_escapes) is not None for t in texts]
    if s.judge == "keyword":
        return [label(t, concept["keywords"], s.authors_escapes) for t in texts], [None] * len(texts)
    live = [i for i, g in enumerate(gib) if not g]
    got = judge_scores(
        model, tokenizer, [texts[i] for i in live], [concept["concept"]] * len(live), template=s.template
    ).tolist()
    scores: list = [None] * len(texts)
    for i, v in zip(live, got):
        scores[i] = v
    labels = [GIBBERISH if g else (CONCEPT if v >= s.judge_threshold else NORMAL) for g, v in zip(gib, scores)]
    return labels, scores


def steer_concept(
    model,
    tokenizer,
    concept: dict,
    questions: dict[int, str],
    test: list[int],
    acts: dict,
    dirs: torch.Tensor,
    layer: int,
    s: Settings,
    seed: int = 0,
) -> dict:
    """All steering runs of one concept at one layer: generate, label.

    Returns:
        ``{"mu_norm", "scale", "cos": {qid}, "sin": {qid}, "sim": {qid: mean cos(d_q, train d)}, "runs": {name:
        [(qid, step, length, label, text, keyword_mass, judge_score)]}}`` (``keyword_mass``: see
        ``steering.steered_generate``; ``judge_score``: :func:`label_outputs`; ``scale``: :func:`length_scale`).
    """
    mu = dirs[0]
    mu_norm = float(mu.norm())
    scale = length_scale(acts, mu_norm, s)
    u = mu / mu_norm
    geo = cylinder(acts["d_test"], mu)
    train_unit = acts["d"] / acts["d"].norm(dim=1, keepdim=True)
    sims = (acts["d_test"] / acts["d_test"].norm(dim=1, keepdim=True)) @ train_unit.T
    prompts = [prompt_text(tokenizer, questions[q], s.template) for q in test]
    jobs: list[tuple[str, torch.Tensor, bool]] = []
    for name in s.baselines:
        k = DIRECTIONS.index(name)
        unit = dirs[k] / dirs[k].norm()
        lengths = steer_lengths(scale, s.baseline_c, s.n_steps)
        jobs.append((name, torch.cat([lengths[:, None] * unit for _ in test]), True))
    for lam in s.lambdas:
        lengths = steer_lengths(scale, s.penalty_c, s.n_steps)
        vecs = [
            penalty_vector(lengths, geo["cos"][i], geo["sin"][i], u, geo["e_perp"][i], lam) for i in range(len(test))
        ]
        jobs.append((run_name(lam), torch.cat(vecs), False))
    runs = {}
    watch = keyword_token_ids(tokenizer, concept["keywords"])
    for name, vecs, prompt_only in jobs:
        texts, mass = steered_generate(
            model,
            tokenizer,
            [p for p in prompts for _ in range(s.n_steps)],
            vecs,
            layer,
            s.hook_site,
            prompt_only,
            s.max_new_tokens,
            s.temperature,
            s.batch_size,
            seed,
            add_special_tokens=s.template == "plain",
            watch_ids=watch,
        )
        labels, scores = label_outputs(model, tokenizer, texts, concept, s)
        lengths, mass = vecs.norm(dim=1).tolist(), mass.tolist()
        runs[name] = [
            (q, k + 1, lengths[j], labels[j], texts[j], mass[j], scores[j])
            for i, q in enumerate(test)
            for k in range(s.n_steps)
            for j in [i * s.n_steps + k]
        ]
    return {
        "mu_norm": mu_norm,
        "scale": scale,
        "cos": dict(zip(test, geo["cos"].tolist())),
        "sin": dict(zip(test, geo["sin"].tolist())),
        "sim": dict(zip(test, sims.mean(dim=1).tolist())),
        "runs": runs,
    }


def summarise_concept(result: dict, s: Settings) -> dict:
    """Steerability of every run, the excluded questions of the correlation run, per-question steerability
    (Implication 3) and label fractions per step (``frac[name][label] = [n_steps]``).

    Measures: ``steerability`` (the paper's label slope, with the configured judge), ``soft_steerability`` (ours:
    keyword-probability slope) and, with the LM judge, ``judge_steerability`` (ours: slope of the mean judge score,
    gibberish counted as 0)."""
    out = {"steerability": {}, "soft_steerability": {}, "judge_steerability": {}, "frac": {}}
    for name, rows in result["runs"].items():
        trip = [(q, k, lab) for q, k, _, lab, *_ in rows]
        excl = excluded_questions(trip)
        out["steerability"][name] = steerability(trip)
        out["soft_steerability"][name] = soft_steerability([(r[0], r[1], r[5]) for r in rows], excl)
        out["judge_steerability"][name] = (
            soft_steerability([(r[0], r[1], r[6] or 0.0) for r in rows], excl) if s.judge == "lm" else None
        )
        labs = np.array([[lab for q2, k, lab in trip if k == step] for step in range(1, s.n_steps + 1)])
        out["frac"][name] = {str(v): (labs == v).mean(axis=1).tolist() for v in (1, CONCEPT, GIBBERISH)}
    rows = result["runs"].get(s.steer_run, [])
    trip = [(q, k, lab) for q, k, _, lab, *_ in rows]
    out["excluded"] = sorted(excluded_questions(trip))
    out["question_steerability"] = {q: steerability([t for t in trip if t[0] == q]) for q in result["cos"]}
    out["question_soft_steerability"] = {
        q: soft_steerability([(r[0], r[1], r[5]) for r in rows if r[0] == q]) for q in result["cos"]
    }
    out["question_judge_steerability"] = {
        q: soft_steerability([(r[0], r[1], r[6] or 0.0) for r in rows if r[0] == q]) if s.judge == "lm" else None
        for q in result["cos"]
    }
    return out


def build_pairs(
    model, tokenizer, batch: dict, s: Settings, reply_cache: str | None, reply_tokens: int, lm_key: str, log=None
) -> list[Pair]:
    """The pairs of ``s.pairs``: ``template`` (the LM's greedy replies, cached, plus our keyword sentence) or
    ``instructed`` (the LM's own answers without / with the concept instruction, :mod:`.instructed`); both use
    ``reply_tokens`` new tokens and the JSON cache ``reply_cache``."""
    from zoo.methods.crh.instructed import instructed_pairs, question_pools
    from zoo.methods.crh.pairs import cached_replies

    say = log or (lambda msg: None)
    if s.pairs == "instructed":
        pools = question_pools(list(batch["questions"]), batch["concepts"], s.pair_questions)
        return instructed_pairs(
            model,
            tokenizer,
            batch["questions"],
            batch["concepts"],
            pools,
            reply_cache,
            lm_key,
            s.directive,
            reply_tokens,
            temperature=s.reply_temperature,
            log=say,
        )
    say(f"replies: {len(batch['questions'])} questions")
    replies = cached_replies(model, tokenizer, batch["questions"], lm_key, reply_cache, s.template, reply_tokens)
    return make_pairs(batch["questions"], replies, batch["concepts"], batch["insert"])


def run_all(
    model,
    tokenizer,
    batch: dict,
    s: Settings,
    reply_cache: str | None = None,
    reply_tokens: int = 64,
    lm_key: str = "",
    log=None,
) -> dict:
    """The whole protocol on the datamodule's batch (``questions``, ``concepts``, ``pairs`` or ``None``, ``insert``).

    Returns:
        ``{"concepts": [cid], "directions": [C, 4, n_layers, D], "results": {(cid, layer): steer_concept(...)},
        "summaries": {(cid, layer): summarise_concept(...)}, "points": [per (cid, layer, test qid) dict],
        "acts": difference_vectors(...)}``.
    """
    say = log or (lambda msg: None)
    concepts = batch["concepts"]
    pairs = batch["pairs"]
    if pairs is None:
        pairs = build_pairs(model, tokenizer, batch, s, reply_cache, reply_tokens, lm_key, say)
    questions = {p.qid: p.question for p in pairs}
    acts = difference_vectors(model, tokenizer, pairs, s)
    cids = [c["cid"] for c in concepts if c["cid"] in acts]
    dirs = torch.stack([torch.stack([directions(acts[c][layer], s) for layer in s.layers], dim=1) for c in cids])
    results, summaries, points = {}, {}, []
    if s.baselines or s.lambdas:
        for i, c in enumerate(cids):
            concept = next(x for x in concepts if x["cid"] == c)
            for j, layer in enumerate(s.layers):
                say(f"steer concept {c} layer {layer} ({i + 1}/{len(cids)})")
                res = steer_concept(
                    model,
                    tokenizer,
                    concept,
                    questions,
                    acts[c]["test"],
                    acts[c][layer],
                    dirs[i, :, j],
                    layer,
                    s,
                    seed=s.split_seed,
                )
                summ = summarise_concept(res, s)
                results[(c, layer)], summaries[(c, layer)] = res, summ
                for q in acts[c]["test"]:
                    points.append(
                        {
                            "cid": c,
                            "layer": layer,
                            "seed": s.split_seed,
                            "qid": q,
                            "steerability": summ["steerability"].get(s.steer_run),
                            "soft_steerability": summ["soft_steerability"].get(s.steer_run),
                            "judge_steerability": summ["judge_steerability"].get(s.steer_run),
                            "question_soft_steerability": summ["question_soft_steerability"][q],
                            "question_judge_steerability": summ["question_judge_steerability"][q],
                            "mu_norm": res["mu_norm"],
                            "sin": res["sin"][q],
                            "cos": res["cos"][q],
                            "sim": res["sim"][q],
                            "question_steerability": summ["question_steerability"][q],
                            "excluded": q in summ["excluded"],
                        }
                    )
    return {
        "concepts": cids,
        "directions": dirs,
        "results": results,
        "summaries": summaries,
        "points": points,
        "acts": acts,
    }
