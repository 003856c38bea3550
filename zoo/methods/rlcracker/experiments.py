"""RLCracker's tables and pictures (results/rlcracker/*.json, docs/rlcracker/*.png).

    python -m zoo.methods.rlcracker.experiments removal --unigram RUN_OR_ID [...] --kgw RUN_OR_ID [...] \
        [--unigram-no-token RUN_OR_ID] [--copier rlcracker.copy] [--n-short 40 --n-long 20] [--seeds 0 1 2]
    python -m zoo.methods.rlcracker.experiments radius --run RUN_DIR --watermark unigram [--copier rlcracker.copy]
    python -m zoo.methods.rlcracker.experiments calibration
    ... --data data/rlcracker-smollm2 --suffix=-smollm2 --copier smollm2-135m-instruct   (on a pretrained base)

``removal``: {KGW, Unigram} × {short, long} × attacks × seeds on the first n test texts of data/rlcracker
(rows ``seed, watermark, length, attack, removal, success, sim``), the substitution sweep (z vs similarity) and z
histograms before/after. An attack takes one run (every seed samples from it) or one run per seed (the row's seed
is then the attacker's training seed too). ``radius``: every checkpoint of a stage-1 run on the val texts: per-token
KL(π_θ‖π_0) against success and z; r̂ = the KL where success first reaches 50% (ours, notes §3.1).
``calibration``: MiniLM similarity of same-question and unrelated answer pairs (to judge the 0.7 cut) and the
detectors' AUC on marked vs unmarked answers.

``--data`` names the texts (made by ``watermarked_answers``), ``--suffix`` the results and PNG files
(``removal-smollm2.json``), ``--copier`` the plain paraphraser: a zoo id or run (``rlcracker.copy``, the stage-0
copier) or a base id, whose plain paraphrase is the base itself asked with the rewrite prompt, no RL
(:func:`plain_paraphraser`); its tokenizer is the one the detector re-tokenises with.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

from zoo.core.data import read_jsonl
from zoo.core.results import summarise, write_result
from zoo.methods.rlcracker.baselines import minilm_swap, random_substitution
from zoo.methods.rlcracker.evaluation import score
from zoo.methods.rlcracker.metrics import detector_auc
from zoo.methods.rlcracker.prompts import encode_plain
from zoo.methods.rlcracker.rewards import similarity
from zoo.methods.rlcracker.rewrite import rewrite_with_kl
from zoo.methods.rlcracker.watermark import build_watermark

DATA, PNG = Path("data/rlcracker"), Path("docs/rlcracker")
PAPER = {"success": "98.5% (3B attacker, Unigram, 1,500-token texts); GPT-4o paraphrase 6.75%"}
MAX_NEW = {"short": 96, "long": 224}


def plain_paraphraser(base: str):
    """An ``RLCrackerModule`` over the pretrained ``base`` with fresh adapters (``B = 0``: it computes exactly the
    base) and the recipe's sampling settings: the plain-paraphrase baseline, the base asked to rewrite with the
    attacker's prompt and no RL; also π_0 of a run over that base."""
    from zoo.methods.rlcracker.module import RLCrackerModule

    return RLCrackerModule(arch=base, reference="base").eval()


def _load(ref: str):
    if ref in _bases():
        return plain_paraphraser(ref)
    from zoo.core.loading import load_module

    module, _ = load_module(ref)
    module.eval()
    return module


def _rewrite(module, texts, length, reference):
    module.hparams.max_new_tokens = MAX_NEW[length]
    return rewrite_with_kl(module, texts, 1, reference=reference)[0]


def reusable_rows(path: Path) -> tuple[list[dict], dict]:
    """The rows of an earlier results file that ``removal --reuse`` keeps, and where they came from.

    The rewritten file records the SHA of the process that writes it, so rows carried over from a dirty tree would
    be laundered into a table that looks clean: those are refused (rerun without ``--reuse``). The origin's
    ``git_sha`` and date are recorded in the new file (``reused_rows_from``).

    Raises:
        SystemExit: ``path`` was written from a dirty tree or records no commit.
    """
    import json

    doc = json.loads(path.read_text())
    prov = doc.get("provenance") or {}
    if prov.get("dirty") is not False or not prov.get("git_sha"):
        raise SystemExit(
            f"{path}: written from a dirty tree (or no commit recorded); its rows cannot be reused in a clean table: "
            "rerun without --reuse"
        )
    return list(doc["rows"]), {"file": str(path), "git_sha": prov["git_sha"], "date": prov.get("date")}


