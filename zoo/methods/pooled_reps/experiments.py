"""The tables: decoding seeds x {held-out Alpaca, HH-RLHF preference_eval, seen Alpaca, generated world}, per model.

    python -m zoo.methods.pooled_reps.experiments [--recipe pooled-reps.yaml] [--overlay ...] [--seeds 0 1 2]
        [--domains ...] [--max-items N] [--n-boot 200] [--seen-items 1000] [--world-items 300] [--world-steps 150]

The recipe names the model and its decoding: ``init_from`` (a zoo id) or else ``model.arch`` (a base id such as
``smollm2-135m-instruct``, a local directory), ``model.max_new_tokens``, ``temperature``, ``top_p``, ``readout_layer``,
``k``, ``spaces``, ``tfidf_dim`` and ``data.batch_size``; ``pooled-reps.yaml`` is zoo-lm.chat,
``pooled-reps-smollm2.yaml`` SmolLM2-135M-Instruct, ``pooled-reps-gemma3.yaml`` Gemma-3-270M (base: plain-text
prompts, :func:`zoo.methods.pooled_reps.pipeline.prompt_ids`).

Writes ``results/pooled-reps/alignment<-model><suffix>.json`` (rows: model, domain, space, readout, seed, cka, mknn,
cknna), ``delta...json`` (Δ = mean − max_t single token, with bootstrap CIs, true and shuffled pairing),
``relations...json`` (the paper's qualitative relations as signed gaps per seed), seed-0 PNGs under
``results/pooled-reps/figures/[<model><suffix>/]`` and ``scale.json``, the model-size table of every run that recorded its
model (:func:`write_scale`). ``<-model>`` is empty for zoo-lm.chat (its files keep their names). Generations are
cached under ``runs/pooled-reps-cache/`` per model, domain, item count, seed and ``T`` (a killed run resumes from
them; delete the folder to regenerate). The world LoRA is fitted once (seed 0) and shared by the decoding seeds.

Kept as one module: one command; its helpers (the generations, the generated-world task, the
scale table) serve only it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from zoo.core.data import repo_root, set_seed
from zoo.core.results import summarise, write_result
from zoo.methods.pooled_reps.datamodule import PromptReferenceDataModule
from zoo.methods.pooled_reps.measure import measure_domain
from zoo.methods.pooled_reps.pipeline import concat, generate_batch, reference_spaces
from zoo.methods.pooled_reps.plots import write_plots
from zoo.methods.pooled_reps.synthetic import answer_accuracy

DOMAINS = ("alpaca-heldout", "hh-eval", "alpaca-seen", "world")
KEY_READOUTS = (
    "last",
    "best_single",
    "mean",
    "prompt",
    "seg1",
    "seg2",
    "seg3",
    "mix_best",
    "layer_avg",
    "token_shuffle",
    "shuffled_pairing",
)
PAPER = {
    "mean vs every single token": "mean pool beats every h_t (Δ > 0), Fig. 2 (numbers only in figures)",
    "generated vs prompt pool": "generated-token pool > prompt-token pool",
    "shuffled pairing": "the averaging gain disappears",
    "segment mixtures": "an interior r_α beats every single segment, in all three domains",
    "layers": "averaging over layers only matches the best single layer",
}


def _world_model(model, tokenizer, cache: Path, steps: int, tag: str):
    """The LM + the world LoRA (r 16), merged; fitted once and cached as ``<tag>world-merged-<steps>``."""
    from safetensors.torch import load_file, save_file

    from zoo.methods.pooled_reps.synthetic import fit_lora, world_chats

    path = cache / f"{tag}world-merged-{steps}.safetensors"
    if path.is_file():
        model.load_state_dict(load_file(str(path)), strict=False)
        return model.eval()
    t0 = time.time()
    merged, adapter = fit_lora(
        model,
        tokenizer,
        world_chats(2000, seed=1000),
        r=16,
        alpha=32,
        steps=steps,
        batch_size=16,
        lr=2e-3,
        seed=0,
        log=lambda s, v: print(f"world LoRA {s}: {v:.3f}", flush=True),
    )
    print(f"world LoRA fitted in {time.time() - t0:.0f}s", flush=True)
    save_file({k: v.contiguous() for k, v in merged.state_dict().items() if k != "lm_head.weight"}, str(path))
    save_file({k: v.contiguous() for k, v in adapter.items()}, str(cache / f"{tag}world-lora-adapter.safetensors"))
    return merged


def generations(
    model,
    tokenizer,
    items,
    seed: int,
    cache: Path,
    tag: str,
    T: int = 64,
    layer: int = -1,
    temperature: float = 0.7,
    top_p: float = 0.95,
    batch_size: int = 64,
):
    """Pooled generations of ``items`` at decoding ``seed`` (cached as ``<tag>-n<items>-s<seed>-T<T>.pt``)."""
    path = cache / f"{tag}-n{len(items)}-s{seed}-T{T}.pt"
    if path.is_file():
        return torch.load(path, weights_only=False)
    set_seed(seed)
    layer = layer % model.config.num_hidden_layers
    parts, replies = [], []
    for i in range(0, len(items), batch_size):
        pg, rs = generate_batch(model, tokenizer, items[i : i + batch_size], T, temperature, top_p, layer)
        parts.append(pg)
        replies += rs
    out = (concat(parts), replies)
    torch.save(out, path)
    return out


def model_settings(recipe: str, overlays: list[str]) -> dict:
    """The model and decoding settings of a pooled-reps recipe: ``ref`` (``init_from`` or ``model.arch``), ``T``,
    ``temperature``, ``top_p``, ``readout_layer``, ``k``, ``spaces``, ``tfidf_dim``, ``batch_size``.

    Raises:
        ValueError: the recipe is not a pooled-reps recipe.
    """
    from zoo.core.recipe import load_recipe

    cfg = load_recipe(recipe, overlays=overlays)
    if cfg["method"] != "pooled-reps":
        raise ValueError(f"--recipe {recipe}: method is {cfg['method']!r}, not 'pooled-reps'")
    m = cfg["model"]
    return {
        "ref": cfg.get("init_from") or m["arch"],
        "T": m["max_new_tokens"],
        "temperature": m["temperature"],
        "top_p": m["top_p"],
        "readout_layer": m["readout_layer"],
        "k": m["k"],
        "spaces": m.get("spaces") or ["minilm", "tfidf"],
        "tfidf_dim": m["tfidf_dim"],
        "batch_size": cfg["data"]["batch_size"],
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="pooled-reps.yaml", help="the model and its decoding (module docstring)")
    p.add_argument("--overlay", nargs="*", default=[], help="recipe overlays (tiny/pooled-reps-smollm2.yaml)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--domains", nargs="+", default=list(DOMAINS), choices=DOMAINS)
    p.add_argument("--n-boot", type=int, default=200)
    p.add_argument("--world-steps", type=int, default=150)
    p.add_argument(
        "--max-items",
        type=int,
        default=None,
        help="first N items of each domain (held-out Alpaca in record order, HH in split order)",
    )
    p.add_argument("--seen-items", type=int, default=1000, help="first N of the 1,000 seen Alpaca records")
    p.add_argument("--world-items", type=int, default=300, help="measurement scenes of the world")
    p.add_argument("--suffix", default="", help="appended to the result names (a domain subset run apart)")
    p.add_argument("--results-dir", type=Path, default=None, help="default: the project's results/")
    p.add_argument("--cache", type=Path, default=None, help="default: runs/pooled-reps-cache/")
    args = p.parse_args(argv)
    from zoo.models.causal_lm import load_causal_lm

    torch.set_num_threads(1)
    cfg = model_settings(args.recipe, args.overlay)
    ref, T = cfg["ref"], cfg["T"]
    tag = "" if ref == DEFAULT_MODEL else model_tag(ref)
    name = (f"-{tag}" if tag else "") + args.suffix
    results_dir = args.results_dir or repo_root() / "results"
    cache = args.cache or repo_root() / "runs" / "pooled-reps-cache"
    cache.mkdir(parents=True, exist_ok=True)
    figures = results_dir / "pooled-reps" / "figures" / name.lstrip("-")  # zoo-lm.chat's full run: figures/
    t_start = time.time()
    rows, deltas, relations, sizes, answers = [], [], [], {}, []
    for domain in args.domains:
        model, tokenizer = load_causal_lm(ref)
        if domain == "world":
            model = _world_model(model.train(), tokenizer, cache, args.world_steps, f"{tag}-" if tag else "")
        max_items = args.seen_items if domain == "alpaca-seen" else args.max_items
        if domain == "alpaca-seen" and args.max_items:
            max_items = min(args.seen_items, args.max_items)
        dm = PromptReferenceDataModule(sources=[domain], world_items=args.world_items, max_items=max_items)
        dm.setup()
        spaces = reference_spaces(dm.items, cfg["spaces"], cfg["tfidf_dim"])
        layer = cfg["readout_layer"] % model.config.num_hidden_layers
        for seed in args.seeds:
            t0 = time.time()
            pg, replies = generations(
                model,
                tokenizer,
                dm.items,
                seed,
                cache,
                f"{tag}-{domain}" if tag else domain,
                T,
                layer,
                cfg["temperature"],
                cfg["top_p"],
                cfg["batch_size"],
            )
            if domain == "world":
                answers.append(
                    {"model": ref, "seed": seed, **answer_accuracy(replies, [it["latent"] for it in dm.items])}
                )
            res = measure_domain(pg, spaces, layer, cfg["k"], args.n_boot, seed=seed)
            sizes[domain] = res["n"]
            print(
                f"{ref} {domain} seed {seed}: n={res['n']} mean length {res['mean_length']:.1f} "
                f"({time.time() - t0:.0f}s)",
                flush=True,
            )
            if seed == args.seeds[0]:
                write_plots(res, figures, domain)
            for r in res["rows"]:
                rows.append(
                    {
                        "model": ref,
                        "domain": domain,
                        "space": r["space"],
                        "readout": r["readout"],
                        "seed": seed,
                        "cka": r["cka"],
                        "mknn": r["mknn"],
                        "cknna": r["cknna"],
                    }
                )
            for d in res["delta"]:
                deltas.append({"model": ref, "domain": domain, "seed": seed, **d})
            relations += [{"model": ref, **r} for r in _relations(domain, seed, res["rows"])]
    minutes = (time.time() - t_start) / 60
    n_params = sum(p.numel() for p in model.parameters())
    prompts = (
        "its own chat template"
        if getattr(tokenizer, "chat_template", None)
        else "a plain-text transcript 'User: ...\\n\\nAssistant:' (no chat template)"
    )
    notes = (
        f"{ref} ({n_params / 1e6:.1f}M parameters, frozen) replies, prompts through {prompts}: T = {T} tokens, "
        f"temperature {cfg['temperature']}, top-p {cfg['top_p']}, decoding seeds {args.seeds}; readouts at "
        f"hidden_states[{cfg['readout_layer']}] (after the final norm) unless @L; items per domain {sizes}"
        f"{f' (the first {args.max_items} of each)' if args.max_items else ''}; reference spaces: MiniLM "
        f"(all-MiniLM-L6-v2) and TF-IDF + TruncatedSVD({cfg['tfidf_dim']}) of the reference answer, one-hot "
        f"scene latent for the generated world (LoRA r 16, {args.world_steps} steps on 2,000 generated scenes, "
        f"merged). k = {cfg['k']}. Wall time {minutes:.0f} min on 2 shared CPU cores, one thread."
    )
    extra = {"model": ref, "parameters": n_params, "items": sizes}
    common = {"extra": extra, "results_dir": args.results_dir}
    write_result(
        "pooled-reps",
        "alignment" + name,
        rows,
        summary=summarise(
            [r for r in rows if r["readout"] in KEY_READOUTS],
            ["cka", "mknn", "cknna"],
            by=["model", "domain", "space", "readout"],
        ),
        paper=PAPER,
        notes=notes,
        **common,
    )
    write_result(
        "pooled-reps",
        "delta" + name,
        deltas,
        summary=summarise(
            deltas,
            ["delta_cka", "delta_cka_lo", "delta_cka_hi", "delta_mknn", "delta_mknn_lo", "delta_mknn_hi"],
            by=["model", "domain", "space", "pairing"],
        ),
        paper={
            "Δ (true pairing)": "> 0: the mean beats every single token",
            "Δ (shuffled pairing)": "≈ 0: the gain disappears",
        },
        notes=notes + f" Δ = align(mean pool) − max over t of align(h_t); 95% percentile bootstrap over "
        f"items ({args.n_boot} replicates; CKA replicates keep distinct items).",
        **common,
    )
    if answers:
        write_result(
            "pooled-reps",
            "world-answers" + (f"-{tag}" if tag else ""),
            answers,
            summary=summarise(answers, ["shape", "colour", "place", "size"], by=["model"]),
            paper="not in the paper: our check that the world LoRA learned the task (chance 0.25 for "
            "shape, colour, place; 0.5 for size)",
            notes=notes + " Share of world replies naming each attribute's true value.",
            **common,
        )
    write_result(
        "pooled-reps",
        "relations" + name,
        relations,
        summary=summarise(
            relations,
            [
                "mean_minus_prompt",
                "mean_minus_last",
                "mix_minus_best_segment",
                "mix_interior",
                "layer_avg_minus_best_layer",
                "mean_minus_token_shuffle",
            ],
            by=["model", "domain", "space"],
        ),
        paper=PAPER,
        notes=notes + " Gaps are unbiased-CKA differences; mix_interior = 1 when the best r_α "
        "on the 0.1 grid has all three weights > 0.",
        **common,
    )
    write_scale(results_dir)


DEFAULT_MODEL = "zoo-lm.chat"
"""The model of ``pooled-reps.yaml``; its result files carry no model in their names."""

SCALE_READOUTS = ("last", "best_single", "mean", "prompt", "token_shuffle", "shuffled_pairing")


def model_tag(ref: str) -> str:
    """A file-name-safe tag of a model reference (a base id stays as it is; a path keeps its last part)."""
    return "".join(c if c.isalnum() or c in ".-" else "-" for c in Path(ref.rstrip("/")).name)


def write_scale(results_dir: Path) -> Path | None:
    """``results/pooled-reps/scale.json``: the model-size table of every text-domain run whose files record their
    model (``extra.model``; the files before the model axis do not), one row per model x domain, unbiased CKA against
    MiniLM (else the run's first reference space): the readouts (mean ± sd over seeds), Δ with its seed-mean 95% CI
    and the prompt − mean gap. ``None`` when no run recorded its model."""
    folder = results_dir / "pooled-reps"
    out, sources = [], []
    for f in sorted(folder.glob("alignment*.json")):
        doc = json.loads(f.read_text())
        delta_file = folder / f.name.replace("alignment", "delta", 1)
        if "model" not in doc or not delta_file.is_file():
            continue
        deltas = json.loads(delta_file.read_text())["summary"]
        space = "minilm" if any(r["space"] == "minilm" for r in doc["summary"]) else doc["summary"][0]["space"]
        by = {(r["domain"], r["readout"]): r for r in doc["summary"] if r["space"] == space}
        for domain in dict.fromkeys(d for d, _ in by):
            if domain == "world":
                continue
            row = {
                "model": doc["model"],
                "parameters (M)": round(doc["parameters"] / 1e6, 1),
                "items": doc["items"][domain],
                "domain": domain,
                "space": space,
            }
            row |= {readout: by[(domain, readout)]["cka"] for readout in SCALE_READOUTS}
            d = next(r for r in deltas if r["domain"] == domain and r["space"] == space and r["pairing"] == "true")
            row |= {
                "delta_cka": d["delta_cka"]["mean"],
                "delta_lo": d["delta_cka_lo"]["mean"],
                "delta_hi": d["delta_cka_hi"]["mean"],
                "prompt_minus_mean": by[(domain, "prompt")]["cka"]["mean"] - by[(domain, "mean")]["cka"]["mean"],
            }
            out.append(row)
        sources.append(str(f.relative_to(results_dir.parent)))
    if not out:
        return None
    out.sort(key=lambda r: (r["domain"], r["parameters (M)"], r["items"]))
    return write_result(
        "pooled-reps",
        "scale",
        out,
        results_dir=results_dir,
        paper="main model Qwen3-14B (thinking): the mean pool beats every single token (Δ > 0) "
        "and generated pools beat prompt pools (numbers only in figures); that the gain grows "
        "with model size is issue 44's expectation, not a number of the paper",
        notes="Model-size axis, unbiased CKA against MiniLM of the reference answer (mean ± sd over "
        "decoding seeds; Δ = CKA(mean pool) − max_t CKA(h_t) with the seed means of its 95% "
        f"bootstrap bounds), read from {', '.join(sources)}.",
    )


def _relations(domain: str, seed: int, rows: list[dict]) -> list[dict]:
    out = []
    for space in dict.fromkeys(r["space"] for r in rows):
        by = {r["readout"]: r for r in rows if r["space"] == space}
        best_layer = max(v["cka"] for k, v in by.items() if k.startswith("mean@L"))
        out.append(
            {
                "domain": domain,
                "space": space,
                "seed": seed,
                "mean_minus_prompt": by["mean"]["cka"] - by["prompt"]["cka"],
                "mean_minus_last": by["mean"]["cka"] - by["last"]["cka"],
                "mix_minus_best_segment": by["mix_best"]["cka"] - max(by[s]["cka"] for s in ("seg1", "seg2", "seg3")),
                "mix_interior": float(by["mix_best"]["interior"]),
                "layer_avg_minus_best_layer": by["layer_avg"]["cka"] - best_layer,
                "mean_minus_token_shuffle": by["mean"]["cka"] - by["token_shuffle"]["cka"],
            }
        )
    return out


if __name__ == "__main__":
    main()
