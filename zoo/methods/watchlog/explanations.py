"""WatchLog's explanation tables: generated explanations on held-out windows and every window of one recording."""
from __future__ import annotations

import math
import time

import torch

from zoo.methods.watchlog.datamodule import WatchLogDataModule
from zoo.methods.watchlog.metrics import classification_metrics
from zoo.methods.watchlog.protocol import write


def run_explanations(ref: str, max_windows: int, command: str, data: dict | None = None) -> None:
    """Generate explanations for held-out test windows of a trained WatchLog (zoo id or run directory).

    Half of ``max_windows`` are the first malicious test windows (evenly spaced), the rest evenly spaced benign
    ones. Writes ``results/watchlog/explanations.json`` (verdict / technique agreement, evidence precision, the
    detection head on the same windows and on the whole test split) and ``explanation-examples.json``.
    """
    from zoo.core.build import load_module
    from zoo.methods.watchlog.datamodule import WindowDataset
    from zoo.methods.watchlog.decoder import evidence_precision
    from zoo.methods.watchlog.windows import describe_event

    torch.set_num_threads(2)
    module, cfg = load_module(ref)
    dm = WatchLogDataModule(**{**cfg["data"], **(data or {})})
    dm.setup()
    ds = dm.splits["test"]
    train_techs = {w.technique.lower() for w in dm.splits["train"].windows if w.label == 1}

    def spaced(ws, k):
        return [ws[int(i * len(ws) / k)] for i in range(k)] if len(ws) > k else ws

    mal = spaced([w for w in ds.windows if w.label == 1], max_windows // 2)
    ben = spaced([w for w in ds.windows if w.label == 0], max_windows - len(mal))
    sub = WindowDataset(mal + ben, ds.log, ds.renderer, ds.hits, ds.n_frames)
    trn = dm.splits["train"]
    train_sub = WindowDataset(spaced([w for w in trn.windows if w.label == 1], max_windows // 2), trn.log,
                              trn.renderer, trn.hits, trn.n_frames)
    stride = module.hparams.frame_stride
    ev_labels = [[ds.log.labels[e] for e in w.event_idx][::stride] for w in sub.windows]
    m_idx = [i for i, w in enumerate(sub.windows) if w.label == 1]
    full = module.evaluate(dm)

    def prec(x: float) -> float | None:
        return None if math.isnan(x) else x           # None: no events cited

    def score(ground: bool) -> tuple[dict, list[dict]]:
        module.dec_cfg["ground_verdict"] = ground
        t0 = time.time()
        preds = module.predict_dataset(sub, batch_size=16)
        secs = time.time() - t0
        verdict_ok = sum((p["parsed"]["verdict"] == ("malicious" if w.label else "benign"))
                         for p, w in zip(preds, sub.windows))
        parsed_ok = sum(p["parsed"]["verdict"] in ("malicious", "benign") for p in preds)
        tech_ok = sum(preds[i]["parsed"]["technique"] == sub.windows[i].technique.lower() for i in m_idx)
        tech_seen = [i for i in m_idx if sub.windows[i].technique.lower() in train_techs]
        tech_ok_seen = sum(preds[i]["parsed"]["technique"] == sub.windows[i].technique.lower() for i in tech_seen)
        cited = [p["parsed"]["evidence"] for p in preds]
        ev_prec, n_cited = evidence_precision(cited, ev_labels)
        flagged = [i for i, p in enumerate(preds) if p["parsed"]["verdict"] == "malicious"]
        ev_prec_flagged, _ = evidence_precision([cited[i] for i in flagged], [ev_labels[i] for i in flagged])
        # reference: cite the detection head's top events (as many as the model cited) in the same windows
        top = [sorted(range(len(lab)), key=lambda t: -p["event_prob"][t])[:len(c)]
               for p, c, lab in zip(preds, cited, ev_labels)]
        top_prec, _ = evidence_precision(top, ev_labels)
        det = classification_metrics(torch.tensor([p["prob"] for p in preds]),
                                     torch.tensor([w.label for w in sub.windows]), float(module.threshold))
        said = torch.tensor([float(p["parsed"]["verdict"] == "malicious") for p in module.predict_dataset(ds, 32)])
        train_preds = module.predict_dataset(train_sub, batch_size=16)
        tech_train = sum(p["parsed"]["technique"] == w.technique.lower() for p, w in zip(train_preds, train_sub.windows))
        gen_all = classification_metrics(said, torch.tensor([w.label for w in ds.windows]))
        row = {"verdict written by": "detector (ground_verdict=true)" if ground else "language model (default)",
               "windows": len(sub), "malicious": len(m_idx),
               "generated_verdict_accuracy": round(verdict_ok / len(sub), 4),
               "well_formed": round(parsed_ok / len(sub), 4),
               "technique_accuracy (malicious)": round(tech_ok / max(1, len(m_idx)), 4),
               "technique_accuracy (malicious training windows)": tech_train / len(train_sub),
               "malicious training windows scored": len(train_sub),
               "technique_accuracy (technique seen in training)": tech_ok_seen / len(tech_seen) if tech_seen else None,
               "test windows whose technique was seen in training": len(tech_seen),
               "evidence_precision": prec(ev_prec), "evidence_cited": n_cited,
               "evidence_precision (windows called malicious)": prec(ev_prec_flagged),
               "reference: top event-head scores precision": prec(top_prec),
               "generated_verdict_recall (all test windows)": round(gen_all["recall"], 4),
               "generated_verdict_f1 (all test windows)": round(gen_all["f1"], 4),
               "detection_head_f1 (these windows)": round(det["f1"], 4),
               "detection_head_recall (all test windows)": round(full["test/recall"], 4),
               "detection_head_f1 (all test windows)": round(full["test/f1"], 4),
               "seconds_per_window (generate)": round(secs / len(sub), 3)}
        return row, preds

    scored = {ground: score(ground) for ground in (False, True)}
    rows, preds = [scored[False][0], scored[True][0]], scored[False][1]
    notes = (f"Model `{ref}` on held-out test recordings {dm.recording_split['test']}. Evidence precision = "
             "fraction of cited `#i` events whose event label is attack (weak heuristic labels, SOURCE.md). "
             f"Techniques in the test windows: {sorted({w.technique for w in mal})}; seen in training: "
             f"{sorted(train_techs)}.")
    write(rows, "explanations", command, {"notes": notes})
    examples = []
    for i in [m_idx[0], m_idx[len(m_idx) // 2], m_idx[-1], len(sub) - 1] if m_idx else [0]:
        w, p = sub.windows[i], preds[i]
        ev = [f"#{t}: {describe_event(ds.log.events[w.event_idx[t * stride]])} (label "
              f"{ds.log.labels[w.event_idx[t * stride]]})" for t in p["parsed"]["evidence"]
              if 0 <= t * stride < len(w.event_idx)]
        examples.append({"recording": w.recording, "host": w.group, "label": w.label, "technique": w.technique,
                         "p_detect": round(p["prob"], 3), "explanation": p["explanation"],
                         "cited events": "; ".join(ev) or "none"})
    write(examples, "explanation-examples", command, {"notes": "Generated explanations (greedy decoding, the LM "
                                                      "writes the verdict) for held-out windows; cited events "
                                                      "expanded from the raw log."})


def run_recording(ref: str, recording: str, command: str, data: dict | None = None) -> None:
    """Explain every window of one held-out recording (what ``zoo predict`` prints for it), as a table.

    Writes ``results/watchlog/recording.json``: per window its log lines, label, detector probability, the generated
    explanation and the cited events with their labels.

    Raises:
        ValueError: ``recording`` is not a test recording of the model's data split.
    """
    from zoo.core.build import load_module
    from zoo.methods.watchlog.datamodule import WindowDataset
    from zoo.methods.watchlog.windows import describe_event

    torch.set_num_threads(2)
    module, cfg = load_module(ref)
    dm = WatchLogDataModule(**{**cfg["data"], **(data or {})})
    dm.setup()
    ds = dm.splits["test"]
    if recording not in dm.recording_split["test"]:
        raise ValueError(f"--recording {recording!r} is not held out; test recordings: {dm.recording_split['test']}")
    ws = [w for w in ds.windows if w.recording == recording]
    preds = module.predict_dataset(WindowDataset(ws, ds.log, ds.renderer, ds.hits, ds.n_frames), batch_size=16)
    stride, rows = module.hparams.frame_stride, []
    for k, (w, p) in enumerate(zip(ws, preds)):
        events = [w.event_idx[t * stride] for t in p["parsed"]["evidence"] if 0 <= t * stride < len(w.event_idx)]
        cited = [f"#{t} {describe_event(ds.log.events[e])[:48]} ({ds.log.labels[e]})"
                 for t, e in zip(p["parsed"]["evidence"], events)]
        rows.append({"window": k, "host": w.group,
                     "lines": f"{ds.log.lines[w.event_idx[0]]}-{ds.log.lines[w.event_idx[-1]]}",
                     "label": w.label, "attack events": sum(ds.log.labels[e] == 1 for e in w.event_idx),
                     "p_detect": round(p["prob"], 3), "explanation": p["explanation"],
                     "cited events (label)": "; ".join(cited) or "none"})
    said = [r["explanation"].startswith("verdict: malicious") for r in rows]
    tp = sum(s and r["label"] == 1 for s, r in zip(said, rows))
    notes = (f"Model `{ref}` on every 16-event host window of the held-out recording `{recording}` "
             f"(technique {ws[0].technique if ws else '?'}, never seen in training): {len(rows)} windows, "
             f"{sum(r['label'] for r in rows)} labelled malicious; the explanation says malicious for {sum(said)} "
             f"({tp} of them labelled malicious). Lines are line numbers of data/mordor-sysmon/events.jsonl.gz; "
             "(0/1) after a cited event is its heuristic event label.")
    write(rows, "recording", command, {"notes": notes})
