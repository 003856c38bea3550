"""SemBind's forgery table: ``python -m zoo.methods.sembind.experiments [--masker sembind.cifar] [--seeds 0 1 2]``.

Loads the released masker package (its generator, proxy and encoder ids come with it), runs
:func:`evaluate.evaluate_seed` for each seed on the experiment grid (:data:`GRID`; the seed draws the test captions,
forging captions, initial noise and watermark randomness; the masker is the released one), keeps each finished
seed in ``runs/sembind-forgery.partial.json`` (a rerun resumes from it) and writes
``results/sembind/forgery.json`` through the shared writer, with rows ``scheme, defense, r, attack, attacker,
tpr, far, auc, tpr_<distortion>`` per seed and a summary over seeds, and the r curves (mean over seeds) to
``results/sembind/figures/r_curve_<attacker>.png``.
"""

from __future__ import annotations

import argparse
import json

import torch

from zoo.core.data import repo_root
from zoo.core.results import summarise, write_result

GRID = {
    "schemes": ["tree-ring", "gaussian-shading", "ringid", "wind"],
    "ratios": [0.25, 0.5, 1.0],
    "attacks": ["reprompt", "imprint"],
    "attackers": ["proxy", "provider"],
    "distortions": ["jpeg"],
    "n_images": 16,
    "n_calibration": 1000,
    "n_null": 1000,
    "steps": 10,
    "guidance": 2.0,
    "fpr": 0.01,
    "imprint": {"eps": 8 / 255, "iters": 3, "inversion_steps": 5},
}
"""The reduced grid run here (see the card for the full grid's cost)."""
PAPER = {
    "claim": "forgeries rejected over four latent watermarks with quality kept; r trades robustness for "
    "security (abstract)",
    "imprint detection on COCO (SemBind)": "0.00 (aggregator listing; no table readable)",
}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--masker", default="sembind.cifar", help="masker package (zoo id or folder)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    import zoo
    from zoo.core.hub import load_package
    from zoo.methods.sembind.datamodule import CaptionDataModule
    from zoo.methods.sembind.evaluation import evaluate_seed
    from zoo.methods.sembind.pipeline import load_keys

    module = zoo.load(args.masker).eval()
    hp = module.hparams
    nets = module.networks()
    dm = CaptionDataModule(**load_package(args.masker)[0]["data"])
    partial = repo_root() / "runs" / "sembind-forgery.partial.json"  # resume state (not a result)
    done = json.loads(partial.read_text()) if partial.is_file() else {"grid": GRID, "rows": []}
    if done.get("grid") != json.loads(json.dumps(GRID)):
        done = {"grid": GRID, "rows": []}
    keys = load_keys(hp.key_file)
    for seed in args.seeds:
        if any(r["seed"] == seed for r in done["rows"]):
            print(f"seed {seed}: resumed from {partial.name}")
        else:
            res = evaluate_seed(module.masker, nets, dm, keys, GRID, seed)
            done["rows"] += res["rows"]
            partial.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(json.dumps(done))
            print(f"seed {seed}: {len(res['rows'])} rows", flush=True)
        _write([r for r in done["rows"] if r["seed"] in args.seeds], args.masker)  # after every seed


def _write(rows: list[dict], masker: str) -> None:
    metrics = ["tpr", "fpr", "far", "far_similar", "far_dissimilar", "auc", "tpr_jpeg", "pilot_final_hamming"]
    summary = summarise(rows, metrics, by=["scheme", "defense", "r", "attack", "attacker"])
    seeds = sorted({r["seed"] for r in rows})
    write_result(
        "sembind",
        "forgery",
        rows,
        summary=summary,
        paper=PAPER,
        notes=_notes(rows, seeds),
        extra={"seeds": seeds, "grid": GRID, "masker": masker},
    )
    from zoo.methods.sembind.plots import r_curve

    figures = repo_root() / "results" / "sembind" / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    for who in GRID["attackers"]:
        r_curve(figures / f"r_curve_{who}.png", rows, GRID["schemes"], GRID["ratios"], who)


def _mean(rows: list[dict], key: str, **match) -> float | None:
    sel = [r[key] for r in rows if all(r[k] == v for k, v in match.items())]
    return sum(sel) / len(sel) if sel else None


def _notes(rows: list[dict], seeds: list[int]) -> str:
    """The verdict first, then the protocol; every number is computed from ``rows``."""

    def m(key: str, **match) -> float:
        v = _mean(rows, key, **match)
        return float("nan") if v is None else v

    far_plain = {w: m("far", defense="plain", attack="reprompt", attacker=w) for w in ("proxy", "provider")}
    far_imprint = {w: m("far", defense="plain", attack="imprint", attacker=w) for w in ("proxy", "provider")}
    far_sb = m("far", defense="sembind", r=1.0, attack="reprompt", attacker="provider")
    tpr_plain, tpr_sb = m("tpr", defense="plain", attack="none"), m("tpr", defense="sembind", r=1.0, attack="none")
    fpr_plain, fpr_sb = m("fpr", defense="plain", attack="none"), m("fpr", defense="sembind", attack="none")
    hamming = m("pilot_final_hamming", defense="sembind", attack="none")
    forgery_works = far_plain["provider"] >= 0.5
    defended = forgery_works and far_sb <= 0.1 and tpr_sb >= 0.8 * tpr_plain
    good_r = [
        r
        for r in GRID["ratios"]
        if m("tpr", defense="sembind", r=r, attack="none") >= 0.8 * tpr_plain
        and m("far", defense="sembind", r=r, attack="reprompt", attacker="provider") <= 0.1
    ]
    verdict = "Verdict: partly." if defended else "Verdict: not at this scale."
    if defended:
        reason = "forgery succeeds against plain watermarks and SemBind r=1 rejects it while keeping TPR"
    elif forgery_works:
        reason = (
            f"forgery succeeds against plain watermarks and SemBind r=1 rejects it, but it rejects the genuine "
            f"images too: on held-out captions the masker's codes of the pilot and the final image differ in "
            f"{hamming:.2f} of bits (0.5 = unrelated); r with TPR >= 0.8 x plain and FAR <= 0.1: "
            f"{good_r or 'none'}"
        )
    else:
        reason = "the attacks themselves mostly fail on this 8x8 generator, so there is little forgery to defend"
    return (
        f"{verdict} {reason}. Means over schemes and seeds: clean TPR at 1% FPR plain {tpr_plain:.2f}, SemBind "
        f"r=1 {tpr_sb:.2f}; measured FPR on held-out unmarked images plain {fpr_plain:.3f}, SemBind (all r) "
        f"{fpr_sb:.3f}; FAR of reprompt forgery on plain watermarks by the proxy {far_plain['proxy']:.2f}, by "
        f"the provider's own model {far_plain['provider']:.2f}; imprint {far_imprint['proxy']:.2f} / "
        f"{far_imprint['provider']:.2f}; SemBind r=1 reprompt by the provider {far_sb:.2f}. Seeds {seeds} (test "
        f"captions, forging captions, noise; one released masker); {GRID['n_images']} images per seed; 8x8 pixel "
        f"diffusion trained here for 1,500 steps (not SD 2.1); thresholds at 1% FPR calibrated per seed, scheme and "
        f"defense on {GRID['n_calibration']} unmarked generations that are never scored; fpr (and far for attack "
        f"none) measured on {GRID['n_images']} + {GRID['n_null']} other unmarked generations (captions of the "
        f"evaluation half other than the scored ones, noise of their own seed stream)."
    )


if __name__ == "__main__":
    main()
