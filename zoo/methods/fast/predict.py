"""What ``zoo predict fast-sae.<id> "text"`` prints: per-token SAE error and the top features of one message."""
from __future__ import annotations

import torch

from zoo.methods.fast.datamodule import template_token_ids
from zoo.methods.fast.pipelines import harvest
from zoo.models.chat import encode_rendered


@torch.no_grad()
def describe(module, text: str, top: int = 3) -> str:
    """Render ``text`` as a user turn (with the assistant generation prompt), read block ``layer`` of the LM and
    report each token's squared reconstruction error per dimension, ``Σ_k (x_k − x̂_k)² / D``, with chat-template
    tokens marked ``*``, then the ``top`` features by summed activation with the token where each peaks."""
    model, tok = module.lm_and_tokenizer()
    _, ids, _ = encode_rendered(tok, [{"role": "user", "content": text}], add_generation_prompt=True)
    layer = int(module.hparams.layer)
    x = harvest(model, [ids], [layer], pad_id=tok.pad_token_id)[layer][0]
    f = module.encode(x)
    err = ((x - module.decode(f)) ** 2).sum(-1) / x.shape[-1]
    special = set(template_token_ids(tok))
    pieces = [repr(tok.decode([i]))[1:-1] for i in ids]  # readable: '\\n' for a newline, spaces kept
    lines = [f"{module.hparams.sae} SAE on layer {layer} of {module.hparams.lm}; {text!r}",
             f"{'pos':>4} {'token':<16} {'sq. error / D':>14}  (* = chat-template token)"]
    for j, (tid, piece) in enumerate(zip(ids, pieces)):
        lines.append(f"{j:>4} {piece[:16]:<16} {float(err[j]):>14.5f}{'  *' if tid in special else ''}")
    total = f.sum(0)
    lines.append(f"top-{top} features (summed activation; token where it peaks):")
    for k in total.topk(top).indices.tolist():
        j = int(f[:, k].argmax())
        lines.append(f"  feature {k:>5}: sum {float(total[k]):.3f}, active on {int((f[:, k] > 0).sum())} of "
                     f"{len(ids)} tokens, peak {float(f[j, k]):.3f} at '{pieces[j]}' (pos {j})")
    return "\n".join(lines)
