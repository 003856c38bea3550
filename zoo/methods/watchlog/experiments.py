"""WatchLog experiments on the real Mordor Sysmon windows: WatchLog, ablations and baselines on the same windows.

``python -m zoo.methods.watchlog.experiments detection [--max-steps N] [--only NAME ...]`` trains every setting
with the same budget on the recording split of the shipped data, picks the checkpoint with the best validation F1,
and writes test accuracy / precision / recall / F1 / windows per second to ``results/watchlog/detection.json``
(updated after each setting). Weights go to ``runs/watchlog-experiments/<setting>.safetensors`` for
benchmarks/watchlog.py.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

from zoo.core.data import repo_root, set_seed
from zoo.methods.watchlog.datamodule import WatchLogDataModule, serialise_tokens
from zoo.methods.watchlog.module import WatchLogModule, classification_metrics

WINDOW = 16
TOKEN_LEN = 48
SETTINGS: dict[str, dict] = {
    "watchlog": {"encoder": {"kind": "video", "adapter": "pixel"}},
    "baseline: token transformer": {"encoder": {"kind": "tokens", "token_len": TOKEN_LEN}},
    "ablation: no adapter": {"encoder": {"kind": "video", "adapter": "none"}},
    "ablation: pooled adapter": {"encoder": {"kind": "video", "adapter": "pooled"}},
    "ablation: 8 of 16 frames": {"encoder": {"kind": "video", "adapter": "pixel"}, "frame_stride": 2},
}
PAPER = {"note": "only the abstract is public: 'consistently outperforms state-of-the-art in accuracy and recall, "
                 "significantly improved inference efficiency'; no numbers, no Sysmon/Mordor results "
                 "(papers-1.md §1)"}


def out_dir() -> Path:
    """Where experiment weights go (git-ignored)."""
    d = repo_root() / "runs" / "watchlog-experiments"
    d.mkdir(parents=True, exist_ok=True)
    return d


def slug(name: str) -> str:
    """File-name form of a setting name."""
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").replace("__", "_")


def datamodule(batch_size: int = 32) -> WatchLogDataModule:
    """The shared windows: 16 events per host, recording split seed 0, tokens built for the baseline."""
    dm = WatchLogDataModule(window=WINDOW, token_len=TOKEN_LEN, batch_size=batch_size)
    dm.setup()
    return dm


@torch.no_grad()
def evaluate(model: WatchLogModule, ds, batch_size: int = 64) -> tuple[dict, float]:
    """Window metrics on ``ds`` and inference windows per second (batched, no explanation, 2 threads)."""
    from torch.utils.data import DataLoader

    model.eval()
    probs, labels, seconds = [], [], 0.0
    for batch in DataLoader(ds, batch_size=batch_size):
        x, mask, _ = model._inputs(batch)
        t = time.perf_counter()
        p = model(x, mask)
        seconds += time.perf_counter() - t
        probs.append(p)
        labels.append(batch["label"])
    m = classification_metrics(torch.cat(probs), torch.cat(labels))
    return m, len(ds) / seconds


def train_setting(name: str, cfg: dict, dm: WatchLogDataModule, max_steps: int, eval_every: int) -> dict:
    """Train one setting with AdamW (lr 1e-3) for ``max_steps``; keep the best validation-F1 weights."""
    from safetensors.torch import save_file

    set_seed(0)
    model = WatchLogModule(stage="detect", window=WINDOW, optimizer={"name": "adamw", "lr": 1e-3}, **cfg)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    loader = dm.train_dataloader()
    step, best, best_state, t0 = 0, -1.0, None, time.time()
    while step < max_steps:
        for batch in loader:
            model.train()
            loss = model._detection(batch)["det_loss"]
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % eval_every == 0 or step == max_steps:
                val, _ = evaluate(model, dm.splits["val"])
                print(f"[{name}] step {step} loss {loss.item():.4f} val {val}", flush=True)
                if val["f1"] > best:
                    best, best_state = val["f1"], {k: v.clone() for k, v in model.state_dict().items()}
            if step >= max_steps:
                break
    train_s = time.time() - t0
    model.load_state_dict(best_state)
    save_file({k: v.contiguous() for k, v in best_state.items()}, str(out_dir() / f"{slug(name)}.safetensors"))
    (out_dir() / f"{slug(name)}.json").write_text(json.dumps({"stage": "detect", "window": WINDOW, **cfg}))
    test, wps = evaluate(model, dm.splits["test"])
    return {"setting": name, **{k: round(v, 4) for k, v in test.items()}, "windows_per_s": round(wps, 1),
            "val_f1": round(best, 4), "train_steps": max_steps, "train_s": round(train_s),
            "tokens_per_window": model.encoder.num_patches * model.n_frames if cfg["encoder"]["kind"] == "video"
            else TOKEN_LEN * WINDOW}


def bag_of_events(dm: WatchLogDataModule) -> dict:
    """Baseline (ours): logistic regression on the window's bag of serialised event tokens (hashed, log counts)."""
    import numpy as np
    from scipy.sparse import csr_matrix
    from sklearn.linear_model import LogisticRegression

    vocab = 8192

    def featurise(ds):
        rows, cols, vals, y = [], [], [], []
        for r, w in enumerate(ds.windows):
            counts: dict[int, int] = {}
            for e in w.event_idx:
                for t in serialise_tokens(ds.log.events[e], vocab, 10_000):
                    counts[t] = counts.get(t, 0) + 1
            rows += [r] * len(counts)
            cols += list(counts)
            vals += [math.log1p(c) for c in counts.values()]
            y.append(w.label)
        return csr_matrix((vals, (rows, cols)), shape=(len(ds.windows), vocab)), np.array(y)

    xtr, ytr = featurise(dm.splits["train"])
    clf = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000).fit(xtr, ytr)
    xte, yte = featurise(dm.splits["test"])
    t = time.perf_counter()
    xte2, _ = featurise(dm.splits["test"])
    prob = clf.predict_proba(xte2)[:, 1]
    secs = time.perf_counter() - t
    m = classification_metrics(torch.tensor(prob), torch.tensor(yte))
    return {"setting": "baseline: bag-of-events (logistic regression)", **{k: round(v, 4) for k, v in m.items()},
            "windows_per_s": round(len(yte) / secs, 1), "note": "windows/s includes featurising the raw events"}


