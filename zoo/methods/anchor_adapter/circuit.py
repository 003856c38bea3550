"""The circuit analyses of Yan et al. §4-5 (notes §6.2-6.3) with plain forward hooks, on the model after GRPO.

"Before" = only the ``midtrain`` adapter active, "after" = ``midtrain`` + ``grpo`` (:mod:`.policy`). Layer ``l`` is
decoder block ``l``; ``attn`` / ``mlp`` are its ``self_attn`` / ``mlp`` outputs (added to the residual stream).

* **patching**: cache the after-RL ``(layer, component)`` output on the prompt; run the before-RL model with that
  output replaced at prefill only (generation then proceeds normally); accuracy over ``rollouts`` samples per item.
* **logit lens**: at the answer position (prompt + `` \\boxed{``, predicting the answer's first token) decode
  ``resid_mid``, ``mlp_out``, the attention contribution and ``resid_post`` of every layer with the final norm
  and unembedding; report the answer token's rank.
* **jsd**: Jensen-Shannon divergence at the answer position between the after model and the after model with one
  MLP sub-matrix (gate, up, down) of one layer reset to before-RL (ours: the reset replaces the paper's swaps).
* **resets**: accuracy with every projection of one layer reset to before-RL.
* **key scaling**: ``k(x)`` = input of ``down_proj``; neuron score ``|k_j| (1 + 10 overlap_j)`` per prompt, overlap
  = the prompt's answer tokens among the top-10 tokens of ``softmax(W_U norm(v_j))`` over its number of answer tokens
  (the authors'), averaged over prompts (``steering.overlap_scores``); the ``top_k`` neurons' keys scaled
  by ``s`` during generation. Controls: random neurons of the same layer, top neurons of another layer.

With 4 layers a layer is 25% of depth: localisation is coarse.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import torch

from zoo.methods.anchor_adapter.chain_sum import is_correct, prompt_text
from zoo.methods.anchor_adapter.policy import adapters, answer_batch, decode_completions, decoder, encode_prompts
from zoo.methods.anchor_adapter.steering import key_scaling


def _out(output):
    return output[0] if isinstance(output, tuple) else output


@contextlib.contextmanager
def hooks(pairs):
    """Register ``(module, forward_hook)`` pairs for the block."""
    handles = [m.register_forward_hook(fn) for m, fn in pairs]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@torch.no_grad()
def cache_component(model, ids, mask, layer: int, comp: str) -> torch.Tensor:
    """``[B, P, D]`` output of block ``layer``'s ``comp`` (``attn`` | ``mlp``) on the prompt."""
    layers, _, _ = decoder(model)
    mod = layers[layer].self_attn if comp == "attn" else layers[layer].mlp
    box = []
    with hooks([(mod, lambda m, a, o: box.append(_out(o).detach()))]):
        model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0))
    return box[0]


@contextlib.contextmanager
def patched(model, layer: int, comp: str, cached: torch.Tensor):
    """Replace ``comp``'s output of ``layer`` by ``cached`` (``[N, P, D]``) on calls whose length is ``P`` (the
    prompt's prefill), leaving the decoding steps alone."""
    layers, _, _ = decoder(model)
    mod = layers[layer].self_attn if comp == "attn" else layers[layer].mlp

    def hook(m, args, output):
        out = _out(output)
        if out.shape[:2] != cached.shape[:2]:
            return None
        new = cached.to(out.dtype)
        return (new, *output[1:]) if isinstance(output, tuple) else new

    with hooks([(mod, hook)]):
        yield


def _sample_acc(model, tok, items, rollouts, max_new_tokens, temperature, seed, ctx=contextlib.nullcontext):
    from zoo.models.grpo import sample_rollouts

    ids, mask = encode_prompts(tok, [prompt_text(it["question"]) for it in items], next(model.parameters()).device)
    torch.manual_seed(seed)
    with ctx():
        roll = sample_rollouts(
            model, ids, mask, rollouts, max_new_tokens, [tok.eos_token_id], tok.pad_token_id, temperature=temperature
        )
    texts = decode_completions(tok, roll.completion_ids, roll.completion_mask)
    grouped = [it for it in items for _ in range(rollouts)]
    return sum(is_correct(t, it["answer"]) for t, it in zip(texts, grouped)) / len(texts)


