"""The policy: a causal LM with two LoRA adapters, ``midtrain`` (stage 1, the contamination) and ``grpo`` (stage 2),
and the helpers every stage and analysis uses (prompt batches, greedy answers, switching adapters, the decoder's
layers and unembedding, answer-position batches).

"Before RL" is the model with only ``midtrain`` active, "after RL" the one with both; a single set of base weights
serves both, so the analyses switch adapters instead of holding two models. Shapes: ``B`` prompts, ``P`` prompt
tokens (left-padded), ``C`` generated tokens.
"""

from __future__ import annotations

import contextlib

import torch

from zoo.methods.anchor_adapter.chain_sum import prompt_text

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
"""LoRA on every projection (issue #23: "all projections")."""


def lora_config(cfg: dict):
    """A peft ``LoraConfig`` from ``{r, alpha, dropout}`` on :data:`TARGETS`."""
    from peft import LoraConfig

    r = int(cfg.get("r", 16))
    return LoraConfig(
        r=r,
        lora_alpha=float(cfg.get("alpha", 2 * r)),
        lora_dropout=float(cfg.get("dropout", 0.0)),
        target_modules=TARGETS,
        bias="none",
    )


def build_policy(base: str, midtrain_lora: dict, grpo_lora: dict | None, dtype: torch.dtype | None = None):
    """The base LM (zoo id or local HF directory via ``load_causal_lm``; a preset of ``zoo.models.causal_lm.ARCHS``
    is randomly initialised, for tests) wrapped with the ``midtrain`` adapter, and
    with ``grpo_lora`` also the ``grpo`` adapter (both active, only ``grpo`` trainable).

    Returns:
        ``(peft model, tokenizer)``.
    """
    from peft import get_peft_model

    from zoo.models.causal_lm import ARCHS, build_causal_lm, load_causal_lm, load_tokenizer

    model, tok = (build_causal_lm(base), load_tokenizer()) if base in ARCHS else load_causal_lm(base)
    if dtype is not None:
        model = model.to(dtype)
    model = get_peft_model(model, lora_config(midtrain_lora), adapter_name="midtrain")
    if grpo_lora is not None:
        model.add_adapter("grpo", lora_config(grpo_lora))
        set_adapters(model, ["midtrain", "grpo"])
    model.train()
    return model, tok


def set_adapters(model, names: list[str]) -> None:
    """Activate ``names`` (their LoRA updates summed); only ``grpo`` stays trainable when present, else
    ``midtrain``."""
    model.base_model.set_adapter(names)
    trainable = "grpo" if "grpo" in model.peft_config else "midtrain"
    for n, p in model.named_parameters():
        p.requires_grad = f".{trainable}." in n and "lora_" in n


@contextlib.contextmanager
def adapters(model, names: list[str]):
    """Run the block with only ``names`` active (``["midtrain"]`` = before RL), then restore the previous set."""
    before = list(model.base_model.active_adapters)
    set_adapters(model, names)
    try:
        yield model
    finally:
        set_adapters(model, before)


def encode_prompts(tok, prompts: list[str], device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, P]`` left-padded ids and mask of prompt texts (no special tokens)."""
    ids = [tok(p).input_ids for p in prompts]
    P = max(len(s) for s in ids)
    out = torch.full((len(ids), P), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(ids), P), dtype=torch.long)
    for i, s in enumerate(ids):
        out[i, P - len(s) :], mask[i, P - len(s) :] = torch.tensor(s), 1
    return out.to(device), mask.to(device)


@torch.no_grad()
def generate_replies(
    model, tok, prompts: list[str], max_new_tokens: int = 32, temperature: float = 0.0, batch_size: int = 128
) -> list[str]:
    """Replies (decoded completions, up to the end-of-text token) to ``prompts``; greedy when ``temperature`` is 0.

    Uses ``zoo.models.grpo.sample_rollouts`` with a group of one, so evaluation and training sample alike.
    """
    from zoo.models.grpo import sample_rollouts

    device = next(model.parameters()).device
    out = []
    for i in range(0, len(prompts), batch_size):
        ids, mask = encode_prompts(tok, prompts[i : i + batch_size], device)
        roll = sample_rollouts(
            model, ids, mask, 1, max_new_tokens, [tok.eos_token_id], tok.pad_token_id, temperature=temperature
        )
        out += decode_completions(tok, roll.completion_ids, roll.completion_mask)
    return out


def decode_completions(tok, ids: torch.Tensor, mask: torch.Tensor) -> list[str]:
    """``[N, C]`` completion ids -> texts (masked positions and special tokens dropped)."""
    return [tok.decode(row[m.bool()].tolist(), skip_special_tokens=True) for row, m in zip(ids, mask)]


def decoder(model):
    """``(layers, final_norm, lm_head)`` of the (peft-wrapped) Llama-style LM."""
    hf = model.get_base_model() if hasattr(model, "get_base_model") else model
    return hf.model.layers, hf.model.norm, hf.get_output_embeddings()


def answer_batch(tok, items, device):
    """Prompts ending in `` \\boxed{`` (left-padded) and the answer's first token id per item."""
    ids, mask = encode_prompts(tok, [prompt_text(it["question"]) + " \\boxed{" for it in items], device)
    full = [tok(prompt_text(it["question"]) + " \\boxed{" + str(it["answer"])).input_ids for it in items]
    stem = [tok(prompt_text(it["question"]) + " \\boxed{").input_ids for it in items]
    target = torch.tensor([f[len(s)] if len(f) > len(s) else f[-1] for f, s in zip(full, stem)], device=device)
    return ids, mask, target