def label_rule(dm: WatchLogDataModule) -> dict:
    """Reference, not a detector: flag a window when any event's acting image is powershell.exe.

    The event labels are *defined* from PowerShell process trees (SOURCE.md), so this shows how much of the task
    the labelling heuristic itself gives away.
    """
    ds = dm.splits["test"]
    prob, y = [], []
    for w in ds.windows:
        hit = any("powershell" in str(ds.log.events[e].get("image") or ds.log.events[e].get("source_image") or
                                      "").lower() for e in w.event_idx)
        prob.append(float(hit))
        y.append(w.label)
    m = classification_metrics(torch.tensor(prob), torch.tensor(y))
    return {"setting": "reference: label heuristic (actor is powershell.exe)", **{k: round(v, 4) for k, v in m.items()}}


def write(rows: list[dict], experiment: str, command: str, extra: dict | None = None) -> Path:
    """Write ``results/watchlog/<experiment>.json`` in the zoo results shape."""
    path = repo_root() / "results" / "watchlog" / f"{experiment}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"method": "watchlog", "experiment": experiment, "command": command, "rows": rows,
                                "paper": PAPER, **(extra or {})}, indent=1) + "\n")
    return path


def run_detection(max_steps: int, eval_every: int, only: list[str] | None, command: str) -> None:
    """Train and evaluate every setting; merge into an existing detection.json so settings can be rerun alone."""
    torch.set_num_threads(2)
    dm = datamodule()
    path = repo_root() / "results" / "watchlog" / "detection.json"
    rows = {r["setting"]: r for r in json.loads(path.read_text())["rows"]} if path.exists() and only else {}
    split = {k: len(v) for k, v in dm.recording_split.items()}
    counts = {k: {"windows": len(ds), "malicious": sum(w.label == 1 for w in ds.windows)}
              for k, ds in dm.splits.items()}
    extra = {"data": {"recordings": split, "windows": counts, "test_recordings": dm.recording_split["test"],
                      "window_events": WINDOW, "group_by": "host"}}
    todo = [n for n in list(SETTINGS) + ["bag", "rule"] if not only or n in only or
            (n == "bag" and "bag" in only) or (n == "rule" and "rule" in only)]
    for name in todo:
        if name == "bag":
            row = bag_of_events(dm)
        elif name == "rule":
            row = label_rule(dm)
        else:
            row = train_setting(name, SETTINGS[name], dm, max_steps, eval_every)
        rows[row["setting"]] = row
        print(json.dumps(row), flush=True)
        write(list(rows.values()), "detection", command, extra)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("experiment", choices=["detection"])
    ap.add_argument("--max-steps", type=int, default=300)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--only", nargs="*", default=None, help="setting names, 'bag', 'rule'")
    args = ap.parse_args(argv)
    command = "python -m zoo.methods.watchlog.experiments " + " ".join(sys.argv[1:] if argv is None else argv)
    run_detection(args.max_steps, args.eval_every, args.only, command)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
