"""Activation access on zoo-lm (any Llama-style ``transformers`` causal LM): read the residual stream, record any
submodule's output, add a steering vector, and mean-pool over a token mask.

Layer convention (the off-by-one trap of steering code): **layer ``l`` means the output of decoder block ``l``**
(0-based), i.e. ``hidden_states[l + 1]`` of ``model(..., output_hidden_states=True)``; ``hidden_states[0]`` is
the embedding output. :func:`residual_stream` and :func:`steer` use the same convention, so a vector read at
layer ``l`` is added back at the place it was read from. Shared by pooled-reps, FAST, CRH and anchor-adapter.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The decoder blocks of a ``transformers`` causal LM (``model.model.layers`` for Llama/Qwen/Mistral).

    Raises:
        TypeError: the model has no ``model.layers`` list.
    """
    layers = getattr(getattr(model, "model", None), "layers", None)
    if not isinstance(layers, torch.nn.ModuleList):
        raise TypeError(f"{type(model).__name__}: no decoder blocks at model.model.layers")
    return layers


def _check_layer(model: torch.nn.Module, layer: int) -> None:
    n = len(decoder_layers(model))
    if not 0 <= layer < n:
        raise ValueError(f"layer {layer} out of range: the model has {n} decoder blocks (0..{n - 1})")


@torch.no_grad()
def residual_stream(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    layers: Sequence[int] | None = None,
) -> dict[int, torch.Tensor]:
    """Residual-stream states after the given decoder blocks.

    Args:
        input_ids: ``[B, T]`` token ids. attention_mask: ``[B, T]`` 1 for real tokens (``None``: all real).
        layers: block indices (0-based, output of that block); ``None``: every block.

    Returns:
        ``{layer: [B, T, D]}`` float tensors (the model's dtype), detached.

    Raises:
        ValueError: a layer index is out of range.
    """
    n = len(decoder_layers(model))
    layers = list(range(n)) if layers is None else list(layers)
    for layer in layers:
        _check_layer(model, layer)
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    return {layer: out.hidden_states[layer + 1] for layer in layers}


@contextlib.contextmanager
def record(model: torch.nn.Module, names: Sequence[str]) -> Iterator[dict[str, torch.Tensor]]:
    """Record the outputs of named submodules during the forward passes inside the ``with`` block.

    ``names`` are ``model.named_modules()`` names, e.g. ``"model.layers.2.mlp"`` or
    ``"model.layers.2.mlp.down_proj"`` (for MLP keys, record the down-projection's *input* with
    :func:`record_inputs`). The dict maps each name to the last output seen (tuple outputs give their first
    element), detached.

    Raises:
        KeyError: a name is not a submodule of ``model``.
    """
    yield from _hooked(model, names, inputs=False)


@contextlib.contextmanager
def record_inputs(model: torch.nn.Module, names: Sequence[str]) -> Iterator[dict[str, torch.Tensor]]:
    """Like :func:`record` but stores each submodule's first positional *input* (e.g. the MLP key activations
    ``[B, T, d_mlp]`` entering ``down_proj``)."""
    yield from _hooked(model, names, inputs=True)


def _hooked(model, names, inputs: bool):
    modules = dict(model.named_modules())
    missing = [n for n in names if n not in modules]
    if missing:
        raise KeyError(f"not submodules of {type(model).__name__}: {missing}")
    seen: dict[str, torch.Tensor] = {}
    handles = []
    for name in names:

        def hook(_module, args, output, name=name):
            value = args[0] if inputs else output
            seen[name] = (value[0] if isinstance(value, tuple) else value).detach()

        handles.append(modules[name].register_forward_hook(hook))
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def steer(
    model: torch.nn.Module, layer: int, vector: torch.Tensor, positions: slice | None = None, prompt_only: bool = False
) -> Iterator[None]:
    """Add ``vector`` to the residual stream after decoder block ``layer`` inside the ``with`` block.

    Args:
        vector: ``[D]`` (same for every token) or ``[B, D]`` (one per sequence); already scaled by the caller.
        positions: token positions to steer (``None``: all, including those generated inside the block).
        prompt_only: add only during the first forward pass through the block inside the ``with`` block (the
            prefill of ``generate`` with a KV cache), so generated tokens are not steered directly (CRH's
            baseline "prompt-only" hooks).

    Raises:
        ValueError: layer out of range, or ``vector``'s last dimension is not the hidden size.
    """
    _check_layer(model, layer)
    block = decoder_layers(model)[layer]
    calls = [0]

    def hook(_module, _args, output):
        calls[0] += 1
        if prompt_only and calls[0] > 1:
            return output
        hidden = output[0] if isinstance(output, tuple) else output
        if vector.shape[-1] != hidden.shape[-1]:
            raise ValueError(f"steering vector has dim {vector.shape[-1]}, hidden size is {hidden.shape[-1]}")
        add = vector.to(hidden.dtype).to(hidden.device)
        add = add[:, None, :] if add.dim() == 2 else add
        if positions is None:
            hidden = hidden + add
        else:
            hidden = hidden.clone()
            hidden[:, positions] += add
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    # prepend: transformers records hidden_states with its own forward hook, which must see the steered output
    handle = block.register_forward_hook(hook, prepend=True)
    try:
        yield
    finally:
        handle.remove()