def attacker_per_seed(runs: list[str], seeds: list[int]) -> dict[int, str]:
    """Which attacker run rewrites the texts of each evaluation seed.

    No run: no attacker. One run serves every seed (the seeds then vary only the sampling); ``k`` runs, one per training seed, pair up
    with the ``k`` evaluation seeds in order, so a table row's seed is the attacker's training seed as well.

    Raises:
        SystemExit: more than one run, but not one per seed.
    """
    if not runs:
        return {}
    if len(runs) == 1:
        return dict.fromkeys(seeds, runs[0])
    if len(runs) != len(seeds):
        raise SystemExit(f"{len(runs)} attacker runs for {len(seeds)} seeds {seeds}: give one run, or one per seed")
    return dict(zip(seeds, runs))


HISTOGRAM = ("none", "plain-paraphrase", "rlcracker")
"""The attacks whose z's on the first seed's short texts the histogram PNG shows (rerun under ``--reuse``)."""


def removal(args) -> None:
    torch.set_num_threads(1)
    copier = _load(args.copier)
    given = {
        ("unigram", "rlcracker"): args.unigram,
        ("kgw", "rlcracker"): args.kgw,
        ("unigram", "rlcracker-no-token-reward"): args.unigram_no_token,
        ("kgw", "rlcracker-no-token-reward"): args.kgw_no_token,
    }
    loaded: dict[str, object] = {}  # one module per distinct run, however many (watermark, seed) cells use it
    attackers = {}
    for (w, a), refs in given.items():
        for seed, ref in attacker_per_seed(refs or [], args.seeds).items():
            if ref not in loaded:
                loaded[ref] = _load(ref)
            attackers[(w, a, seed)] = loaded[ref]
    tok = copier.tokenizer
    rows, sweep, hist = [], [], {}
    old, reused = Path(f"results/rlcracker/removal{args.suffix}.json"), None
    if args.reuse and old.is_file():  # keep finished (watermark, length, seed, attack) rows; run only the rest
        rows, reused = reusable_rows(old)
        sweep, _ = reusable_rows(Path(f"results/rlcracker/substitution-sweep{args.suffix}.json"))
    done = {(r["watermark"], r["length"], r["seed"], r["attack"]) for r in rows}
    for wname in ("unigram", "kgw"):
        wm = build_watermark(wname, len(tok))
        for length, n in (("short", args.n_short), ("long", args.n_long)):
            data = read_jsonl(Path(args.data) / f"{wname}_test_{length}.jsonl")[:n]
            marked = [r["watermarked"] for r in data]
            for seed in args.seeds:
                g = torch.Generator().manual_seed(seed)
                torch.manual_seed(seed)
                models = {
                    "plain-paraphrase": copier,
                    **{a: m for (w, a, s), m in attackers.items() if w == wname and s == seed},
                }
                for name in ("none", "regenerate", "random-substitution", "minilm-swap", *models):
                    plotted = seed == args.seeds[0] and length == "short" and name in HISTOGRAM
                    if (wname, length, seed, name) in done and not plotted:  # a reused row; its z's not needed
                        continue
                    torch.manual_seed(seed)
                    texts = _attack(name, data, length, tok, g, models)
                    s = score(texts, marked, wm, tok)
                    if plotted:
                        hist[(wname, name)] = s["z"].tolist()
                    if (wname, length, seed, name) in done:
                        continue
                    rows.append(
                        {
                            "seed": seed,
                            "watermark": wname,
                            "length": length,
                            "attack": name,
                            "removal": float(s["removed"].float().mean()),
                            "success": float(s["success"].float().mean()),
                            "sim": float(s["sim"].mean()),
                            "z": float(s["z"].nanmean()),
                        }
                    )
                    print(rows[-1], flush=True)
                if seed == args.seeds[0] and length == "short" and not any(r["watermark"] == wname for r in sweep):
                    for rate in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7):
                        s = score(random_substitution(marked, tok, rate, g), marked, wm, tok)
                        sweep.append(
                            {
                                "seed": seed,
                                "watermark": wname,
                                "rate": rate,
                                "z": float(s["z"].nanmean()),
                                "sim": float(s["sim"].mean()),
                                "removal": float(s["removed"].float().mean()),
                            }
                        )
    keys = ["removal", "success", "sim", "z"]
    summary = summarise(rows, keys, by=["watermark", "length", "attack"])
    extra = {"reused_rows_from": reused} if reused else None
    notes = f"{args.notes} (texts: {args.data}; plain paraphrase: {args.copier})".strip()
    write_result("rlcracker", f"removal{args.suffix}", rows, summary=summary, paper=PAPER, notes=notes, extra=extra)
    write_result(
        "rlcracker",
        f"substitution-sweep{args.suffix}",
        sweep,
        summary=summarise(sweep, ["z", "sim", "removal"], by=["watermark", "rate"]),
        notes=f"random token substitution at rates 0.1-0.7 on the short test texts of {args.data} (seed 0)",
        extra=extra,
    )
    _plots(hist, sweep, args.suffix)


