"""WatchLog's detection tables (all protocol ours): WatchLog, its ablations and the baselines trained and scored on the
same windows, each also scored on the test windows where the labelling rule is wrong.

* ``detection``: the recording split of the shipped data (seed 0, windows de-duplicated across splits).
* ``loto``: leave-one-technique-out: every recording of one ATT&CK technique (sub-techniques pooled) is the test set,
  the rest is split train / val; WatchLog, bag-of-events and the rule on each fold.

The event labels are *defined* by PowerShell process trees (data/mordor-sysmon/SOURCE.md), so the rule "a window
whose acting image is powershell.exe is malicious" is nearly the answer; the ``rule wrong`` columns score every row
only on the windows where that rule errs (malicious windows without powershell.exe, benign ones with it). The rule
itself is 0 there by construction.
"""

from __future__ import annotations

import json
import time

import torch

from zoo.core.data import set_seed
from zoo.core.provenance import git_at_start
from zoo.core.results import summarise
from zoo.methods.watchlog.baselines import BagOfEvents, label_heuristic_scores
from zoo.methods.watchlog.datamodule import WatchLogDataModule, WindowDataset
from zoo.methods.watchlog.metrics import best_f1_threshold, classification_metrics
from zoo.methods.watchlog.module import WatchLogModule
from zoo.methods.watchlog.protocol import TOKEN_LEN, WINDOW, out_dir, slug, write

SETTINGS: dict[str, dict] = {
    "watchlog": {"encoder": {"kind": "video", "adapter": "pixel"}},
    "baseline: token transformer": {"encoder": {"kind": "tokens", "token_len": TOKEN_LEN}},
    "ablation: no adapter": {"encoder": {"kind": "video", "adapter": "none"}},
    "ablation: pooled adapter": {"encoder": {"kind": "video", "adapter": "pooled"}},
    "ablation: 8 of 16 frames": {"encoder": {"kind": "video", "adapter": "pixel"}, "frame_stride": 2},
    "watchlog, one token per key slot (patch 8x32)": {
        "encoder": {"kind": "video", "adapter": "pixel", "patch": [8, 32]}
    },
}
BAG = "baseline: bag-of-events (logistic regression)"
RULE = "reference: label heuristic (actor is powershell.exe)"
METRICS = [
    "accuracy",
    "precision",
    "recall",
    "f1",
    "accuracy (rule wrong)",
    "recall (rule wrong)",
    "specificity (rule wrong)",
    "val_f1",
    "train_s",
]


def labels_of(ds: WindowDataset) -> torch.Tensor:
    """``(n,)`` window labels of ``ds``."""
    return torch.tensor([w.label for w in ds.windows])


def rule_wrong_metrics(prob: torch.Tensor, label: torch.Tensor, rule: torch.Tensor, threshold: float) -> dict:
    """Scores on the windows where the labelling rule errs (``rule != label``), at ``threshold``.

    Args:
        prob: ``(n,)`` scores; label: ``(n,)`` 0/1; rule: ``(n,)`` the rule's 0/1 calls.
    Returns:
        ``{"windows (rule wrong)", "accuracy (rule wrong)", "recall (rule wrong)" (malicious windows without
        powershell.exe that are flagged), "specificity (rule wrong)" (benign windows with powershell.exe that are
        not flagged)}``; a ratio with an empty denominator is None.
    """
    wrong = rule.long() != label.long()
    pred, lab = (prob[wrong] >= threshold).long(), label[wrong].long()

    def ratio(a, b):
        return float(a) / int(b) if int(b) else None

    return {
        "windows (rule wrong)": int(wrong.sum()),
        "accuracy (rule wrong)": ratio((pred == lab).sum(), len(lab)),
        "recall (rule wrong)": ratio(((pred == 1) & (lab == 1)).sum(), (lab == 1).sum()),
        "specificity (rule wrong)": ratio(((pred == 0) & (lab == 0)).sum(), (lab == 0).sum()),
    }


def rule_calls(ds: WindowDataset) -> torch.Tensor:
    """``(n,)`` the labelling rule's 0/1 call per window (:func:`baselines.label_heuristic_scores`)."""
    return torch.tensor(label_heuristic_scores(ds))


@torch.no_grad()
def evaluate(
    model: WatchLogModule, ds, batch_size: int = 64, calibrate: bool = False
) -> tuple[dict, float, torch.Tensor]:
    """Window metrics on ``ds`` at ``model.threshold``, inference windows per second (batched, no explanation) and
    the ``(n,)`` probabilities. With ``calibrate`` the threshold is first set to the F1-maximising probability on
    ``ds`` (use on validation only)."""
    from torch.utils.data import DataLoader

    model.eval()
    probs, seconds = [], 0.0
    for batch in DataLoader(ds, batch_size=batch_size):
        x, mask, _ = model._inputs(batch)
        t = time.perf_counter()
        probs.append(model(x, mask))
        seconds += time.perf_counter() - t
    prob, label = torch.cat(probs), labels_of(ds)
    if calibrate:
        model.threshold.fill_(best_f1_threshold(prob, label))
    return classification_metrics(prob, label, float(model.threshold)), len(ds) / seconds, prob


