"""WatchLog inference: verdicts and generated explanations for every window of a data set, and ``zoo predict`` on an
events file. A mixin of :class:`zoo.methods.watchlog.module.WatchLogModule` (reads its detection head, decoder and
calibrated ``threshold``).
"""
from __future__ import annotations

from pathlib import Path

import torch

from zoo.core.data import DataError
from zoo.methods.watchlog.datamodule import WindowDataset
from zoo.methods.watchlog.decoder import greedy_generate, parse_explanation
from zoo.methods.watchlog.render import save_frames_png
from zoo.methods.watchlog.windows import describe_event, load_event_log, make_windows


class Inference:
    """Window verdicts, explanations and ``predict_cli`` of :class:`WatchLogModule` (a mixin)."""

    @torch.no_grad()
    def predict_dataset(self, ds: WindowDataset, batch_size: int = 32, explain: bool = True) -> list[dict]:
        """Verdicts (and explanations when a decoder is present) for every window of ``ds``.

        Returns:
            Per window: ``{"prob", "event_prob" (list over frames), "explanation" (str or None), "parsed"}``.
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
            for p, e, t in zip(probs, ev, texts):
                out.append({"prob": p, "event_prob": e, "explanation": t,
                            "parsed": parse_explanation(t) if t is not None else None})
        return out

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

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """``zoo predict watchlog.<tag> events.jsonl [labels.csv]``: a verdict and explanation per window.

        Windows are cut per ``group_by`` with this model's ``window``. Each window's line gives the generated
        verdict (from the explanation), the detection head's probability, threshold and verdict, and the label when
        the file has labels; a summary line ends the output. With ``out_dir`` the clip of the most suspicious window
        is saved as ``<out_dir>/watchlog_clip.png``.

        Raises:
            ValueError: no input file, or more than two. DataError: a malformed or empty events file.
        """
        if not 1 <= len(inputs) <= 2:
            raise ValueError("usage: zoo predict <watchlog id> EVENTS.jsonl [LABELS.csv]")
        log = load_event_log(inputs[0], inputs[1] if len(inputs) > 1 else None)
        windows = make_windows(log, self.hparams.window, None, self.hparams.group_by)
        if not windows:
            raise DataError(f"{inputs[0]}: no events to explain")
        hits = [self.renderer.pixel_hits(e) for e in log.events]
        token_len = self.enc_cfg["token_len"] if self.enc_cfg["kind"] == "tokens" else 0
        ds = WindowDataset(windows, log, self.renderer, hits, self.hparams.window, token_len,
                           self.enc_cfg["vocab_size"], render=self.enc_cfg["kind"] == "video")
        preds = self.predict_dataset(ds)
        lines = []
        s, thr = self.hparams.frame_stride, float(self.threshold)
        said, flagged = 0, 0
        for k, (w, p) in enumerate(zip(windows, preds)):
            detector = "malicious" if p["prob"] >= thr else "benign"
            first, last = log.lines[w.event_idx[0]], log.lines[w.event_idx[-1]]
            head = f"window {k} [{w.recording} {w.group or '(no ' + self.hparams.group_by + ')'} lines {first}-{last}]"
            generated = (p["parsed"] or {}).get("verdict")
            if generated in ("malicious", "benign"):
                head += f": {generated} (explanation); detector p={p['prob']:.3f} vs threshold {thr:.3f}: {detector}"
            else:
                head += f": {detector} (detector p={p['prob']:.3f} vs threshold {thr:.3f})"
            if w.label >= 0:
                head += f"; label: {'malicious' if w.label else 'benign'}"
            lines.append(head)
            said += generated == "malicious"
            flagged += detector == "malicious"
            if p["explanation"] is not None:
                lines.append(f"  explanation: {p['explanation']}")
                for i in p["parsed"]["evidence"]:
                    if 0 <= i * s < len(w.event_idx):
                        e = w.event_idx[i * s]
                        lines.append(f"    #{i} line {log.lines[e]}: {describe_event(log.events[e])}")
        summary = f"{len(windows)} windows: the detector flags {flagged}"
        if self.lm is not None:
            summary += f", the explanations say malicious for {said}"
        if windows and all(w.label >= 0 for w in windows):
            summary += f"; {sum(w.label for w in windows)} are labelled malicious"
        lines.append(summary)
        if out_dir is not None and windows:
            best = max(range(len(windows)), key=lambda k: preds[k]["prob"])
            item = ds[best]
            n = int(item["mask"].sum())
            save_frames_png(item["frames"][:n].numpy(), self.renderer, str(Path(out_dir) / "watchlog_clip.png"),
                            [f"#{t} {describe_event(log.events[e])[:40]}" for t, e in
                             enumerate(windows[best].event_idx)])
            lines.append(f"saved the clip of window {best} to {Path(out_dir) / 'watchlog_clip.png'}")
        return "\n".join(lines)
