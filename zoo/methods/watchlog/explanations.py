"""WatchLog's explanation tables (protocol ours): what the explanations cite and name on every held-out window, and
every window of one recording.

Two sources are scored on the same windows: the language model's own text (``generated``) and the default grounded
explanation (evidence = the event head's top frames, technique = retrieval over the training techniques with
``unknown``; ``inference.py``). "Defining event cited": among malicious windows that contain their recording's
defining event (``techniques.DEFINING_EVENTS``: ``schtasks``-like command lines such as ``Rubeus.exe asktgt``,
``MSBuild.exe ... pshell.xml``), the fraction whose evidence cites it.
"""

from __future__ import annotations

import math

import torch

from zoo.methods.watchlog.datamodule import WatchLogDataModule
from zoo.methods.watchlog.decoder import evidence_precision, parse_explanation
from zoo.methods.watchlog.metrics import classification_metrics
from zoo.methods.watchlog.protocol import write
from zoo.methods.watchlog.techniques import UNKNOWN, is_defining_event
from zoo.methods.watchlog.windows import describe_event


def _nan_none(x: float) -> float | None:
    return None if math.isnan(x) else x


def explanation_scores(
    ds,
    preds: list[dict],
    evidence: list[list[int]],
    verdicts: list[str | None],
    named: list[str | None],
    train_techs: set[str],
    stride: int = 1,
) -> dict:
    """Scores of one explanation source on every window of ``ds``.

    Args:
        ds: the windows (labelled); preds: :meth:`Inference.predict_dataset` rows (for the head's probability);
        evidence / verdicts / named: per window the cited frames, the verdict and the technique of this source;
        train_techs: lower-case techniques of the malicious training windows; stride: the model's frame stride.
    Returns:
        Verdict F1 and accuracy, evidence precision (cited frames that are attack-labelled events), defining event
        cited (count and windows), technique accuracy on malicious windows whose technique was seen in training,
        ``unknown`` rate on the others, and technique right overall (``unknown`` right for an unseen technique).
    """
    log = ds.log
    labels = torch.tensor([w.label for w in ds.windows])
    said = torch.tensor([float(v == "malicious") for v in verdicts])
    det = classification_metrics(said, labels, 0.5)
    ev_labels = [[log.labels[e] for e in w.event_idx][::stride] for w in ds.windows]
    prec, n_cited = evidence_precision(evidence, ev_labels)
    mal = [i for i, w in enumerate(ds.windows) if w.label == 1]
    defining = {
        i: {
            t
            for t, e in enumerate(ds.windows[i].event_idx[::stride])
            if is_defining_event(log.events[e], ds.windows[i].recording)
        }
        for i in mal
    }
    defining = {i: d for i, d in defining.items() if d}
    cited_def = sum(bool(set(evidence[i]) & d) for i, d in defining.items())
    seen = [i for i in mal if ds.windows[i].technique.lower() in train_techs]
    unseen = [i for i in mal if ds.windows[i].technique.lower() not in train_techs]
    right_seen = sum(named[i] == ds.windows[i].technique.lower() for i in seen)
    unknown_unseen = sum(named[i] == UNKNOWN for i in unseen)
    return {
        "windows": len(ds),
        "malicious": len(mal),
        "verdict_f1": det["f1"],
        "verdict_accuracy": det["accuracy"],
        "evidence_precision": _nan_none(prec),
        "evidence_cited": n_cited,
        "windows with a defining event": len(defining),
        "defining event cited": cited_def,
        "defining event cited (fraction)": cited_def / len(defining) if defining else None,
        "malicious windows, technique seen in training": len(seen),
        "technique right (seen)": right_seen,
        "technique accuracy (seen)": right_seen / len(seen) if seen else None,
        "malicious windows, technique unseen": len(unseen),
        "unknown (unseen)": unknown_unseen,
        "unknown rate (unseen)": unknown_unseen / len(unseen) if unseen else None,
        "technique right (all malicious)": right_seen + unknown_unseen,
        "technique accuracy (all malicious)": (right_seen + unknown_unseen) / len(mal) if mal else None,
    }


