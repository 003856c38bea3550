"""Attacking held-out texts and scoring the rewrites: the experimenter's side (it holds the detector and key).

* :func:`score`: z of each text re-tokenised (what a detector sees), similarity to the marked text, removal and
  success.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from zoo.methods.rlcracker.metrics import pass_at_k, removed, succeeded
from zoo.methods.rlcracker.prompts import encode_plain
from zoo.methods.rlcracker.rewards import similarity
from zoo.methods.rlcracker.rewrite import rewrite_with_kl
from zoo.methods.rlcracker.watermark import build_watermark


def score(texts: Sequence[str], marked: Sequence[str], watermark, tokenizer) -> dict[str, torch.Tensor]:
    """Per text: ``z`` (re-tokenised), ``sim`` (MiniLM cosine to the marked text), ``removed``, ``success``."""
    z = torch.tensor([watermark.z_score(encode_plain(tokenizer, t)) for t in texts], dtype=torch.float)
    sim = similarity(texts, marked)
    return {
        "z": z,
        "sim": sim,
        "removed": removed(z, watermark.threshold),
        "success": succeeded(z, sim, watermark.threshold),
    }


def heldout_report(
    module, rows: Sequence[dict], watermark_name: str, samples: int = 1, reference=None
) -> dict[str, float]:
    """Removal, success, similarity, mean z before/after and Pass@samples of the module's rewrites of ``rows``."""
    wm = build_watermark(watermark_name, len(module.tokenizer))
    marked = [r["watermarked"] for r in rows]
    texts, kl = rewrite_with_kl(module, marked, samples, reference=reference)
    s = score(texts, [m for m in marked for _ in range(samples)], wm, module.tokenizer)
    z0 = torch.tensor([wm.z_score(encode_plain(module.tokenizer, m)) for m in marked])
    return {
        "removal": float(s["removed"].float().mean()),
        "success": float(s["success"].float().mean()),
        "sim": float(s["sim"].mean()),
        "z_before": float(z0.nanmean()),
        "z_after": float(s["z"].nanmean()),
        f"pass_at_{samples}": pass_at_k(s["success"].view(len(marked), samples)),
        "kl": kl,
    }


def predict_record(module, text: str) -> dict:
    """The rewrite of one marked text with the watermark's z before and after (and its threshold) and the MiniLM
    similarity of the rewrite to the text (``zoo predict``): ``{"text", "rewrite", "watermark", "z_before",
    "z_after", "threshold", "similarity"}``."""
    wm = build_watermark(module.hparams.watermark, len(module.tokenizer))
    torch.manual_seed(0)
    rewrite, _ = rewrite_with_kl(module, [text.strip()], 1, reference=module.lm)
    z0 = wm.z_score(encode_plain(module.tokenizer, text.strip()))
    s = score(rewrite, [text.strip()], wm, module.tokenizer)
    return {
        "text": text.strip(),
        "rewrite": rewrite[0],
        "watermark": wm.name,
        "z_before": float(z0),
        "z_after": float(s["z"][0]),
        "threshold": float(wm.threshold),
        "similarity": float(s["sim"][0]),
    }


def predict_lines(d: dict) -> str:
    """:func:`predict_record`'s record as the two lines ``zoo predict`` prints."""
    return (
        f"rewrite: {d['rewrite']}\n{d['watermark']} z before {d['z_before']:.2f} -> after {d['z_after']:.2f} "
        f"(threshold {d['threshold']}); similarity {d['similarity']:.3f}"
    )
