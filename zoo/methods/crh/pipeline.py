"""The CRH protocol end to end for one LM: pairs -> last-token difference vectors -> the four directions and the
cylinder geometry -> steered generations -> labels -> steerability (§5.2-5.5). Shared by ``CRHModule`` (a recipe
run) and ``experiments.py`` (the seed x layer grid)."""
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
from zoo.methods.crh.labels import CONCEPT, GIBBERISH, excluded_questions, label, soft_steerability, steerability
from zoo.methods.crh.pairs import Pair, concept_sentence, prompt_text, split_questions, with_concept
from zoo.methods.crh.steering import last_token_states, steered_generate


@dataclass
class Settings:
    """Protocol settings (defaults: the authors' values, layers for a 4-block LM).

    ``baselines``: directions steered prompt-only at lengths up to ``baseline_c |mu_c|`` (§5.3); ``lambdas``:
    penalties of the v(L, lambda) runs, steered on every forward up to ``penalty_c |mu_c|`` (§5.4);
    ``steer_run``: the run whose steerability enters the correlation (the authors use lambda = 0)."""
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

    def __post_init__(self):
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
    return [Pair(q, c["cid"], questions[q], c["concept"], replies[q],
                 with_concept(replies[q], concept_sentence(c["keywords"], q, c["cid"]), insert))
            for c in concepts for q in sorted(questions) if replies[q].strip()]


def difference_vectors(model, tokenizer, pairs: list[Pair], s: Settings) -> dict:
    """Last-token states of both responses of each pair, ``d = a_with - a_no``, grouped by concept and split.

    Returns:
        ``{cid: {"train": [qid], "test": [qid], layer: {"a_no", "a_with", "d": [N, D] train, "d_test": [n_test, D]}}}``.
    """
    special = s.template == "plain"
    by_cid: dict[int, dict[int, Pair]] = {}
    for p in pairs:
        by_cid.setdefault(p.cid, {})[p.qid] = p
    split = {c: split_questions(list(ps), c, s.n_train, s.n_test, s.split_seed) for c, ps in by_cid.items()}
    need = [(c, q) for c, (tr, te) in split.items() for q in tr + te]
    texts_no = {}
    for c, q in need:
        p = by_cid[c][q]
        texts_no.setdefault((q, p.question, p.resp_no), None)
    keys_no = list(texts_no)
    a_no = last_token_states(model, tokenizer, [prompt_text(tokenizer, qq, s.template) + r for _, qq, r in keys_no],
                             s.layers, add_special_tokens=special)
    a_with = last_token_states(model, tokenizer, [prompt_text(tokenizer, by_cid[c][q].question, s.template)
                                                  + by_cid[c][q].resp_with for c, q in need], s.layers,
                               add_special_tokens=special)
    row_no = {k: i for i, k in enumerate(keys_no)}
    row_with = {k: i for i, k in enumerate(need)}
    out: dict = {}
    for c, (tr, te) in split.items():
        out[c] = {"train": tr, "test": te}
        for layer in s.layers:
            def rows(qs, c=c, layer=layer):
                no = torch.stack([a_no[layer][row_no[(q, by_cid[c][q].question, by_cid[c][q].resp_no)]] for q in qs])
                wi = torch.stack([a_with[layer][row_with[(c, q)]] for q in qs])
                return no, wi
            no_tr, wi_tr = rows(tr)
            no_te, wi_te = rows(te)
            out[c][layer] = {"a_no": no_tr, "a_with": wi_tr, "d": wi_tr - no_tr, "d_test": wi_te - no_te}
    return out


def directions(acts: dict, s: Settings) -> torch.Tensor:
    """The four §5.3 directions of one concept at one layer, stacked in ``DIRECTIONS`` order: ``[4, D]``
    (diffmean and mean-center unnormalised, PCA and probe unit)."""
    d = acts["d"]
    return torch.stack([diffmean(d), mean_center(acts["a_with"], acts["a_no"]), pca_direction(d, s.pca_sign),
                        probe_direction(acts["a_with"], acts["a_no"], s.probe_steps, seed=s.split_seed)])


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


