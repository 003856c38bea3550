"""Causal-LM plumbing shared by ShaPO's policy, reference and cost model: sequence log-probabilities,
left-padded sampling and per-token KL. Shapes: B sequences, T tokens, V vocabulary entries."""

from __future__ import annotations

import torch

from zoo.models.sharding import call_as_root, is_sharded


def unwrap(model):
    """``(backbone, lm_head)`` of an HF causal LM, under a peft wrapper if there is one (LoRA layers stay active
    or disabled as the wrapper says)."""
    hf = model.get_base_model() if hasattr(model, "get_base_model") else model
    return hf.base_model, hf.get_output_embeddings()


def sequence_logps(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed log-probability of the labelled tokens of each sequence (the authors' ``_get_batch_logps``).

    Only the scored positions go through the output projection (as TRL's fused LM head does): the prompt's
    positions never materialise ``V`` logits. Assumes a plain linear head (Llama, Qwen, NeoX; no logit soft-capping).
    Under FSDP2 (:func:`zoo.models.sharding.shard_causal_lm`) the backbone and head run inside the root's forward.

    Args:
        model: an HF causal LM (or a peft wrapper of one).
        input_ids, attention_mask: ``(B, T)`` right-padded.
        labels: ``(B, T)`` with the token to score at each position, -100 where nothing is scored (prompt,
            padding); position t is predicted from the hidden state at t - 1.

    Returns:
        ``(sum_logp, n_tokens)``, each ``(B,)``: natural-log sums (float32) and the number of scored tokens.
    """
    return call_as_root(model, _sequence_logps, model, input_ids, attention_mask, labels)


def _sequence_logps(model, input_ids, attention_mask, labels):
    backbone, head = unwrap(model)
    hidden = backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, :-1]
    target = labels[:, 1:]
    mask = target != -100
    logits = head(hidden[mask]).float()  # (N, V), N = scored tokens
    token_logp = logits.gather(-1, target[mask].unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    rows = mask.nonzero()[:, 0]
    sums = torch.zeros(input_ids.shape[0], dtype=token_logp.dtype, device=token_logp.device)
    return sums.index_add(0, rows, token_logp), mask.sum(-1).float()


def right_pad(seqs: list[list[int]], pad_id: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, T)`` ids and 0/1 mask for token lists, padded on the right to the longest."""
    T = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids.to(device), mask.to(device)


@torch.no_grad()
def sample_completions(
    model,
    prompts: list[list[int]],
    pad_id: int,
    eos_id: int,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    batch_size: int,
) -> list[list[int]]:
    """Sample a completion for each prompt (left-padded batches, ``model.generate``), cut after the first EOS.

    Under FSDP2 ``generate`` runs with ``synced_gpus`` (ranks that finished keep stepping with the others).

    Args:
        prompts: token id lists.
        temperature: 0 = greedy, else multinomial sampling at this temperature (no top-k / top-p).
        seed: the torch RNG seed used for sampling (the global RNG state is restored afterwards).
        batch_size: prompts per ``generate`` call.

    Returns:
        One completion (token ids, EOS included when produced) per prompt.
    """
    device = next(model.parameters()).device
    out: list[list[int]] = []
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        for i in range(0, len(prompts), batch_size):
            chunk = prompts[i : i + batch_size]
            T = max(len(p) for p in chunk)
            ids = torch.full((len(chunk), T), pad_id, dtype=torch.long)
            mask = torch.zeros((len(chunk), T), dtype=torch.long)
            for j, p in enumerate(chunk):
                ids[j, T - len(p) :] = torch.tensor(p)
                mask[j, T - len(p) :] = 1
            kw = (
                {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
                if temperature > 0
                else {"do_sample": False}
            )
            if is_sharded(model):  # FSDP2: every rank runs the same number of forwards (each one all-gathers)
                kw["synced_gpus"] = True
            gen = model.generate(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                max_new_tokens=max_new_tokens,
                pad_token_id=pad_id,
                eos_token_id=eos_id,
                **kw,
            )
            for row in gen[:, T:].tolist():
                out.append(row[: row.index(eos_id) + 1] if eos_id in row else row)
    return out


@torch.no_grad()
def completion_kl(
    policy_logits,
    reference_logits,
    prompts: list[list[int]],
    completions: list[list[int]],
    pad_id: int,
    batch_size: int,
    device=None,
) -> torch.Tensor:
    """KL(pi || pi_ref) along each completion: sum over its positions of the exact per-token KL over V.

    Args:
        policy_logits, reference_logits: callables ``(input_ids, attention_mask) -> (B, T, V) logits``.
        prompts, completions: token id lists, one completion per prompt.

    Returns:
        ``(N,)`` KL in nats per completion (0 for an empty completion).
    """
    out = []
    for i in range(0, len(prompts), batch_size):
        seqs = [p + c for p, c in zip(prompts[i : i + batch_size], completions[i : i + batch_size])]
        ids, mask = right_pad(seqs, pad_id, device)
        lp = torch.log_softmax(policy_logits(ids, mask).float(), -1)
        lq = torch.log_softmax(reference_logits(ids, mask).float(), -1)
        kl_t = (lp.exp() * (lp - lq)).sum(-1)  # (B, T): KL of the next-token distribution at t
        scored = torch.zeros_like(kl_t)
        for j, (p, c) in enumerate(zip(prompts[i : i + batch_size], completions[i : i + batch_size])):
            scored[j, len(p) - 1 : len(p) - 1 + len(c)] = 1
        out.append((kl_t * scored).sum(-1))
    return torch.cat(out) if out else torch.zeros(0)
