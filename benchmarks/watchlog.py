"""WatchLog vs the serialised-token transformer: inference windows/s at equal or better recall, one process.

Both models are the seed-0 models of ``python -m zoo.methods.watchlog.experiments detection`` on the same 16-event
Sysmon host windows (weights in ``runs/watchlog-experiments/``); a model whose weights are missing (a fresh clone) is
trained here first with the same protocol (``--train-steps``, default 300 as in the detection table, seed 0) and
cached there. On the held-out test recordings this script
measures each model's recall and times, alternating the two models over the same batches, (a) the model forward
alone and (b) end to end from raw events (rendering the key-slot images vs serialising and hashing the tokens).
It prints the ratios and writes ``results/watchlog/throughput.json`` (``kind: benchmark``, docs/benchmarks.md).

With ``--predict EVENTS.jsonl`` it times ``zoo predict <zoo weights> EVENTS.jsonl`` instead (``predict_record``: read
the file, cut and render the windows, detect, generate and ground an explanation per window) in two modes, fed one
window at a time (stream) and ``inference.PREDICT_BATCH`` windows at a time (batch, zoo predict's default), by
``zoo.core.timing.compare`` (one untimed warm-up call per mode, ``--repeats`` interleaved repeats in alternating
order, ``--threads`` threads, medians), and writes windows/s to ``results/watchlog/predict-throughput.json``.

    python benchmarks/watchlog.py [--repeats 3] [--batch-size 64] [--threads 2] [--zoo-weights watchlog.mordor]
                                  [--train-steps 300] [--predict EVENTS.jsonl] [--results-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch.utils.data import DataLoader

from zoo.core.results import write_result
from zoo.core.timing import compare, machine_load
from zoo.methods.watchlog import detection as E
from zoo.methods.watchlog import protocol as P
from zoo.methods.watchlog.datamodule import WindowDataset
from zoo.methods.watchlog.event_images import value_bins
from zoo.methods.watchlog.inference import PREDICT_BATCH
from zoo.methods.watchlog.metrics import classification_metrics
from zoo.methods.watchlog.module import WatchLogModule

MODELS = {
    "WatchLog (ViT + pixel-wise temporal adapter, patch 8x16)": "watchlog",
    "WatchLog, one token per key slot (patch 8x32)": "watchlog, one token per key slot (patch 8x32)",
    "token transformer (serialised events)": "baseline: token transformer",
}
BASELINE = "token transformer (serialised events)"
NOTES = (
    "Inference on the held-out test recordings' 16-event windows, CPU, the seed-0 models of the detection "
    "experiment and the shipped zoo weights (SFT model, its detection head); recall at each model's "
    "validation-chosen threshold. Forward = model only on prepared tensors; end to end includes rendering the "
    "key-slot images (WatchLog) or serialising + hashing the tokens (baseline, 48 tokens per event)."
)


def load(setting: str, train_steps: int = 300, eval_every: int = 50) -> WatchLogModule:
    """The seed-0 model of a detection-experiment setting, trained here (and cached) when its weights are missing."""
    d = P.out_dir()
    path = d / f"{P.slug(setting)}.safetensors"
    if not path.exists():
        print(
            f"{path} missing: training {setting!r} for {train_steps} steps (seed 0, as the detection table)", flush=True
        )
        E.train_setting(setting, E.SETTINGS[setting], P.datamodule(), train_steps, eval_every, seed=0, save=True)
    cfg = json.loads((d / f"{P.slug(setting)}.json").read_text())
    m = WatchLogModule(**cfg)
    m.load_state_dict(load_file(str(path)))
    return m.eval()


def predict_throughput(args: argparse.Namespace, command: str | None) -> Path:
    """Windows/s of ``zoo predict`` with explanations on ``args.predict``, stream (1 window per forward and
    generate call) vs batch (:data:`PREDICT_BATCH`); writes and returns ``results/watchlog/predict-throughput.json``.
    """
    from zoo.core.loading import load_module

    model = load_module(args.zoo_weights)[0].eval()
    if model.lm is None:
        raise ValueError(f"{args.zoo_weights} has no language decoder: zoo predict would write no explanations")
    modes = {"stream": 1, "batch": PREDICT_BATCH}
    load_start = machine_load()
    t = compare(
        {mode: lambda b=b: model.predict_record([args.predict], batch_size=b) for mode, b in modes.items()},
        repeats=args.repeats,
        warmup=1,
        threads=args.threads,
    )
    windows = t.outputs["stream"]["summary"]["windows"]
    texts = {mode: [w["explanation"] for w in t.outputs[mode]["windows"]] for mode in modes}
    rows = [
        {
            "mode": mode,
            "windows_per_forward": b,
            "windows": windows,
            "seconds": t.median(mode),
            "windows_per_s": windows / t.median(mode),
            "cpu_seconds": t.median(mode, "cpu"),
            "windows_per_cpu_s": windows / t.median(mode, "cpu"),
            "explanations_as_stream": texts[mode] == texts["stream"],
        }
        for mode, b in modes.items()
    ]
    for r in rows:
        print("  " + ", ".join(f"{k}={v}" for k, v in r.items()))
    return write_result(
        "watchlog",
        "predict-throughput",
        rows,
        kind="benchmark",
        notes=f"zoo predict {args.zoo_weights} {args.predict} with explanations (predict_record: read the events, "
        "cut and render the windows, detection forward, greedy generate, grounding; the clip PNG not written), "
        f"CPU. zoo.core.timing.compare: {t.describe()} windows_per_s = windows / median wall seconds of one whole "
        f"call. Machine: {load_start} before the timed calls, {machine_load()} after.",
        paper={"target": "issue 41: state zoo predict's windows/s with explanations, stream and batch"},
        command=command,
        results_dir=None if args.results_dir is None else Path(args.results_dir),
    )


@torch.no_grad()
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--zoo-weights", default="watchlog.mordor", help="also time this zoo id ('' to skip)")
    ap.add_argument("--train-steps", type=int, default=300, help="steps for a model whose weights are missing")
    ap.add_argument("--predict", default=None, help="time zoo predict on this events file instead (module doc)")
    ap.add_argument("--results-dir", default=None, help="write the results file under this folder instead")
    args = ap.parse_args(argv)
    command = None if argv is None else "python benchmarks/watchlog.py " + " ".join(argv)
    if args.predict:
        print(predict_throughput(args, command))
        return 0
    torch.set_num_threads(args.threads)
    dm = P.datamodule(args.batch_size)
    ds = dm.splits["test"]
    models = {name: load(setting, args.train_steps) for name, setting in MODELS.items()}
    if args.zoo_weights:  # the shipped SFT model: same encoder, its own detection head
        from zoo.core.loading import load_module

        models[f"zoo weights {args.zoo_weights} (detection head)"] = load_module(args.zoo_weights)[0].eval()
    batches = list(DataLoader(ds, batch_size=args.batch_size))
    probs = {n: [] for n in models}
    fwd = {n: [] for n in models}
    for rep in range(args.repeats):
        secs = {n: 0.0 for n in models}
        for batch in batches:
            for n, m in models.items():
                x, mask, _ = m._inputs(batch)
                t = time.perf_counter()
                p = m(x, mask)
                secs[n] += time.perf_counter() - t
                if rep == 0:
                    probs[n].append(p)
        for n in models:
            fwd[n].append(len(ds) / secs[n])
    # end to end: raw events -> rendered frames / serialised tokens -> verdict
    e2e = {n: [] for n in models}
    for _ in range(args.repeats):
        for n, m in models.items():
            kind = m.enc_cfg["kind"]
            value_bins.cache_clear()
            sub = WindowDataset(
                ds.windows,
                ds.log,
                ds.renderer,
                None,
                ds.n_frames,
                ds.token_len if kind == "tokens" else 0,
                ds.vocab_size,
                render=kind == "video",
            )
            t = time.perf_counter()
            for batch in DataLoader(sub, batch_size=args.batch_size):
                x, mask, _ = m._inputs(batch)
                m(x, mask)
            e2e[n].append(len(ds) / (time.perf_counter() - t))
    labels = torch.tensor([w.label for w in ds.windows])
    rows: list[dict] = []
    for n, m in models.items():
        met = classification_metrics(torch.cat(probs[n]), labels, float(m.threshold))
        rows.append(
            {
                "model": n,
                "recall": met["recall"],
                "precision": met["precision"],
                "f1": met["f1"],
                "forward_windows_per_s": statistics.median(fwd[n]),
                "end_to_end_windows_per_s": statistics.median(e2e[n]),
                "tokens_per_window": m.encoder.num_patches * m.n_frames
                if m.enc_cfg["kind"] == "video"
                else m.enc_cfg["token_len"] * m.n_frames,
            }
        )
    t = next(r for r in rows if r["model"] == BASELINE)
    print(
        f"test windows: {len(ds)} ({int(labels.sum())} malicious), batch {args.batch_size}, "
        f"{args.threads} threads, median of {args.repeats}"
    )
    for r in rows:
        print("  " + ", ".join(f"{k}={v}" for k, v in r.items()))
    for w in [r for r in rows if r["model"] != BASELINE]:
        ratio_fwd = w["forward_windows_per_s"] / t["forward_windows_per_s"]
        ratio_e2e = w["end_to_end_windows_per_s"] / t["end_to_end_windows_per_s"]
        equal_recall = w["recall"] >= t["recall"]
        print(
            f"{w['model']} / token transformer: forward {ratio_fwd:.2f}x, end to end {ratio_e2e:.2f}x "
            f"(target >= 5x); recall {w['recall']} {'>=' if equal_recall else '<'} {t['recall']}"
        )
        rows.append(
            {
                "model": f"ratio: {w['model']} / token transformer",
                "forward_windows_per_s": ratio_fwd,
                "end_to_end_windows_per_s": ratio_e2e,
                "recall": w["recall"] - t["recall"],
            }
        )
    print(
        write_result(
            "watchlog",
            "throughput",
            rows,
            kind="benchmark",
            notes=NOTES + " In the ratio rows, recall is the difference to the token transformer's.",
            paper={
                "claim": "significantly improved inference efficiency (abstract; no number)",
                "target": ">= 5x windows/s at equal or better recall (issue 6)",
            },
            command=command,
            results_dir=None if args.results_dir is None else Path(args.results_dir),
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