def steer_concept(model, tokenizer, concept: dict, questions: dict[int, str], test: list[int], acts: dict,
                  dirs: torch.Tensor, layer: int, s: Settings, seed: int = 0) -> dict:
    """All steering runs of one concept at one layer: generate, label.

    Returns:
        ``{"mu_norm", "cos": {qid}, "sin": {qid}, "sim": {qid: mean cos(d_q, train d)}, "runs": {name: [(qid, step,
        length, label, text, keyword_mass)]}}`` (``keyword_mass``: see ``steering.steered_generate``).
    """
    mu = dirs[0]
    mu_norm = float(mu.norm())
    u = mu / mu_norm
    geo = cylinder(acts["d_test"], mu)
    train_unit = acts["d"] / acts["d"].norm(dim=1, keepdim=True)
    sims = (acts["d_test"] / acts["d_test"].norm(dim=1, keepdim=True)) @ train_unit.T
    prompts = [prompt_text(tokenizer, questions[q], s.template) for q in test]
    jobs: list[tuple[str, torch.Tensor, bool]] = []
    for name in s.baselines:
        k = DIRECTIONS.index(name)
        unit = dirs[k] / dirs[k].norm()
        lengths = steer_lengths(mu_norm, s.baseline_c, s.n_steps)
        jobs.append((name, torch.cat([lengths[:, None] * unit for _ in test]), True))
    for lam in s.lambdas:
        lengths = steer_lengths(mu_norm, s.penalty_c, s.n_steps)
        vecs = [penalty_vector(lengths, geo["cos"][i], geo["sin"][i], u, geo["e_perp"][i], lam)
                for i in range(len(test))]
        jobs.append((run_name(lam), torch.cat(vecs), False))
    runs = {}
    watch = keyword_token_ids(tokenizer, concept["keywords"])
    for name, vecs, prompt_only in jobs:
        texts, mass = steered_generate(model, tokenizer, [p for p in prompts for _ in range(s.n_steps)], vecs, layer,
                                 s.hook_site, prompt_only, s.max_new_tokens, s.temperature, s.batch_size, seed,
                                 add_special_tokens=s.template == "plain", watch_ids=watch)
        lengths, mass = vecs.norm(dim=1).tolist(), mass.tolist()
        runs[name] = [(q, k + 1, lengths[i * s.n_steps + k], label(texts[i * s.n_steps + k], concept["keywords"],
                                                                    s.authors_escapes), texts[i * s.n_steps + k],
                           mass[i * s.n_steps + k])
                      for i, q in enumerate(test) for k in range(s.n_steps)]
    return {"mu_norm": mu_norm, "cos": dict(zip(test, geo["cos"].tolist())),
            "sin": dict(zip(test, geo["sin"].tolist())), "sim": dict(zip(test, sims.mean(dim=1).tolist())),
            "runs": runs}


def summarise_concept(result: dict, s: Settings) -> dict:
    """Steerability of every run, the excluded questions of the correlation run, per-question steerability
    (Implication 3) and label fractions per step (``frac[name][label] = [n_steps]``)."""
    out = {"steerability": {}, "soft_steerability": {}, "frac": {}}
    for name, rows in result["runs"].items():
        trip = [(q, k, lab) for q, k, _, lab, _, _ in rows]
        out["steerability"][name] = steerability(trip)
        out["soft_steerability"][name] = soft_steerability([(q, k, m) for q, k, _, _, _, m in rows],
                                                           excluded_questions(trip))
        labs = np.array([[lab for q2, k, lab in trip if k == step] for step in range(1, s.n_steps + 1)])
        out["frac"][name] = {str(v): (labs == v).mean(axis=1).tolist() for v in (1, CONCEPT, GIBBERISH)}
    rows = result["runs"].get(s.steer_run, [])
    trip = [(q, k, lab) for q, k, _, lab, _, _ in rows]
    out["excluded"] = sorted(excluded_questions(trip))
    out["question_steerability"] = {q: steerability([t for t in trip if t[0] == q]) for q in result["cos"]}
    out["question_soft_steerability"] = {q: soft_steerability([(q2, k, m) for q2, k, _, _, _, m in rows if q2 == q])
                                         for q in result["cos"]}
    return out


def run_all(model, tokenizer, batch: dict, s: Settings, reply_cache: str | None = None, reply_tokens: int = 64,
            lm_key: str = "", log=None) -> dict:
    """The whole protocol on the datamodule's batch (``questions``, ``concepts``, ``pairs`` or ``None``, ``insert``).

    Returns:
        ``{"concepts": [cid], "directions": [C, 4, n_layers, D], "results": {(cid, layer): steer_concept(...)},
        "summaries": {(cid, layer): summarise_concept(...)}, "points": [per (cid, layer, test qid) dict],
        "acts": difference_vectors(...)}``.
    """
    from zoo.methods.crh.pairs import cached_replies

    say = log or (lambda msg: None)
    concepts = batch["concepts"]
    pairs = batch["pairs"]
    if pairs is None:
        say(f"replies: {len(batch['questions'])} questions")
        replies = cached_replies(model, tokenizer, batch["questions"], lm_key, reply_cache, s.template, reply_tokens)
        pairs = make_pairs(batch["questions"], replies, concepts, batch["insert"])
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
                res = steer_concept(model, tokenizer, concept, questions, acts[c]["test"], acts[c][layer],
                                    dirs[i, :, j], layer, s, seed=s.split_seed)
                summ = summarise_concept(res, s)
                results[(c, layer)], summaries[(c, layer)] = res, summ
                for q in acts[c]["test"]:
                    points.append({"cid": c, "layer": layer, "seed": s.split_seed, "qid": q,
                                   "steerability": summ["steerability"].get(s.steer_run),
                                   "soft_steerability": summ["soft_steerability"].get(s.steer_run),
                                   "question_soft_steerability": summ["question_soft_steerability"][q],
                                   "mu_norm": res["mu_norm"],
                                   "sin": res["sin"][q], "cos": res["cos"][q], "sim": res["sim"][q],
                                   "question_steerability": summ["question_steerability"][q],
                                   "excluded": q in summ["excluded"]})
    return {"concepts": cids, "directions": dirs, "results": results, "summaries": summaries, "points": points,
            "acts": acts}
