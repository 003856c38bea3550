"""Activations and steered generation on a ``transformers`` causal LM, through the shared
``zoo.models.activations`` (layer l = output of decoder block l).

The authors add v with a forward *pre*-hook on block l while their vectors come from block l's *output*: they
steer one block earlier than they read. ``hook_site="input"`` keeps that (``steer`` at block l - 1's output, the
same tensor as block l's input); ``hook_site="output"`` adds v where it was read.
"""

from __future__ import annotations

import torch

from zoo.models.activations import residual_stream, steer


@torch.no_grad()
def last_token_states(
    model, tokenizer, texts: list[str], layers: list[int], batch_size: int = 32, add_special_tokens: bool = True
) -> dict[int, torch.Tensor]:
    """Residual state of each text's last real token after each layer: ``{layer: [N, D]}`` float32 (right
    padding, so the last real token is at ``mask.sum() - 1``)."""
    side, tokenizer.padding_side = tokenizer.padding_side, "right"
    out: dict[int, list[torch.Tensor]] = {layer: [] for layer in layers}
    try:
        for i in range(0, len(texts), batch_size):
            enc = tokenizer(
                texts[i : i + batch_size], return_tensors="pt", padding=True, add_special_tokens=add_special_tokens
            ).to(model.device)
            states = residual_stream(model, enc["input_ids"], enc["attention_mask"], layers)
            last = enc["attention_mask"].sum(dim=1) - 1
            for layer in layers:
                out[layer].append(states[layer][torch.arange(len(last), device=last.device), last].float().cpu())
    finally:
        tokenizer.padding_side = side
    return {layer: torch.cat(v) for layer, v in out.items()}


def steer_site(layer: int, hook_site: str) -> int:
    """The block whose output receives v: ``layer - 1`` for the authors' pre-hook (``input``), ``layer`` for
    ``output``.

    Raises:
        ValueError: an unknown site, or ``input`` at layer 0 (its input is the embedding output, not a block's).
    """
    if hook_site == "output":
        return layer
    if hook_site == "input":
        if layer == 0:
            raise ValueError("hook_site 'input' at layer 0 would steer the embeddings; use hook_site: output")
        return layer - 1
    raise ValueError(f"hook_site must be 'input' or 'output', got {hook_site!r}")


@torch.no_grad()
def steered_generate(
    model,
    tokenizer,
    prompts: list[str],
    vectors: torch.Tensor,
    layer: int,
    hook_site: str = "input",
    prompt_only: bool = False,
    max_new_tokens: int = 32,
    temperature: float = 0.1,
    batch_size: int = 128,
    seed: int = 0,
    add_special_tokens: bool = True,
    watch_ids: list[int] | None = None,
) -> list[str] | tuple[list[str], torch.Tensor]:
    """Generate from each prompt with its own steering vector added at every position.

    Args:
        prompts: ``N`` prompt strings. vectors: ``[N, D]`` (row i steers prompt i).
        layer: the layer the vectors were read at; ``hook_site`` picks where they are added (see module doc).
        prompt_only: add only during the prefill (the authors' baselines); otherwise on every forward (their
            penalty experiment), so generated tokens are steered too.
        temperature: sampling temperature (0: greedy). seed: torch seed per batch, so outputs are reproducible.

        watch_ids: token ids whose next-token probability is tracked (a concept's keyword first tokens).

    Returns:
        ``N`` decoded continuations (special tokens dropped); with ``watch_ids`` also ``[N]`` the mean over the
        generated positions (up to the first end-of-sequence) of the probability mass the LM puts on
        ``watch_ids`` (ours: a graded "concept present" for LMs that never emit the keywords).
    """
    site = steer_site(layer, hook_site)
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    out: list[str] = []
    masses: list[torch.Tensor] = []
    sample = (
        {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        if temperature > 0
        else {"do_sample": False}
    )
    try:
        for i in range(0, len(prompts), batch_size):
            enc = tokenizer(
                prompts[i : i + batch_size], return_tensors="pt", padding=True, add_special_tokens=add_special_tokens
            ).to(model.device)
            torch.manual_seed(seed + i)
            with steer(model, site, vectors[i : i + batch_size], prompt_only=prompt_only):
                res = model.generate(
                    **enc,
                    max_new_tokens=max_new_tokens,
                    pad_token_id=tokenizer.pad_token_id,
                    output_logits=watch_ids is not None,
                    return_dict_in_generate=True,
                    **sample,
                )
            new = res.sequences[:, enc["input_ids"].shape[1] :]
            out += tokenizer.batch_decode(new, skip_special_tokens=True)
            if watch_ids is not None:
                probs = torch.stack([lg.float().softmax(-1)[:, watch_ids].sum(-1) for lg in res.logits], 1).cpu()
                ended = (new == tokenizer.eos_token_id).long().cumsum(1).cpu()
                live = (ended - (new == tokenizer.eos_token_id).long().cpu()) == 0  # up to and with the first eos
                masses.append((probs * live).sum(1) / live.sum(1).clamp_min(1))
    finally:
        tokenizer.padding_side = side
    return (out, torch.cat(masses)) if watch_ids is not None else out
