"""WatchLog inference: verdicts, explanations and technique names for every window of a data set, and ``zoo predict``
on an events file. A mixin of :class:`zoo.methods.watchlog.module.WatchLogModule` (reads its detection head, decoder,
calibrated ``threshold`` and technique index).

Explanations (ours): ``verdict: ... ; technique: ... ; evidence: #i ...``. By default (``decoder.evidence=head``,
``decoder.technique=retrieval``) the evidence is the event head's highest-scoring frames
(:func:`techniques.head_evidence`) and the technique is retrieved from the training techniques with an explicit
``unknown`` (:mod:`techniques`); the verdict is the LM's (or the head's with ``decoder.ground_verdict``). ``lm`` for
either key keeps what the language model generated.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from zoo.core.data import DataError
from zoo.methods.watchlog import techniques as tq
from zoo.methods.watchlog.datamodule import WindowDataset
from zoo.methods.watchlog.decoder import greedy_generate, parse_explanation
from zoo.methods.watchlog.event_images import save_frames_png
from zoo.methods.watchlog.windows import describe_event, load_event_log, make_windows

TECHNIQUE_BUFFERS = ("technique_prototypes", "technique_names", "technique_tau")
NAME_BYTES = 24
PREDICT_BATCH = 32  # windows per detection forward and per generate call of zoo predict (benchmarks/watchlog.py)


def _drop_empty_index(module, state_dict, prefix, local_metadata) -> None:
    """``state_dict`` post-hook: a model without a technique index stores none (older packages load unchanged)."""
    if module.technique_prototypes.shape[0] == 0:
        for k in TECHNIQUE_BUFFERS:
            state_dict.pop(prefix + k, None)


def _fill_missing_index(
    module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
) -> None:
    """``load_state_dict`` pre-hook: weights saved without an index load into a model without one."""
    if prefix + "technique_prototypes" not in state_dict and module.technique_prototypes.shape[0] == 0:
        for k in TECHNIQUE_BUFFERS:
            state_dict[prefix + k] = getattr(module, k)


class Inference:
    """Window verdicts, explanations, technique naming and ``predict_cli`` of :class:`WatchLogModule` (a mixin)."""

    def init_technique_index(self, n_techniques: int, dim: int) -> None:
        """Register the retrieval index (ours): ``technique_prototypes`` ``(K, dim)``, ``technique_names``
        ``(K, 24)`` ASCII bytes and ``technique_tau`` (``inf`` = always ``unknown`` until fitted)."""
        self.register_buffer("technique_prototypes", torch.zeros(n_techniques, dim))
        self.register_buffer("technique_names", torch.zeros(n_techniques, NAME_BYTES, dtype=torch.uint8))
        self.register_buffer("technique_tau", torch.tensor(float("inf")))
        self.register_state_dict_post_hook(_drop_empty_index)
        self.register_load_state_dict_pre_hook(_fill_missing_index)

    def technique_list(self) -> list[str]:
        """The indexed technique ids, in prototype order."""
        return [bytes(r for r in row.tolist() if r).decode("ascii") for row in self.technique_names]

    @torch.no_grad()
    def fit_technique_index(self, ds: WindowDataset) -> dict:
        """Build the index from the malicious windows of ``ds`` (the training split) and choose ``tau`` by
        leave-one-recording-out (:func:`techniques.calibrate_tau`). Returns ``{"techniques", "tau"}``."""
        mal = [w for w in ds.windows if w.label == 1]
        if not mal or self.hparams.stage == "pretrain":
            return {"techniques": 0, "tau": float(self.technique_tau)}
        sub = WindowDataset(mal, ds.log, ds.renderer, ds.hits, ds.n_frames, ds.token_len, ds.vocab_size, ds.render)
        vecs = np.stack([p["vector"] for p in self.predict_dataset(sub, explain=False)])
        techs = [w.technique.lower() for w in mal]
        names, protos = tq.prototypes(vecs, techs)
        tau = tq.calibrate_tau(vecs, techs, [w.recording for w in mal])
        codes = torch.zeros(len(names), NAME_BYTES, dtype=torch.uint8)
        for i, n in enumerate(names):
            b = n.encode("ascii")[:NAME_BYTES]
            codes[i, : len(b)] = torch.tensor(list(b), dtype=torch.uint8)
        dev = self.technique_tau.device
        self.technique_prototypes = torch.tensor(protos, dtype=torch.float32, device=dev)
        self.technique_names = codes.to(dev)
        self.technique_tau = torch.tensor(tau, device=dev)
        self.hparams["n_techniques"] = len(names)  # the checkpoint's hparams size the index its weights hold
        return {"techniques": len(names), "tau": tau}

    @torch.no_grad()
    def predict_dataset(self, ds: WindowDataset, batch_size: int = PREDICT_BATCH, explain: bool = True) -> list[dict]:
        """Verdicts (and explanations when a decoder is present) for every window of ``ds``.

        Returns:
            Per window: ``{"prob", "event_prob" (list over frames), "vector" (the window vector, numpy ``(D,)``),
            "technique" (retrieved, or ``unknown``), "evidence_head" (:func:`techniques.head_evidence`),
            "explanation" (str or None), "generated" (the LM's own text), "parsed"}``.
        """
        from torch.utils.data import DataLoader

        self.eval()
        out = []
        for batch in DataLoader(ds, batch_size=batch_size):
            batch = {k: v.to(self.device) if torch.is_tensor(v) else v for k, v in batch.items()}
            det = self._detection({**batch, "label": torch.full_like(batch["label"], -1)})
            texts = [None] * len(batch["label"])
            if explain and self.lm is not None:
                texts = self._explain(det)
            probs = torch.sigmoid(det["win_logit"]).tolist()
            ev = torch.sigmoid(det["ev_logit"]).tolist()
            vec = self.window_vectors(det)
            names = self.name_techniques(vec)
            for p, e, t, v, n, m in zip(probs, ev, texts, vec, names, det["mask"].sum(1).tolist()):
                row = {
                    "prob": p,
                    "event_prob": e,
                    "vector": v,
                    "technique": n,
                    "evidence_head": tq.head_evidence(e, int(m)),
                    "generated": t,
                }
                row["explanation"] = self._ground(row) if t is not None else None
                row["parsed"] = parse_explanation(row["explanation"]) if t is not None else None
                out.append(row)
        return out

    @staticmethod
    def window_vectors(det: dict) -> np.ndarray:
        """``(B, D)`` window vectors: the mean of the real frames' vectors ``f_t`` (retrieval key, ours)."""
        m = det["mask"].to(det["frames_vec"].dtype)[..., None]
        return ((det["frames_vec"] * m).sum(1) / m.sum(1).clamp(min=1)).detach().cpu().numpy()

    def name_techniques(self, vectors: np.ndarray) -> list[str]:
        """Retrieved training technique per window vector, ``unknown`` below ``technique_tau`` or with no index."""
        return tq.name_techniques(
            vectors, self.technique_list(), self.technique_prototypes.double().cpu().numpy(), float(self.technique_tau)
        )

    def _ground(self, row: dict) -> str:
        """The explanation text: the LM's verdict, then technique and evidence from the configured sources."""
        if self.dec_cfg["evidence"] == "lm" and self.dec_cfg["technique"] == "lm":
            return row["generated"]
        gen = parse_explanation(row["generated"])
        verdict = gen["verdict"] if gen["verdict"] in ("malicious", "benign") else None
        if verdict is None:
            return row["generated"]
        evidence = row["evidence_head"] if self.dec_cfg["evidence"] == "head" else gen["evidence"]
        technique = row["technique"] if self.dec_cfg["technique"] == "retrieval" else gen["technique"]
        if verdict == "benign":
            return "verdict: benign ; technique: none ; evidence: none"
        cited = " ".join(f"#{i}" for i in evidence[:4]) or "none"
        return f"verdict: malicious ; technique: {technique} ; evidence: {cited}"

    def _explain(self, det: dict) -> list[str]:
        """Greedy explanations for a batch; with ``ground_verdict`` the detection verdict is forced first."""
        visual, n_new = self._visual(det), self.dec_cfg["max_new_tokens"]
        if not self.dec_cfg["ground_verdict"]:
            return greedy_generate(self.lm, self.builder, visual, n_new)
        flagged = torch.sigmoid(det["win_logit"]) >= self.threshold
        texts: list[str] = [""] * len(flagged)
        for verdict, rows in (("malicious", flagged), ("benign", ~flagged)):
            idx = rows.nonzero().flatten()
            if len(idx):
                gen = greedy_generate(self.lm, self.builder, visual[idx], n_new, prefix=f"verdict: {verdict} ;")
                for i, t in zip(idx.tolist(), gen):
                    texts[i] = t
        return texts

    predict_schema: ClassVar = {
        "threshold": float,
        "clip": (str, None),
        "windows": [
            {
                "window": int,
                "recording": str,
                "group": (str, None),
                "first_line": int,
                "last_line": int,
                "probability": float,
                "detector": str,
                "explanation_verdict": (str, None),
                "label": (str, None),
                "explanation": (str, None),
                "evidence": [{"index": int, "line": int, "event": str}],
            }
        ],
        "summary": {
            "windows": int,
            "flagged": int,
            "explained_malicious": (int, None),
            "labelled_malicious": (int, None),
        },
    }

    def predict_record(self, inputs: list[str], out_dir: str | None = None, batch_size: int = PREDICT_BATCH) -> dict:
        """``zoo predict watchlog.<tag> events.jsonl [labels.csv]``: a verdict and explanation per window.

        Windows are cut per ``group_by`` with this model's ``window``. Each window gives the generated verdict (from
        the explanation; ``explanation_verdict``), the detection head's probability and verdict against the
        threshold (``detector``), the label when the file has labels, and the explanation with the events it cites
        as evidence; ``summary`` counts them. With ``out_dir`` the clip of the most suspicious window is saved as
        ``<out_dir>/watchlog_clip.png`` (``clip``). ``batch_size`` windows go through the model and the greedy
        decoder at a time (1: one window as it arrives, as a stream would feed them).

        Raises:
            ValueError: no input file, or more than two. DataError: a malformed or empty events file, or a stage-1/2
                model (``pretrain``/``align``), whose detection head was never trained.
        """
        if self.hparams.stage in ("pretrain", "align"):
            number = ("pretrain", "align").index(self.hparams.stage) + 1
            raise DataError(
                f"zoo predict watchlog: this is a stage {number} model ({self.hparams.stage}) whose "
                "detection head was never trained, so its verdicts would mean nothing; predict with "
                "watchlog.mordor or a run of watchlog.yaml"
            )
        if not 1 <= len(inputs) <= 2:
            raise ValueError("usage: zoo predict <watchlog id> EVENTS.jsonl [LABELS.csv]")
        log = load_event_log(inputs[0], inputs[1] if len(inputs) > 1 else None)
        windows = make_windows(log, self.hparams.window, None, self.hparams.group_by)
        if not windows:
            raise DataError(f"{inputs[0]}: no events to explain")
        hits = [self.renderer.pixel_hits(e) for e in log.events]
        token_len = self.enc_cfg["token_len"] if self.enc_cfg["kind"] == "tokens" else 0
        ds = WindowDataset(
            windows,
            log,
            self.renderer,
            hits,
            self.hparams.window,
            token_len,
            self.enc_cfg["vocab_size"],
            render=self.enc_cfg["kind"] == "video",
        )
        preds = self.predict_dataset(ds, batch_size)
        s, thr = self.hparams.frame_stride, float(self.threshold)
        out = {"threshold": thr, "clip": None, "windows": []}
        for k, (w, p) in enumerate(zip(windows, preds)):
            generated = (p["parsed"] or {}).get("verdict")
            out["windows"].append(
                {
                    "window": k,
                    "recording": str(w.recording),
                    "group": str(w.group) if w.group else None,
                    "first_line": int(log.lines[w.event_idx[0]]),
                    "last_line": int(log.lines[w.event_idx[-1]]),
                    "probability": float(p["prob"]),
                    "detector": "malicious" if p["prob"] >= thr else "benign",
                    "explanation_verdict": generated if generated in ("malicious", "benign") else None,
                    "label": ("malicious" if w.label else "benign") if w.label >= 0 else None,
                    "explanation": p["explanation"],
                    "evidence": [
                        {
                            "index": i,
                            "line": int(log.lines[w.event_idx[i * s]]),
                            "event": describe_event(log.events[w.event_idx[i * s]]),
                        }
                        for i in (p["parsed"]["evidence"] if p["explanation"] is not None else [])
                        if 0 <= i * s < len(w.event_idx)
                    ],
                }
            )
        rows = out["windows"]
        out["summary"] = {
            "windows": len(rows),
            "flagged": sum(r["detector"] == "malicious" for r in rows),
            "explained_malicious": sum(r["explanation_verdict"] == "malicious" for r in rows)
            if self.lm is not None
            else None,
            "labelled_malicious": sum(w.label for w in windows)
            if windows and all(w.label >= 0 for w in windows)
            else None,
        }
        if out_dir is not None and windows:
            best = max(range(len(windows)), key=lambda k: preds[k]["prob"])
            item = ds[best]
            n = int(item["mask"].sum())
            save_frames_png(
                item["frames"][:n].numpy(),
                self.renderer,
                str(Path(out_dir) / "watchlog_clip.png"),
                [f"#{t} {describe_event(log.events[e])[:40]}" for t, e in enumerate(windows[best].event_idx)],
            )
            out["clip"] = str(Path(out_dir) / "watchlog_clip.png")
        return out

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record` as text: one line per window (with its explanation and cited events below it), a
        summary line, and where the clip went."""
        out = self.predict_record(inputs, out_dir)
        thr, lines = out["threshold"], []
        for r in out["windows"]:
            head = (
                f"window {r['window']} [{r['recording']} {r['group'] or '(no ' + self.hparams.group_by + ')'} "
                f"lines {r['first_line']}-{r['last_line']}]"
            )
            if r["explanation_verdict"]:
                head += (
                    f": {r['explanation_verdict']} (explanation); detector p={r['probability']:.3f} vs threshold "
                    f"{thr:.3f}: {r['detector']}"
                )
            else:
                head += f": {r['detector']} (detector p={r['probability']:.3f} vs threshold {thr:.3f})"
            lines.append(head + (f"; label: {r['label']}" if r["label"] else ""))
            if r["explanation"] is not None:
                lines.append(f"  explanation: {r['explanation']}")
                lines += [f"    #{e['index']} line {e['line']}: {e['event']}" for e in r["evidence"]]
        sm = out["summary"]
        summary = f"{sm['windows']} windows: the detector flags {sm['flagged']}"
        if sm["explained_malicious"] is not None:
            summary += f", the explanations say malicious for {sm['explained_malicious']}"
        if sm["labelled_malicious"] is not None:
            summary += f"; {sm['labelled_malicious']} are labelled malicious"
        lines.append(summary)
        if out["clip"]:
            best = max(out["windows"], key=lambda r: r["probability"])["window"]
            lines.append(f"saved the clip of window {best} to {out['clip']}")
        return "\n".join(lines)
