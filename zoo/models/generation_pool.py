"""Pool a causal LM's hidden states over the tokens it generates, with hooks that keep running sums during
``generate`` (no ``T x L`` stack of states is stored), and the same pooling from ``output_hidden_states`` (the peer).

Readout layers follow ``hidden_states[1:]`` of ``model(..., output_hidden_states=True)``: readout ``l < L - 1`` is the
output of decoder block ``l`` (the :mod:`zoo.models.activations` convention) and readout ``L - 1`` is
``hidden_states[-1]``, the last block's output **after the final RMSNorm** (``model.model.norm``).

Positions (Wang, Isola and Cheung 2026, §2 as paraphrased in our notes; the bookkeeping is ours):
``h_t`` is the state at the position *holding* generated token ``t`` (fed back as input at decoding step ``t``), so the
last of ``T`` tokens needs one extra forward: we decode ``T + 1`` tokens and drop the last sampled one. When
``generate`` stops early (every row has ended), the last sampled token is fed by one full forward instead. A row's
positions after its first end-of-sequence token are excluded (the EOS position itself is kept), and left padding
never enters the prompt pool. Shared by pooled-reps; FAST and CRH read the same hooks.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence

import torch

from zoo.models.activations import decoder_layers


@dataclasses.dataclass
class PooledGeneration:
    """What :func:`pooled_generate` returns (``B`` rows, ``T`` new tokens, ``L`` readouts, width ``D``).

    Attributes:
        tokens: ``[B, T]`` generated token ids (row ``i`` is meaningful up to ``lengths[i]``).
        lengths: ``[B]`` pooled positions per row: up to and including the first EOS, else ``T``.
        mean: ``[L, B, D]`` mean state over the generated positions, per readout layer.
        prompt: ``[L, B, D]`` mean state over the prompt's real (non-padding) positions.
        last: ``[L, B, D]`` state at the row's last pooled position.
        states: ``[B, T, D]`` per-position states at ``token_layer`` (zero past ``lengths``), or ``None``.
        token_layer: the readout index ``states`` holds, or ``None``.
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    mean: torch.Tensor
    prompt: torch.Tensor
    last: torch.Tensor
    states: torch.Tensor | None = None
    token_layer: int | None = None