def train_setting(
    name: str, cfg: dict, dm: WatchLogDataModule, max_steps: int, eval_every: int, seed: int = 0, save: bool = True
) -> dict:
    """Train one setting with AdamW (lr 1e-3) for ``max_steps`` from ``seed``; keep the weights (and verdict
    threshold) with the best validation F1, the threshold chosen on validation at each evaluation. With ``save`` the
    weights go to :func:`protocol.out_dir` (for benchmarks/watchlog.py). Returns the test row (rule-wrong columns
    included)."""
    from safetensors.torch import save_file

    set_seed(seed)
    model = WatchLogModule(stage="detect", window=WINDOW, optimizer={"name": "adamw", "lr": 1e-3}, **cfg)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    step, best, best_state, t0 = 0, -1.0, None, time.time()
    while step < max_steps:
        for batch in dm.train_dataloader():
            model.train()
            loss = model._detection(batch)["det_loss"]
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % eval_every == 0 or step == max_steps:
                val, _, _ = evaluate(model, dm.splits["val"], calibrate=True)
                print(f"[{name}] step {step} loss {loss.item():.4f} val {val}", flush=True)
                if val["f1"] > best:
                    best, best_state = val["f1"], {k: v.clone() for k, v in model.state_dict().items()}
            if step >= max_steps:
                break
    train_s = time.time() - t0
    model.load_state_dict(best_state)
    if save:
        save_file({k: v.contiguous() for k, v in best_state.items()}, str(out_dir() / f"{slug(name)}.safetensors"))
        (out_dir() / f"{slug(name)}.json").write_text(json.dumps({"stage": "detect", "window": WINDOW, **cfg}))
    ds = dm.splits["test"]
    test, _, prob = evaluate(model, ds)
    hard = rule_wrong_metrics(prob, labels_of(ds), rule_calls(ds), float(model.threshold))
    return {
        "setting": name,
        "seed": seed,
        **test,
        **hard,
        "val_f1": best,
        "train_steps": max_steps,
        "train_s": round(train_s),
        "tokens_per_window": model.encoder.num_patches * model.n_frames
        if cfg["encoder"]["kind"] == "video"
        else TOKEN_LEN * WINDOW,
    }


def bag_of_events(dm: WatchLogDataModule) -> dict:
    """Baseline (ours): logistic regression on the bag of serialised event tokens (``baselines.BagOfEvents``); its
    threshold is chosen on validation like every neural row's. Deterministic (one row)."""
    model, test = BagOfEvents().fit(dm.splits["train"]), dm.splits["test"]
    val_prob = torch.tensor(model.predict_proba(dm.splits["val"]))
    threshold = best_f1_threshold(val_prob, labels_of(dm.splits["val"]))
    val_f1 = classification_metrics(val_prob, labels_of(dm.splits["val"]), threshold)["f1"]
    t = time.perf_counter()
    prob = torch.tensor(model.predict_proba(test))
    secs = time.perf_counter() - t
    m = classification_metrics(prob, labels_of(test), threshold)
    hard = rule_wrong_metrics(prob, labels_of(test), rule_calls(test), threshold)
    return {"setting": BAG, **m, **hard, "val_f1": val_f1, "threshold": threshold, "windows_per_s": len(test) / secs}


def label_rule(dm: WatchLogDataModule) -> dict:
    """Reference, not a detector: the labelling heuristic itself; threshold chosen on validation like every other
    row's (it is 1 unless flagging every window scores a higher validation F1)."""
    val, test = dm.splits["val"], dm.splits["test"]
    threshold = best_f1_threshold(rule_calls(val).float(), labels_of(val))
    prob = rule_calls(test).float()
    m = classification_metrics(prob, labels_of(test), threshold)
    return {
        "setting": RULE,
        **m,
        **rule_wrong_metrics(prob, labels_of(test), rule_calls(test), threshold),
        "threshold": threshold,
    }


def split_facts(dm: WatchLogDataModule) -> dict:
    """Recordings, windows, malicious windows, rule-wrong test windows and dropped duplicates of ``dm``."""
    counts = {
        k: {"windows": len(ds), "malicious": sum(w.label == 1 for w in ds.windows)} for k, ds in dm.splits.items()
    }
    test = dm.splits["test"]
    counts["test"]["rule wrong"] = int((rule_calls(test).long() != labels_of(test)).sum()) if len(test) else 0
    return {
        "recordings": {k: len(v) for k, v in dm.recording_split.items()},
        "windows": counts,
        "duplicates dropped": dm.duplicates_dropped,
        "test_recordings": dm.recording_split["test"],
    }


