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
an interrupted run resumes. The tables are :mod:`zoo.methods.crh.pretrained_tables`'s, the hand-label sample and
agreement :mod:`zoo.methods.crh.hand_labels`'.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import time
from pathlib import Path

import torch

from zoo.core.results import write_result
from zoo.methods.crh.datamodule import CRHPairsDataModule
from zoo.methods.crh.hand_labels import agreement_rows, pick_for_labelling
from zoo.methods.crh.pipeline import Settings, build_pairs, difference_vectors, directions, pair_states, steer_concept
from zoo.methods.crh.pretrained_tables import tabulate


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
    tabulate(cfg, base, batch, pairs, lines, geometry, timing, args.seeds, args.n_perm, args.results_dir)


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


def _lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "lines.jsonl").read_text().splitlines()]


def sample(args) -> None:
    """Write ``--n`` steered outputs of the run for hand labelling to ``--labels``
    (:func:`zoo.methods.crh.hand_labels.pick_for_labelling`)."""
    cfg, _ = recipe_settings(args.recipe, args.overlay)
    dm = CRHPairsDataModule(**_data_args(cfg))
    dm.setup()
    concepts = {c["cid"]: c for c in dm.batch["concepts"]}
    picked = pick_for_labelling(_lines(Path(args.out or f"runs/{cfg['name']}")), concepts, args.n, args.seed)
    Path(args.labels).write_text(json.dumps(picked, indent=1) + "\n")
    print(f"{len(picked['items'])} outputs -> {args.labels} ({json.dumps(picked['strata'])})")


def agreement(args) -> None:
    """The judges against the hand labels in ``--labels`` (:func:`zoo.methods.crh.hand_labels.agreement_rows`),
    through the results writer."""
    data = json.loads(Path(args.labels).read_text())
    items = [i for i in data["items"] if i["hand"] is not None]
    cfg, _ = recipe_settings(args.recipe, args.overlay)
    rows = agreement_rows(items)
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