def _attack(name: str, data: list[dict], length: str, tok, g: torch.Generator, models: dict) -> list[str]:
    """The texts one attack makes of ``data``'s marked answers (``models``: the LM attackers by name)."""
    marked = [r["watermarked"] for r in data]
    if name == "none":
        return marked
    if name == "regenerate":
        return [r["unmarked"] for r in data]
    if name == "random-substitution":
        return random_substitution(marked, tok, 0.3, g)
    if name == "minilm-swap":
        return minilm_swap(marked, 0.5, g)
    return _rewrite(models[name], marked, length, models[name].lm)


def _plots(hist: dict, sweep: list[dict], suffix: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    PNG.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax, w in zip(axes, ("unigram", "kgw")):
        for name in HISTOGRAM:
            if (w, name) in hist:
                ax.hist([z for z in hist[(w, name)] if not math.isnan(z)], bins=20, alpha=0.5, label=name)
        ax.axvline(4.0, color="k", ls="--", lw=1)
        ax.set(title=f"{w}: z before / after (short texts)", xlabel="z", ylabel="texts")
        ax.legend()
    fig.tight_layout()
    fig.savefig(PNG / f"z_histograms{suffix}.png", dpi=100)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for w in ("unigram", "kgw"):
        pts = [r for r in sweep if r["watermark"] == w]
        ax.plot([r["sim"] for r in pts], [r["z"] for r in pts], "o-", label=w)
    ax.axhline(4.0, color="k", ls="--", lw=1)
    ax.set(xlabel="MiniLM similarity to the marked text", ylabel="mean z", title="random substitution 0.1-0.7")
    ax.legend()
    fig.tight_layout()
    fig.savefig(PNG / f"z_vs_similarity{suffix}.png", dpi=100)


def radius(args) -> None:
    torch.set_num_threads(1)
    copier = _load(args.copier)
    reference = copier.lm
    wm = build_watermark(args.watermark, len(copier.tokenizer))
    val = read_jsonl(Path(args.data) / f"{args.watermark}_val.jsonl")
    marked = [r["watermarked"] for r in val]
    ckpts = sorted(Path(args.run, "checkpoints").glob("best-*.ckpt"), key=lambda p: int(p.stem.split("-")[-1]))
    rows = []
    for ck in [None, *ckpts]:
        module = copier if ck is None else _load_ckpt(args.run, ck)
        step = 0 if ck is None else int(ck.stem.split("-")[-1])
        for seed in args.seeds:
            torch.manual_seed(seed)
            texts, kl = rewrite_with_kl(module, marked, 1, reference=reference)
            s = score(texts, marked, wm, module.tokenizer)
            rows.append(
                {
                    "seed": seed,
                    "watermark": args.watermark,
                    "step": step,
                    "kl": kl,
                    "success": float(s["success"].float().mean()),
                    "z": float(s["z"].nanmean()),
                    "sim": float(s["sim"].mean()),
                }
            )
            print(rows[-1], flush=True)
    summary = summarise(rows, ["kl", "success", "z", "sim"], by=["watermark", "step"])
    crossed = [r for r in sorted(summary, key=lambda r: r["kl"]["mean"]) if r["success"]["mean"] >= 0.5]
    r_hat = crossed[0]["kl"]["mean"] if crossed else None
    write_result(
        "rlcracker",
        f"radius-{args.watermark}{args.suffix}",
        rows,
        summary=summary,
        notes=f"r_hat (KL where success first reaches 50%): {r_hat if r_hat is not None else 'not reached'}; "
        f"checkpoints of {args.run} on the {len(marked)} val texts; KL per token to {args.copier}",
    )
    _radius_plot(summary, args.watermark, args.suffix)


def _load_ckpt(run: str, ckpt: Path):
    from zoo.core.loading import load_module

    module, _ = load_module(run, which="last")
    state = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
    module.load_state_dict(state)
    return module.eval()


def _radius_plot(summary, w, suffix: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    PNG.mkdir(parents=True, exist_ok=True)
    kl = [r["kl"]["mean"] for r in summary]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(kl, [r["success"]["mean"] for r in summary], "o-", label="success")
    ax.axhline(0.5, color="k", ls=":", lw=1)
    ax2 = ax.twinx()
    ax2.plot(kl, [r["z"]["mean"] for r in summary], "s--", color="C1", label="z")
    ax.set(xlabel="per-token KL(π_θ ‖ π_0), nats", ylabel="success", title=f"{w}: success and z vs KL")
    ax2.set_ylabel("mean z")
    fig.tight_layout()
    fig.savefig(PNG / f"radius_{w}{suffix}.png", dpi=100)


def calibration(args) -> None:
    from zoo.models.causal_lm import load_tokenizer, tokenizer_for

    # the provider's tokenizer (a base id's own; the zoo-lm tokenizer for zoo-lm.chat's texts)
    tok = load_tokenizer(tokenizer_for(args.copier, None)) if args.copier in _bases() else load_tokenizer()
    rows = []
    for w in ("unigram", "kgw"):
        data = read_jsonl(Path(args.data) / f"{w}_test_short.jsonl") + read_jsonl(
            Path(args.data) / f"{w}_test_long.jsonl"
        )
        wm = build_watermark(w, len(tok))
        zm = torch.tensor([wm.z_score(encode_plain(tok, r["watermarked"])) for r in data])
        zu = torch.tensor([wm.z_score(encode_plain(tok, r["unmarked"])) for r in data])
        same = similarity([r["unmarked"] for r in data], [r["watermarked"] for r in data])
        for seed in args.seeds:
            perm = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed))
            other = similarity([data[int(i)]["unmarked"] for i in perm], [r["watermarked"] for r in data])
            rows.append(
                {
                    "seed": seed,
                    "watermark": w,
                    "auc": detector_auc(zm, zu),
                    "tpr_at_4": float((zm > 4).float().mean()),
                    "fpr_at_4": float((zu > 4).float().mean()),
                    "sim_same_question": float(same.mean()),
                    "sim_unrelated": float(other.mean()),
                    "same_above_0.7": float((same > 0.7).float().mean()),
                    "unrelated_above_0.7": float((other > 0.7).float().mean()),
                }
            )
    keys = [k for k in rows[0] if k not in ("seed", "watermark")]
    write_result(
        "rlcracker",
        f"calibration{args.suffix}",
        rows,
        summary=summarise(rows, keys, by=["watermark"]),
        notes=f"all test texts of {args.data}; unrelated = a seeded permutation of the unmarked answers",
    )