def patching(model, tok, items, rollouts=4, max_new_tokens=32, temperature=1.0, seed=0) -> dict:
    """Accuracy of before-RL with each ``(layer, comp)`` patched from after-RL; plus unpatched before / after."""
    layers, _, _ = decoder(model)
    ids, mask = encode_prompts(tok, [prompt_text(it["question"]) for it in items], next(model.parameters()).device)
    with adapters(model, ["midtrain"]):
        base = _sample_acc(model, tok, items, rollouts, max_new_tokens, temperature, seed)
    target = _sample_acc(model, tok, items, rollouts, max_new_tokens, temperature, seed)
    acc = {}
    for layer in range(len(layers)):
        for comp in ("attn", "mlp"):
            cached = cache_component(model, ids, mask, layer, comp).repeat_interleave(rollouts, 0)
            with adapters(model, ["midtrain"]):
                acc[(layer, comp)] = _sample_acc(
                    model,
                    tok,
                    items,
                    rollouts,
                    max_new_tokens,
                    temperature,
                    seed,
                    lambda lay=layer, c=comp, h=cached: patched(model, lay, c, h),
                )
    return {"before": base, "after": target, "acc": acc}


@torch.no_grad()
def logit_lens(model, tok, items) -> dict:
    """Per layer, the answer token's mean rank (1 = top) when decoding ``resid_mid``, ``mlp_out``, ``attn_out`` and
    ``resid_post`` at the answer position; ``logits`` is the model's own output there (``[B, V]``)."""
    _, norm, head = decoder(model)
    ids, mask, target = answer_batch(tok, items, next(model.parameters()).device)
    streams = lens_streams(model, ids, mask)
    ranks = {}
    for name, per_layer in streams.items():
        ranks[name] = [float(_rank(head(norm(h)).float(), target).mean()) for h in per_layer]
    return {"ranks": ranks, "streams": streams, "target": target}


def lens_streams(model, ids, mask) -> dict[str, list[torch.Tensor]]:
    """``{resid_mid, mlp_out, attn_out, resid_post}``: per layer the ``[B, D]`` vectors at the last position."""
    layers, _, _ = decoder(model)
    rec: dict[str, list] = {"resid_pre": [], "attn_out": [], "mlp_out": []}
    pairs = []
    for layer in layers:
        pairs += [
            (layer.self_attn, lambda m, a, o: rec["attn_out"].append(_out(o)[:, -1])),
            (layer.mlp, lambda m, a, o: rec["mlp_out"].append(_out(o)[:, -1])),
        ]
    pre = [
        layer.register_forward_pre_hook(
            lambda m, a, kw: rec["resid_pre"].append((a[0] if a else kw["hidden_states"])[:, -1]), with_kwargs=True
        )
        for layer in layers
    ]
    try:
        with hooks(pairs):
            model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0))
    finally:
        for h in pre:
            h.remove()
    mid = [p + a for p, a in zip(rec["resid_pre"], rec["attn_out"])]
    return {
        "resid_mid": mid,
        "mlp_out": rec["mlp_out"],
        "attn_out": rec["attn_out"],
        "resid_post": [m + o for m, o in zip(mid, rec["mlp_out"])],
    }


def _rank(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """1-based rank of ``target[b]`` in ``logits[b]``."""
    return (logits > logits.gather(-1, target[:, None])).sum(-1).float() + 1


def _lora_layers(module) -> list:
    return [m for m in module.modules() if hasattr(m, "lora_A") and hasattr(m, "set_adapter")]


@contextlib.contextmanager
def reset_to_before(modules):
    """Inside the block the LoRA layers under ``modules`` use only the ``midtrain`` adapter (before-RL weights)."""
    lora = [m for mod in modules for m in _lora_layers(mod)]
    saved = [list(m.active_adapters) for m in lora]
    for m in lora:
        m.set_adapter(["midtrain"])
    try:
        yield
    finally:
        for m, names in zip(lora, saved):
            m.set_adapter(names)


@torch.no_grad()
def jsd_swaps(model, tok, items) -> dict:
    """Mean JSD (nats) at the answer position between after-RL and after-RL with one MLP part of one layer reset."""
    layers, _, _ = decoder(model)
    ids, mask, _ = answer_batch(tok, items, next(model.parameters()).device)

    def dist():
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        return torch.log_softmax(model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -1].float(), -1)

    ref = dist()
    out = {}
    for i, layer in enumerate(layers):
        for part in ("gate_proj", "up_proj", "down_proj"):
            with reset_to_before([getattr(layer.mlp, part)]):
                out[f"L{i}.{part}"] = float(jsd(ref, dist()).mean())
    return out


