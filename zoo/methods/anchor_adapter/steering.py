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


def overlap_scores(keys: torch.Tensor, top: torch.Tensor, answers: list[torch.Tensor]) -> torch.Tensor:
    """The authors' neuron score per prompt, averaged over prompts (``identify_task_relevant_neurons``).

    ``score_j = mean_x |k_j(x)| (1 + 10 overlap_j(x))`` with ``overlap_j(x) = |T_j ∩ A(x)| / |A(x)|``: ``T_j`` the
    set of neuron ``j``'s top tokens, ``A(x)`` the set of prompt ``x``'s answer tokens. The overlap is normalised per
    prompt by the number of distinct answer tokens, as the authors do; with one prompt this is their score exactly
    (they score on the first test case only; several prompts are averaged here, ours).

    Args:
        keys: ``[N, d_ff]`` key activations ``k(x)`` at the last prompt token of N prompts (sign is dropped).
        top: ``[d_ff, K]`` token ids of each neuron's top-K vocabulary projection.
        answers: N 1-D tensors of answer token ids (repeats count once).

    Returns:
        ``[d_ff]`` float scores.

    Raises:
        ValueError: ``len(answers) != N`` or an empty answer.
    """
    if len(answers) != keys.shape[0]:
        raise ValueError(f"{len(answers)} answers for {keys.shape[0]} prompts")
    total = torch.zeros(keys.shape[1], dtype=torch.float32, device=keys.device)
    for k, ans in zip(keys.abs().float(), answers):
        ans = torch.unique(ans.to(top.device))
        if ans.numel() == 0:
            raise ValueError("an answer with no tokens")
        # a top-K list holds distinct ids, so the matches count |T_j ∩ A(x)|
        overlap = torch.isin(top, ans).sum(-1).float() / ans.numel()
        total += k * (1 + 10 * overlap)
    return total / keys.shape[0]


@torch.no_grad()
def neuron_scores(model, tok, items, layer: int, top_tokens: int = 10) -> torch.Tensor:
    """Neuron scores of ``layer`` over ``items`` (:func:`overlap_scores`), ``[d_ff]``.

    ``k(x)``: the input of ``down_proj`` at the last prompt token (prompts end in `` \\boxed{``); ``T_j``: the
    top-``top_tokens`` token ids of ``softmax(W_U RMSNorm(v_j))``, ``v_j = W_down[:, j]`` (ids directly; the authors
    decode each token and re-encode it, which gives the same id for tokens that round-trip); ``A(x)``: the token ids
    of the item's answer string alone (the authors' ``tokenizer.encode(str(answer), add_special_tokens=False)``).
    """
    layers, norm, head = decoder(model)
    down = layers[layer].mlp.down_proj
    device = next(model.parameters()).device
    ids, mask, _ = answer_batch(tok, items, device)
    keys = []
    h = down.register_forward_pre_hook(lambda m, a: keys.append(a[0][:, -1]))
    try:
        model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0))
    finally:
        h.remove()
    d_ff = keys[0].shape[-1]
    values = down(torch.eye(d_ff, device=device, dtype=next(down.parameters()).dtype))  # [d_ff, D]: row j = v_j
    top = head(norm(values)).topk(top_tokens, -1).indices  # [d_ff, top_tokens]
    answers = [torch.tensor(tok.encode(str(it["answer"]), add_special_tokens=False)) for it in items]
    return overlap_scores(keys[0], top, answers)


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
