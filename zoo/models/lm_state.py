"""Hugging Face causal-LM state dicts: the part of a package holding an LM, and loading one with tied output weights.

Below both :mod:`zoo.models.causal_lm` (loading zoo packages) and :mod:`zoo.models.bases` (de-quantising a GGUF
base into a plain directory), which each load a state dict this way.
"""

from __future__ import annotations

from typing import Any


def strip_prefix(state: dict[str, Any], prefix: str = "lm.") -> dict[str, Any]:
    """Keep the entries of ``state`` whose key starts with ``prefix``, with the prefix removed.

    Raises:
        KeyError: no key starts with ``prefix``.
    """
    out = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
    if not out:
        raise KeyError(f"no state-dict key starts with {prefix!r} (first keys: {list(state)[:5]})")
    return out


def load_lm_state(model, state: dict[str, Any]) -> None:
    """Load a Hugging Face causal LM state dict into ``model``, allowing only tied output weights to be absent.

    Raises:
        RuntimeError: unexpected keys, missing keys other than a tied ``lm_head.weight``, or shape mismatches.
    """
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = model.config.tie_word_embeddings
    missing = [k for k in missing if not (tied and k == "lm_head.weight")]
    if missing or unexpected:
        raise RuntimeError(f"causal LM state dict mismatch: missing {missing[:5]}, unexpected {unexpected[:5]}")
    if tied:
        model.tie_weights()