def score_split(
    dm: WatchLogDataModule, settings: list[str], max_steps: int, eval_every: int, seeds, save: bool
) -> list[dict]:
    """Rows of ``settings`` (names of :data:`SETTINGS`, ``bag``, ``rule``) on one split."""
    rows = []
    for name in settings:
        if name == "bag":
            got = [bag_of_events(dm)]
        elif name == "rule":
            got = [label_rule(dm)]
        else:
            got = [
                train_setting(name, SETTINGS[name], dm, max_steps, eval_every, seed, save=save and seed == seeds[0])
                for seed in seeds
            ]
        print(json.dumps(got), flush=True)
        rows += got
    return rows


def run_detection(
    dm: WatchLogDataModule, max_steps: int, eval_every: int, only: list[str] | None, command: str, seeds=(0,)
) -> None:
    """Train and evaluate every setting (or ``only`` those) on ``dm``; per-seed rows, mean/sd summary; writes
    ``results/watchlog/detection.json`` after each setting."""
    sha = (git_at_start()["git_sha"] or "")[:10]
    facts = split_facts(dm)
    c = facts["windows"]["test"]
    notes = (
        f"Test = {c['windows']} windows ({c['malicious']} malicious; {c['rule wrong']} where the labelling rule "
        f"is wrong) of 16 consecutive host events from the held-out recordings {facts['test_recordings']}, "
        f"after dropping windows drawn identically to a window of an earlier split (digits normalised; dropped "
        f"{facts['duplicates dropped']}). Every neural row trains {max_steps} AdamW steps of 32 windows (lr 1e-3, "
        f"seeds {list(seeds)}, detection loss only, weights and verdict threshold at the best validation F1; "
        "test metrics at that threshold; mean ± sample sd over seeds). Bag-of-events and the rule are "
        "deterministic (one row each) and get the same validation-tuned threshold. '(rule wrong)' columns: only "
        "the test windows where the rule 'acting image is powershell.exe' disagrees with the label (recall = "
        "malicious windows without powershell.exe flagged; specificity = benign windows with powershell.exe "
        "not flagged); the rule is 0 there by construction. Labels are heuristic (PowerShell process trees, "
        "SOURCE.md). 'commit' is the commit each row was computed at."
    )
    rows = []
    for name in [n for n in list(SETTINGS) + ["bag", "rule"] if not only or n in only]:
        rows += [{**r, "commit": sha} for r in score_split(dm, [name], max_steps, eval_every, seeds, True)]
        summary = summarise(rows, [m for m in METRICS + ["threshold"] if any(m in r for r in rows)], by=["setting"])
        write(rows, "detection", command, {"data": facts, "notes": notes}, summary=summary)


def technique_folds(dm: WatchLogDataModule) -> dict[str, list[str]]:
    """ATT&CK technique (sub-techniques pooled: ``T1003.001`` -> ``T1003``) -> its recordings, from the metadata."""
    folds: dict[str, list[str]] = {}
    for rec in sorted(set(dm.log_.recordings)):
        tech = dm.log_.techniques.get(rec)
        if tech:
            folds.setdefault(tech.split(".")[0].upper(), []).append(rec)
    return folds


def run_loto(
    dm: WatchLogDataModule, techniques: list[str], max_steps: int, eval_every: int, command: str, seeds=(0,)
) -> None:
    """Leave-one-technique-out: for each technique in ``techniques`` its recordings are the test set, the others are
    split train / val (seed 0, 7:1); WatchLog (per seed), bag-of-events and the rule. Writes
    ``results/watchlog/loto.json`` after each fold.

    Raises:
        ValueError: a technique with no recording.
    """
    folds = technique_folds(dm)
    missing = [t for t in techniques if t not in folds]
    if missing:
        raise ValueError(f"no recording of {missing}; techniques: {sorted(folds)}")
    sha = (git_at_start()["git_sha"] or "")[:10]
    rows, facts = [], {}
    fold_dms = {}
    for name in ("rule", "bag", "watchlog"):  # cheapest first over all folds: a cut run keeps whole settings
        for tech in techniques:
            if tech not in fold_dms:
                fold_dms[tech] = dm.resplit(test_recordings=folds[tech])
                facts[tech] = split_facts(fold_dms[tech])
            got = score_split(fold_dms[tech], [name], max_steps, eval_every, seeds, False)
            rows += [{"held-out technique": tech, **r, "commit": sha} for r in got]
            summary = summarise(
                rows, [m for m in METRICS if any(m in r for r in rows)], by=["held-out technique", "setting"]
            )
            notes = (
                "Leave-one-technique-out: the test set is every recording of the held-out ATT&CK technique "
                "(sub-techniques pooled), so the technique is never seen in training; the other recordings are "
                f"split train / val 7:1 (seed 0); windows de-duplicated across splits. WatchLog: {max_steps} "
                f"AdamW steps, seeds {list(seeds)}, weights and threshold at the best validation F1. Folds "
                f"requested: {techniques} of {len(folds)} techniques; settings run rule, bag-of-events, then "
                "WatchLog over all folds (compute-limited: rows present = what finished). '(rule wrong)' "
                "columns as in detection.json."
            )
            write(rows, "loto", command, {"data": facts, "notes": notes}, summary=summary)