def run_explanations(ref: str, command: str, data: dict | None = None) -> None:
    """Score the LM-generated and the grounded explanations of a trained WatchLog (zoo id or run directory) on every
    test window; a model saved without a technique index gets one fitted on its training windows first.

    Writes ``results/watchlog/explanations.json`` (one row per source, :func:`explanation_scores`) and
    ``explanation-examples.json``.
    """
    from zoo.core.loading import load_module

    torch.set_num_threads(2)
    module, cfg = load_module(ref)
    dm = WatchLogDataModule(**{**cfg["data"], **(data or {})})
    dm.setup()
    ds, train = dm.splits["test"], dm.splits["train"]
    index = {"techniques": len(module.technique_list()), "tau": float(module.technique_tau), "fitted here": False}
    if not index["techniques"] and train.windows:
        index = {**module.fit_technique_index(train), "fitted here": True}
    train_techs = {w.technique.lower() for w in train.windows if w.label == 1}
    preds = module.predict_dataset(ds, batch_size=32)
    stride = module.hparams.frame_stride
    gen = [parse_explanation(p["generated"]) for p in preds]
    head_verdict = ["malicious" if p["prob"] >= float(module.threshold) else "benign" for p in preds]
    sources = {
        "language model (generated text)": (
            [g["evidence"] for g in gen],
            [g["verdict"] for g in gen],
            [g["technique"] for g in gen],
        ),
        "grounded (LM verdict, event-head evidence, retrieved technique)": (
            [p["parsed"]["evidence"] for p in preds],
            [p["parsed"]["verdict"] for p in preds],
            [p["parsed"]["technique"] for p in preds],
        ),
        "grounded, detector verdict (ground_verdict=true)": (
            [p["evidence_head"] if v == "malicious" else [] for p, v in zip(preds, head_verdict)],
            head_verdict,
            [p["technique"] if v == "malicious" else "none" for p, v in zip(preds, head_verdict)],
        ),
    }
    rows = [
        {"explanation source": name, **explanation_scores(ds, preds, *src, train_techs, stride)}
        for name, src in sources.items()
    ]
    notes = (
        f"Model `{ref}` on all {len(ds)} windows of the held-out test recordings {dm.recording_split['test']} "
        f"(de-duplicated against train/val, dropped {dm.duplicates_dropped}). Technique retrieval index: "
        f"{index['techniques']} training techniques, tau {index['tau']:.3f} (leave-one-recording-out on the "
        f"training windows; fitted by this command: {index['fitted here']}). Seen techniques: those of "
        f"malicious training windows ({sorted(train_techs)}). Evidence precision = cited frames whose heuristic "
        "event label is attack (SOURCE.md). Grounded sources cite the event head's frames with probability "
        ">= 0.5 (at most 4; the top frame when none), so evidence and verdict come from the detector and the "
        "LM adds only the verdict word in the second row."
    )
    index["tau"] = index["tau"] if math.isfinite(index["tau"]) else None  # None: always "unknown"
    write(rows, "explanations", command, {"notes": notes, "data": {"technique index": index}})
    mal = [i for i, w in enumerate(ds.windows) if w.label == 1]
    picks = [
        i
        for i in mal
        if any(is_defining_event(ds.log.events[e], ds.windows[i].recording) for e in ds.windows[i].event_idx)
    ][:3] + mal[len(mal) // 2 : len(mal) // 2 + 1]
    examples = []
    for i in dict.fromkeys(picks):
        w, p = ds.windows[i], preds[i]
        cited = [
            f"#{t}: {describe_event(ds.log.events[w.event_idx[t * stride]])} (label "
            f"{ds.log.labels[w.event_idx[t * stride]]})"
            for t in p["parsed"]["evidence"]
            if 0 <= t * stride < len(w.event_idx)
        ]
        examples.append(
            {
                "recording": w.recording,
                "host": w.group,
                "label": w.label,
                "technique": w.technique,
                "p_detect": round(p["prob"], 3),
                "generated": p["generated"],
                "explanation (grounded)": p["explanation"],
                "cited events": "; ".join(cited) or "none",
            }
        )
    write(
        examples,
        "explanation-examples",
        command,
        {
            "notes": "LM-generated and grounded explanations for "
            "held-out malicious windows (the first three containing a "
            "defining event, then one from the middle); cited events of "
            "the grounded explanation expanded from the raw log."
        },
    )


def run_recording(ref: str, recording: str, command: str, data: dict | None = None) -> None:
    """Explain every window of one held-out recording (what ``zoo predict`` prints for it), as a table.

    Writes ``results/watchlog/recording.json``: per window its log lines, label, detector probability, the generated
    explanation and the cited events with their labels.

    Raises:
        ValueError: ``recording`` is not a test recording of the model's data split.
    """
    from zoo.core.loading import load_module
    from zoo.methods.watchlog.datamodule import WindowDataset

    torch.set_num_threads(2)
    module, cfg = load_module(ref)
    dm = WatchLogDataModule(**{**cfg["data"], **(data or {})})
    dm.setup()
    ds = dm.splits["test"]
    if not module.technique_list() and dm.splits["train"].windows:
        module.fit_technique_index(dm.splits["train"])
    seen = {w.technique.lower() for w in dm.splits["train"].windows if w.label == 1}
    if recording not in dm.recording_split["test"]:
        raise ValueError(f"--recording {recording!r} is not held out; test recordings: {dm.recording_split['test']}")
    ws = [w for w in ds.windows if w.recording == recording]
    preds = module.predict_dataset(WindowDataset(ws, ds.log, ds.renderer, ds.hits, ds.n_frames), batch_size=16)
    stride, rows = module.hparams.frame_stride, []
    for k, (w, p) in enumerate(zip(ws, preds)):
        events = [w.event_idx[t * stride] for t in p["parsed"]["evidence"] if 0 <= t * stride < len(w.event_idx)]
        cited = [
            f"#{t} {describe_event(ds.log.events[e])[:48]} ({ds.log.labels[e]})"
            for t, e in zip(p["parsed"]["evidence"], events)
        ]
        rows.append(
            {
                "window": k,
                "host": w.group,
                "lines": f"{ds.log.lines[w.event_idx[0]]}-{ds.log.lines[w.event_idx[-1]]}",
                "label": w.label,
                "attack events": sum(ds.log.labels[e] == 1 for e in w.event_idx),
                "p_detect": round(p["prob"], 3),
                "explanation": p["explanation"],
                "cited events (label)": "; ".join(cited) or "none",
            }
        )
    said = [r["explanation"].startswith("verdict: malicious") for r in rows]
    tech = next((w.technique for w in ws if w.label == 1), "?")
    tp = sum(s and r["label"] == 1 for s, r in zip(said, rows))
    notes = (
        f"Model `{ref}` on every 16-event host window of the held-out recording `{recording}` "
        f"(technique {tech}, {'seen' if tech.lower() in seen else 'never seen'} in training): {len(rows)} windows, "
        f"{sum(r['label'] for r in rows)} labelled malicious; the explanation says malicious for {sum(said)} "
        f"({tp} of them labelled malicious). Lines are line numbers of data/mordor-sysmon/events.jsonl.gz; "
        "(0/1) after a cited event is its heuristic event label."
    )
    write(rows, "recording", command, {"notes": notes})