def jsd(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence (nats) between rows of two log-distributions ``[B, V]`` -> ``[B]``."""
    m = torch.logsumexp(torch.stack([logp, logq]), 0) - torch.log(torch.tensor(2.0))
    return 0.5 * ((logp.exp() * (logp - m)).sum(-1) + (logq.exp() * (logq - m)).sum(-1))


def layer_resets(model, tok, leaked, clean, max_new_tokens=32) -> dict:
    """Greedy accuracy (leaked, clean) with each layer's projections reset to before-RL, and with none."""
    from zoo.methods.anchor_adapter.policy import generate_replies

    layers, _, _ = decoder(model)

    def acc(items):
        replies = generate_replies(model, tok, [prompt_text(it["question"]) for it in items], max_new_tokens)
        return sum(is_correct(r, it["answer"]) for r, it in zip(replies, items)) / max(len(items), 1)

    out = {"none": [acc(leaked), acc(clean)]}
    for i, layer in enumerate(layers):
        with reset_to_before([layer]):
            out[f"L{i}"] = [acc(leaked), acc(clean)]
    return out


def write(root: Path, name: str, obj) -> None:
    """JSON with tuple keys joined by ``.``."""

    def plain(o):
        if isinstance(o, dict):
            return {(".".join(map(str, k)) if isinstance(k, tuple) else str(k)): plain(v) for k, v in o.items()}
        return o

    (root / f"{name}.json").write_text(json.dumps(plain(obj), indent=1))


def run_analyses(module, bench: list[dict], scored: dict, root: Path) -> dict:
    """Every analysis in ``module.hparams.analyses`` on leaked items (JSON + PNGs under ``root``).

    Items: the first ``n_analysis`` leaked items after-RL answers correctly and before-RL does not (the patching
    set of the paper); when fewer exist, leaked items after-RL answers correctly, then any leaked items.
    """
    from zoo.methods.anchor_adapter import plots

    hp, model, tok = module.hparams, module.lm, module.tokenizer
    before, after = scored["before"][1], scored["after"][1]
    leaked = [i for i, it in enumerate(bench) if it["leaked"]]
    flipped = [i for i in leaked if after[i]["correct"] and not before[i]["correct"]]
    right = [i for i in leaked if after[i]["correct"] and i not in flipped]
    chosen = (flipped + right + [i for i in leaked if i not in flipped and i not in right])[: hp.n_analysis]
    items = [bench[i] for i in chosen]
    clean = [it for it in bench if not it["leaked"]][: hp.n_analysis]
    was = model.training
    model.eval()
    results = {"analysis_items": {"n": len(items), "flipped": len([i for i in chosen if i in flipped])}}
    if "patching" in hp.analyses:
        p = patching(model, tok, items, hp.rollouts, hp.max_new_tokens, hp.temperature)
        results["patching"] = p
        plots.patching_heatmap(p["acc"], p["before"], p["after"], str(root / "patching.png"))
    if "logit_lens" in hp.analyses:
        lens = {
            f"{name}_{which}": r
            for which, names in (("before", ["midtrain"]), ("after", ["midtrain", "grpo"]))
            for name, r in _lens_ranks(model, tok, items, names).items()
        }
        results["logit_lens"] = lens
        plots.lens_ranks(
            {k: v for k, v in lens.items() if k.startswith(("resid_mid", "mlp_out"))}, str(root / "logit_lens.png")
        )
    if "jsd" in hp.analyses:
        results["jsd"] = jsd_swaps(model, tok, items)
    if "resets" in hp.analyses:
        results["resets"] = layer_resets(model, tok, items, clean, hp.eval_tokens)
    if "key_scaling" in hp.analyses:
        anchor = _anchor_layer(results.get("patching"), len(decoder(model)[0]))
        ks = key_scaling(model, tok, items, anchor, list(hp.scales), hp.top_k, hp.eval_tokens)
        results["key_scaling"] = ks
        plots.accuracy_vs_scale(ks["curves"], str(root / "key_scaling.png"))
    model.train(was)
    for name, obj in results.items():
        write(root, name, obj)
    return results


def _lens_ranks(model, tok, items, names) -> dict:
    with adapters(model, names):
        return logit_lens(model, tok, items)["ranks"]


def _anchor_layer(patch: dict | None, n_layers: int) -> int:
    """The layer whose MLP patch lifts before-RL accuracy most (the middle layer without patching results)."""
    if not patch:
        return n_layers // 2
    return max(range(n_layers), key=lambda layer: patch["acc"][(layer, "mlp")])
