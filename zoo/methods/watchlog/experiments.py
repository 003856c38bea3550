"""WatchLog experiments on the real Mordor Sysmon windows: the command line of the tables.

``python -m zoo.methods.watchlog.experiments detection [--max-steps N] [--seeds 0 1 2] [--only NAME ...]`` trains
every setting with the same budget on the recording split of the shipped data (windows de-duplicated across splits),
picks the checkpoint with the best validation F1, and writes test metrics (also on the windows where the labelling
rule is wrong) to ``results/watchlog/detection.json`` (``detection.py``). Weights go to
``runs/watchlog-experiments/<setting>.safetensors`` for benchmarks/watchlog.py.

``loto --techniques T1003 T1021 ...`` holds out every recording of one technique at a time (``detection.py``).
``explanations --model watchlog.mordor`` scores generated and head-grounded explanations, technique naming and the
defining event; ``recording`` explains every window of one held-out recording (``explanations.py``). ``figures``
draws example frames. Every experiment takes ``data.KEY=VALUE`` overrides (``data.path=my.jsonl``: a user's file;
with no ``data.split`` it is evaluated whole, see ``WatchLogDataModule``).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

from zoo.core.data import repo_root
from zoo.methods.watchlog.protocol import TOKEN_LEN, data_overrides, datamodule


def run_figures(overrides: dict | None = None) -> None:
    """Save example frames (one event of each of six types) and a malicious 16-event clip under docs/img/watchlog/."""
    from zoo.methods.watchlog.event_images import save_frames_png
    from zoo.methods.watchlog.windows import describe_event

    dm = datamodule(**(overrides or {}))
    log, r = dm.log_, dm.renderer
    picks, seen = [], set()
    for i, e in enumerate(log.events):
        if e["event_id"] in (1, 3, 7, 10, 13, 22) and e["event_id"] not in seen and log.labels[i] == 1:
            seen.add(e["event_id"])
            picks.append(i)
    out = repo_root() / "docs" / "img" / "watchlog"
    save_frames_png(
        np.stack([r.render(log.events[i]) for i in picks]),
        r,
        str(out / "frames.png"),
        [describe_event(log.events[i])[:48] for i in picks],
        cols=3,
    )
    ds = dm.splits["test"]
    w_idx = next(
        k
        for k, w in enumerate(ds.windows)
        if w.label == 1 and 0 < sum(log.labels[e] for e in w.event_idx) < len(w.event_idx)
    )
    w = ds.windows[w_idx]
    save_frames_png(
        ds[w_idx]["frames"].numpy(),
        r,
        str(out / "clip.png"),
        [f"#{t} [{log.labels[e]}] {describe_event(log.events[e])[:40]}" for t, e in enumerate(w.event_idx)],
    )
    print(f"wrote {out / 'frames.png'} and {out / 'clip.png'} ({w.recording}, {w.group})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiment", choices=["detection", "loto", "explanations", "recording", "figures"])
    ap.add_argument("overrides", nargs="*", help="data.KEY=VALUE overrides of the windows (data.path=...)")
    ap.add_argument("--model", default="watchlog.mordor", help="explanations, recording: zoo id or run directory")
    ap.add_argument(
        "--recording",
        default="empire_dcsync_dcerpc_drsuapi_DsGetNCChanges",
        help="recording: a held-out recording to explain window by window",
    )
    ap.add_argument("--max-steps", type=int, default=300)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--only", nargs="*", default=None, help="detection: setting names, 'bag', 'rule'")
    ap.add_argument("--techniques", nargs="*", default=["T1003", "T1021", "T1047"], help="loto: techniques to hold out")
    ap.add_argument("--seeds", nargs="*", type=int, default=[0], help="detection, loto: training seeds")
    args = ap.parse_args(argv)
    data = data_overrides(args.overrides)
    command = "python -m zoo.methods.watchlog.experiments " + " ".join(sys.argv[1:] if argv is None else argv)
    torch.set_num_threads(1)  # the machine is shared: one thread wastes least under contention
    if args.experiment in ("detection", "loto"):
        from zoo.methods.watchlog import detection

        tokens = args.experiment == "detection" and (not args.only or "baseline: token transformer" in args.only)
        dm = datamodule(**{"token_len": TOKEN_LEN if tokens else 0, **data})
        if args.experiment == "detection":
            detection.run_detection(dm, args.max_steps, args.eval_every, args.only, command, args.seeds)
        else:
            detection.run_loto(dm, args.techniques, args.max_steps, args.eval_every, command, args.seeds)
    elif args.experiment == "figures":
        run_figures(data)
    else:
        from zoo.methods.watchlog import explanations

        if args.experiment == "recording":
            explanations.run_recording(args.model, args.recording, command, data)
        else:
            explanations.run_explanations(args.model, command, data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
