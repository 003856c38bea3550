"""What ``zoo predict fast-sae.<id> "text"`` prints: per-token SAE error and the top features of one message."""

from __future__ import annotations

import torch

from zoo.methods.fast.datamodule import template_mask
from zoo.methods.fast.pipelines import harvest
from zoo.models.chat import encode_rendered


@torch.no_grad()
def describe(module, text: str, top: int = 3) -> dict:
    """Render ``text`` as a user turn (with the assistant generation prompt), read block ``layer`` of the LM and
    report each token's squared reconstruction error per dimension, ``Σ_k (x_k − x̂_k)² / D``, with chat-template
    tokens marked (``template``), then the ``top`` features by summed activation with the token where each peaks.

    Returns:
        ``{"text", "sae", "layer", "lm", "tokens": [{"pos", "token", "sq_error", "template"}], "features": [{"feature",
        "sum", "active_tokens", "peak", "peak_pos"}]}``.
    """
    model, tok = module.lm_and_tokenizer()
    _, ids, _ = encode_rendered(tok, [{"role": "user", "content": text}], add_generation_prompt=True)
    layer = int(module.hparams.layer)
    x = harvest(model, [ids], [layer], pad_id=tok.pad_token_id)[layer][0]
    f = module.encode(x)
    err = ((x - module.decode(f)) ** 2).sum(-1) / x.shape[-1]
    marked = template_mask(tok, ids).tolist()
    pieces = [repr(tok.decode([i]))[1:-1] for i in ids]  # readable: '\\n' for a newline, spaces kept
    total = f.sum(0)
    features = []
    for k in total.topk(top).indices.tolist():
        j = int(f[:, k].argmax())
        features.append(
            {
                "feature": k,
                "sum": float(total[k]),
                "active_tokens": int((f[:, k] > 0).sum()),
                "peak": float(f[j, k]),
                "peak_pos": j,
            }
        )
    return {
        "text": text,
        "sae": module.hparams.sae,
        "layer": layer,
        "lm": module.hparams.lm,
        "tokens": [
            {"pos": j, "token": piece, "sq_error": float(err[j]), "template": flag}
            for j, (flag, piece) in enumerate(zip(marked, pieces))
        ],
        "features": features,
    }


def describe_text(d: dict) -> str:
    """:func:`describe`'s record as the table ``zoo predict`` prints (template tokens marked ``*``)."""
    lines = [
        f"{d['sae']} SAE on layer {d['layer']} of {d['lm']}; {d['text']!r}",
        f"{'pos':>4} {'token':<16} {'sq. error / D':>14}  (* = chat-template token)",
    ]
    lines += [
        f"{t['pos']:>4} {t['token'][:16]:<16} {t['sq_error']:>14.5f}{'  *' if t['template'] else ''}"
        for t in d["tokens"]
    ]
    lines.append(f"top-{len(d['features'])} features (summed activation; token where it peaks):")
    lines += [
        f"  feature {f['feature']:>5}: sum {f['sum']:.3f}, active on {f['active_tokens']} of {len(d['tokens'])} "
        f"tokens, peak {f['peak']:.3f} at '{d['tokens'][f['peak_pos']]['token']}' (pos {f['peak_pos']})"
        for f in d["features"]
    ]
    return "\n".join(lines)