def _bases():
    from zoo.core.bases import BASES

    return BASES


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("removal")
    for k in ("unigram", "kgw", "unigram-no-token", "kgw-no-token"):
        r.add_argument(f"--{k}", nargs="+", help="an attacker run or id, or one per --seeds (its training seed)")
    r.add_argument("--copier", default="rlcracker.copy")
    r.add_argument("--n-short", type=int, default=200)
    r.add_argument("--n-long", type=int, default=100)
    r.add_argument("--notes", default="")
    r.add_argument(
        "--reuse",
        action="store_true",
        help="keep the rows of an earlier removal.json, add the missing (the histogram's attacks are rerun on the "
        "first seed's short texts, rows not added)",
    )
    q = sub.add_parser("radius")
    q.add_argument("--run", required=True)
    q.add_argument("--watermark", default="unigram")
    q.add_argument("--copier", default="rlcracker.copy")
    c = sub.add_parser("calibration")
    c.add_argument("--copier", default="rlcracker.copy", help="a base id: score with its tokenizer")
    for s in (r, q, c):
        s.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
        s.add_argument("--data", default=str(DATA), help="folder of <watermark>_{val,test_short,test_long}.jsonl")
        s.add_argument("--suffix", default="", help="appended to the results and PNG names (--suffix=-smollm2)")
    a = p.parse_args(argv)
    {"removal": removal, "radius": radius, "calibration": calibration}[a.cmd](a)


if __name__ == "__main__":
    main()