def readout_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules whose outputs are readouts ``0..L-1``: decoder blocks ``0..L-2`` and the final norm.

    Raises:
        TypeError: the model has no decoder blocks at ``model.model.layers`` or no ``model.model.norm``.
    """
    blocks = decoder_layers(model)
    norm = getattr(model.model, "norm", None)
    if not isinstance(norm, torch.nn.Module):
        raise TypeError(f"{type(model).__name__}: no final norm at model.model.norm")
    return [*list(blocks)[:-1], norm]


def _sampling_config(model, max_new_tokens: int, temperature: float, top_p: float, pad_token_id: int):
    gc = copy.deepcopy(model.generation_config)
    gc.eos_token_id = None  # we mask after EOS ourselves; transformers may still stop once every row sampled the
    # model's own EOS (its generation config's), which pooled_generate completes with _final_forward
    gc.pad_token_id = pad_token_id
    gc.max_new_tokens, gc.do_sample = max_new_tokens, temperature > 0
    gc.temperature, gc.top_p = (temperature, top_p) if temperature > 0 else (None, None)
    gc.top_k = None
    gc.output_hidden_states = False
    return gc


def _final_forward(model, out: torch.Tensor, attention_mask: torch.Tensor, **kwargs):
    """Feed the last sampled token after ``generate`` stopped early (transformers stops once every row has sampled
    an EOS, even with no EOS in our config: it falls back to the model's), by one full forward over the sequence with
    generate's position ids (cumulative mask); the hooks read its last position as the next step."""
    mask = torch.cat([attention_mask, attention_mask.new_ones(out.shape[0], out.shape[1] - attention_mask.shape[1])], 1)
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
    return model(input_ids=out, attention_mask=mask, position_ids=position_ids, use_cache=False, **kwargs)


def _pad_right(tokens: torch.Tensor, width: int, pad: int) -> torch.Tensor:
    if tokens.shape[1] >= width:
        return tokens
    return torch.cat([tokens, tokens.new_full((tokens.shape[0], width - tokens.shape[1]), pad)], 1)


def valid_mask(tokens: torch.Tensor, eos_ids: Sequence[int]) -> torch.Tensor:
    """``[B, T]`` True up to and including each row's first EOS."""
    is_eos = (
        torch.isin(tokens, torch.tensor(list(eos_ids), device=tokens.device))
        if eos_ids
        else torch.zeros_like(tokens, dtype=torch.bool)
    )
    before = torch.cumsum(is_eos.long(), dim=1) - is_eos.long()  # EOS tokens strictly before t
    return before == 0


@torch.no_grad()
def pooled_generate(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    max_new_tokens: int,
    eos_token_ids: Sequence[int],
    pad_token_id: int = 0,
    temperature: float = 0.7,
    top_p: float = 0.95,
    token_layer: int | None = None,
) -> PooledGeneration:
    """Sample ``max_new_tokens`` tokens and pool the readout states of the generated positions with hooks.

    Args:
        input_ids, attention_mask: ``[B, S]`` left-padded prompts (``0`` in the mask for padding).
        max_new_tokens: ``T``; the model decodes ``T + 1`` tokens (the extra forward holds token ``T``).
        eos_token_ids: ids that end a reply (positions after the first one are excluded).
        temperature, top_p: nucleus sampling (``temperature = 0``: greedy). Seed torch's RNG beforehand.
        token_layer: also keep the per-position states of this readout (``[B, T, D]``); ``None``: sums only.

    Returns:
        :class:`PooledGeneration`; pooled vectors are float32.

    Raises:
        ValueError: ``max_new_tokens < 1``, an unpadded-left batch, or ``token_layer`` out of range.
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if bool((attention_mask[:, -1] == 0).any()):
        raise ValueError("prompts must be left-padded (the last prompt position is padding in some row)")
    mods = readout_modules(model)
    n_layers, (b, s) = len(mods), input_ids.shape
    if token_layer is not None and not 0 <= token_layer < n_layers:
        raise ValueError(f"token_layer {token_layer} out of range 0..{n_layers - 1}")
    d, dev = model.config.hidden_size, input_ids.device
    eos = torch.tensor(list(eos_token_ids), dtype=torch.long, device=dev)
    acc = {"step": 0, "w": attention_mask.float(), "ended": torch.zeros(b, dtype=torch.bool, device=dev)}
    # accumulators live on the model's device (no per-layer host copy); moved to the CPU once, at the end
    sums = torch.zeros(n_layers, b, d, device=dev)
    prompt_sums = torch.zeros(n_layers, b, d, device=dev)
    last = torch.zeros(n_layers, b, d, device=dev)
    step_states = torch.zeros(n_layers, b, d, device=dev)  # this decoding step's state, every readout
    states = torch.zeros(b, max_new_tokens, d, device=dev) if token_layer is not None else None

    def pre_hook(_module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        step = acc["step"]
        if step == 0:
            acc["w"] = attention_mask.float()[:, -ids.shape[1] :]
        else:
            tok = ids[:, -1]
            acc["w"] = (~acc["ended"]).float()[:, None]
            acc["ended"] = acc["ended"] | torch.isin(tok, eos)

    def post_hook(_module, _args, _output):
        # one batched update over all readouts per decoding step (not one per block hook: with 30 blocks the
        # per-layer small ops cost ~3 % of a decoding step: 4.4 ms of ~170 ms in the issue-44 profile on SmolLM2's shape)
        step, w = acc["step"], acc["w"]
        if 1 <= step <= max_new_tokens:
            sums.add_(step_states * w)
            last.copy_(torch.where(w[None] > 0, step_states, last))
            if token_layer is not None:
                states[:, step - 1] = step_states[token_layer] * w
        acc["step"] += 1

    def layer_hook(layer):
        def hook(_module, _args, output):
            h = output[0] if isinstance(output, tuple) else output
            if acc["step"] == 0:
                prompt_sums[layer] += (h.float() * acc["w"][..., None]).sum(1)
            else:
                step_states[layer].copy_(h[:, -1])

        return hook

    handles = [model.register_forward_pre_hook(pre_hook, with_kwargs=True), model.register_forward_hook(post_hook)]
    handles += [m.register_forward_hook(layer_hook(i)) for i, m in enumerate(mods)]
    try:
        out = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            generation_config=_sampling_config(model, max_new_tokens + 1, temperature, top_p, pad_token_id),
        )
        if acc["step"] < max_new_tokens + 1:  # every row ended early: its last token was never fed back
            _final_forward(model, out, attention_mask)
    finally:
        for h in handles:
            h.remove()
    tokens = _pad_right(out[:, s : s + max_new_tokens].cpu(), max_new_tokens, pad_token_id)
    lengths = valid_mask(tokens, list(eos_token_ids)).sum(1)
    n_prompt = attention_mask.float().sum(1).cpu()
    return PooledGeneration(
        tokens=tokens,
        lengths=lengths,
        mean=sums.cpu() / lengths[None, :, None].float(),
        prompt=prompt_sums.cpu() / n_prompt[None, :, None],
        last=last.cpu(),
        states=None if states is None else states.cpu(),
        token_layer=token_layer,
    )


@torch.no_grad()
def pooled_generate_hidden_states(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    max_new_tokens: int,
    eos_token_ids: Sequence[int],
    pad_token_id: int = 0,
    temperature: float = 0.7,
    top_p: float = 0.95,
    token_layer: int | None = None,
) -> PooledGeneration:
    """The peer of :func:`pooled_generate`: ``generate(output_hidden_states=True, return_dict_in_generate=True)``
    keeps every step's ``L + 1`` hidden-state tensors, then pools them. Same arguments, same result (up to float
    summation order); used by the tests and ``benchmarks/pooled_reps.py``."""
    gc = _sampling_config(model, max_new_tokens + 1, temperature, top_p, pad_token_id)
    gc.output_hidden_states, gc.return_dict_in_generate = True, True
    out = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=gc)
    s = input_ids.shape[1]
    steps = list(out.hidden_states)  # per step: (embeddings, readout 0..L-1)
    if len(steps) < max_new_tokens + 1:  # stopped early: feed the last sampled token (see _final_forward)
        steps.append(_final_forward(model, out.sequences, attention_mask, output_hidden_states=True).hidden_states)
    tokens = _pad_right(out.sequences[:, s : s + max_new_tokens].cpu(), max_new_tokens, pad_token_id)
    valid = valid_mask(tokens, list(eos_token_ids))
    lengths = valid.sum(1)
    prompt = torch.stack([hs.float().cpu() for hs in steps[0][1:]])  # [L, B, S, D]
    gen = torch.stack(
        [
            torch.stack([hs[:, -1].float().cpu() for hs in step[1:]])  # [t, L, B, D]
            for step in steps[1 : max_new_tokens + 1]
        ]
    ).permute(1, 2, 0, 3)  # [L, B, t, D]
    if gen.shape[2] < max_new_tokens:  # positions never generated: masked out below
        gen = torch.cat([gen, gen.new_zeros(*gen.shape[:2], max_new_tokens - gen.shape[2], gen.shape[3])], 2)
    w = valid.float()
    pm = attention_mask.float().cpu()
    idx = (lengths - 1).clamp(min=0)
    return PooledGeneration(
        tokens=tokens,
        lengths=lengths,
        mean=(gen * w[None, ..., None]).sum(2) / lengths[None, :, None].float(),
        prompt=(prompt * pm[None, ..., None]).sum(2) / pm.sum(1)[None, :, None],
        last=gen[:, torch.arange(gen.shape[1]), idx],
        states=None if token_layer is None else gen[token_layer] * w[..., None],
        token_layer=token_layer,
    )
