"""MLP key scaling (Yan et al. §5, the authors' ``steering.py``; notes §6.3): bidirectional steering by neuron keys.

A SwiGLU MLP is ``W_down k(x)`` with keys ``k(x) = SiLU(W_gate x) * (W_up x)`` in ``R^{d_ff}``; neuron ``j`` writes
the value vector ``v_j = W_down[:, j]``. Scaling ``k_j <- s k_j`` (a pre-hook on ``down_proj``) with ``s = 1`` is the
identity and ``s = 0`` equals zeroing column ``j`` of ``W_down``.
"""

from __future__ import annotations

import contextlib

import torch

from zoo.methods.anchor_adapter.chain_sum import is_correct, prompt_text
from zoo.methods.anchor_adapter.policy import answer_batch, decoder


@contextlib.contextmanager
def scaled_keys(down_proj: torch.nn.Module, idx: torch.Tensor, s: float):
    """Multiply the keys ``idx`` (input features of ``down_proj``) by ``s`` on every call inside the block."""

    def pre(m, args):
        x = args[0].clone()
        x[..., idx] = x[..., idx] * s
        return (x, *args[1:])

    h = down_proj.register_forward_pre_hook(pre)
    try:
        yield
    finally:
        h.remove()


@torch.no_grad()
def neuron_scores(model, tok, items, layer: int, top_tokens: int = 10) -> torch.Tensor:
    """``score_j = mean_x |k_j(x)| (1 + 10 overlap_j)`` at the last prompt token, ``[d_ff]``.

    ``overlap_j``: share of the top-``top_tokens`` tokens of ``softmax(W_U RMSNorm(v_j))`` that are answer tokens
    (the first tokens of the items' answers).
    """
    layers, norm, head = decoder(model)
    down = layers[layer].mlp.down_proj
    device = next(model.parameters()).device
    ids, mask, target = answer_batch(tok, items, device)
    keys = []
    h = down.register_forward_pre_hook(lambda m, a: keys.append(a[0][:, -1].abs()))
    try:
        model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0))
    finally:
        h.remove()
    k = keys[0].float().mean(0)
    d_ff = k.numel()
    values = down(torch.eye(d_ff, device=device, dtype=next(down.parameters()).dtype))  # [d_ff, D]: row j = v_j
    top = head(norm(values)).topk(top_tokens, -1).indices  # [d_ff, top_tokens]
    answer_tokens = torch.unique(target)
    overlap = torch.isin(top, answer_tokens).float().mean(-1)
    return k * (1 + 10 * overlap)


def _accuracy(model, tok, items, max_new_tokens) -> float:
    from zoo.methods.anchor_adapter.policy import generate_replies

    replies = generate_replies(model, tok, [prompt_text(it["question"]) for it in items], max_new_tokens)
    return sum(is_correct(r, it["answer"]) for r, it in zip(replies, items)) / max(len(items), 1)


def key_scaling(
    model, tok, items, layer: int, scales: list[float], top_k: int = 10, max_new_tokens: int = 32, seed: int = 0
) -> dict:
    """Greedy accuracy on ``items`` vs ``s`` for the top-``top_k`` neurons of ``layer`` and two controls (random
    neurons of ``layer``; the top neurons of the layer after it, or before it for the last layer).

    Returns:
        ``{"layer", "control_layer", "neurons", "curves": {setting: {s: accuracy}}}``.
    """
    layers, _, _ = decoder(model)
    other = layer + 1 if layer + 1 < len(layers) else layer - 1
    top = neuron_scores(model, tok, items, layer).topk(top_k).indices
    d_ff = neuron_scores(model, tok, items[:1], layer).numel()
    rand = torch.randperm(d_ff, generator=torch.Generator().manual_seed(seed))[:top_k]
    top_other = neuron_scores(model, tok, items, other).topk(top_k).indices
    settings = {
        f"anchor L{layer} top-{top_k}": (layer, top),
        f"random L{layer}": (layer, rand),
        f"control L{other} top-{top_k}": (other, top_other),
    }
    curves = {}
    for name, (lay, idx) in settings.items():
        curves[name] = {}
        for s in scales:
            with scaled_keys(layers[lay].mlp.down_proj, idx.to(next(model.parameters()).device), s):
                curves[name][s] = _accuracy(model, tok, items, max_new_tokens)
    return {"layer": layer, "control_layer": other, "neurons": top.tolist(), "curves": curves}
