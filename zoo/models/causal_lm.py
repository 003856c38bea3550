"""zoo-lm and the pretrained bases: causal LMs, their tokenizers, and one resolver for every way of naming a model.

The zoo-lm architecture is transformers' ``LlamaForCausalLM`` (RMSNorm, rotary position embeddings, SwiGLU MLP with
``gate_proj``/``up_proj``/``down_proj``), so activation hooks and down-projection neuron masks written for Llama
or Qwen apply unchanged. A model's ``arch`` is one of (:func:`pretrained_source` resolves the last three):

* a preset name from :data:`ARCHS` (random initialisation, zoo-lm);
* a base id from :data:`zoo.core.bases.BASES` (``smollm2-135m-instruct``, ``gemma3-270m``): its cached HF directory,
  fetched and converted on first use (:func:`zoo.models.bases.ensure_base`);
* a local Hugging Face model directory (a user's own Llama / Qwen);
* a Hub name (``HuggingFaceTB/SmolLM2-135M-Instruct``): ``from_pretrained(name)``, which needs Hub access (or a
  filled Hugging Face cache) and fails with transformers' message otherwise.

Every one of these loads with ``AutoModelForCausalLM.from_pretrained`` and brings its own tokenizer (chat template,
BOS/EOS), which :func:`tokenizer_for` follows.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from pathlib import Path
from typing import Any

import torch

from zoo.core.empty import weights_are_empty
from zoo.models.lm_state import load_lm_state, strip_prefix

TOKENIZER_DIR = Path(__file__).resolve().parent / "assets" / "zoo-lm-bpe8k"
"""The shipped byte-level BPE tokenizer (8,192 tokens; rebuilt by ``python -m zoo.models.train_tokenizer``)."""

_SPECIAL_IDS = {"vocab_size": 8192, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
_COMMON = {
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
    "attention_bias": False,
    "mlp_bias": False,
    "initializer_range": 0.02,
    **_SPECIAL_IDS,
}

ARCHS: dict[str, dict[str, Any]] = {
    # ~0.63M parameters (0.52M of them the tied embedding); for tests.
    "zoo-lm-tiny": {
        **_COMMON,
        "hidden_size": 64,
        "intermediate_size": 176,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "max_position_embeddings": 512,
    },
    # ~5.26M parameters (2.10M tied embedding + 4 x 0.79M blocks), 21 MB in float32; trains on 2 CPU cores.
    "zoo-lm-small": {
        **_COMMON,
        "hidden_size": 256,
        "intermediate_size": 688,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "max_position_embeddings": 1024,
    },
}
"""Preset ``LlamaConfig`` keyword arguments. Sizes are ours (the issue asks for a few million parameters)."""


HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
"""``owner/name``: what a Hugging Face Hub model id looks like (a relative path of two parts looks the same, so a
local directory is tried first)."""


def pretrained_source(arch: str) -> str:
    """What ``from_pretrained`` loads for a non-preset ``arch``: a base id's cached directory (fetched on first
    use), a local directory, or a Hub name, unchanged.

    Raises:
        ValueError: ``arch`` is a preset (built, not loaded) or none of these.
    """
    from zoo.core.bases import BASES

    if arch in BASES:
        from zoo.models.bases import ensure_base

        return str(ensure_base(arch))
    if os.path.isdir(arch) or (HUB_NAME.match(arch) and not os.path.exists(arch)):
        return arch
    raise ValueError(
        f"model.arch: {arch!r} is neither a preset ({', '.join(ARCHS)}), a base "
        f"({', '.join(BASES)}), a local model directory nor a Hub name (owner/name)"
    )


def _from_pretrained(loader, arch: str, source: str, **kwargs):
    """``loader.from_pretrained(source, **kwargs)``; a Hub name that cannot be loaded (no network, no cached copy)
    fails as a ValueError naming ``arch`` and transformers' reason."""
    try:
        return loader.from_pretrained(source, **kwargs)
    except OSError as e:
        if os.path.isdir(source):
            raise
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(
            f"model.arch: {arch!r} is not a local directory, so it was loaded as a Hugging Face Hub "
            f"name and failed: {reason}. Without Hub access use a base id or a local directory"
        ) from None


def build_causal_lm(arch: str, dtype=None):
    """Build a causal LM from a preset name, or load a base id, a local Hugging Face directory or a Hub name.

    Args:
        arch: a key of :data:`ARCHS` (randomly initialised with the current torch seed), or anything
            :func:`pretrained_source` resolves (loaded with ``AutoModelForCausalLM.from_pretrained``).
        dtype: parameter dtype (``torch.float32``, ``torch.bfloat16``); a pretrained model is loaded straight into it
            (no second copy). ``None``: the pretrained config's dtype, the torch default for a preset.

    Returns:
        A ``transformers`` causal LM (``LlamaForCausalLM`` for presets); ``model(input_ids[B, T]).logits``
        is ``[B, T, vocab_size]``.

    Raises:
        ValueError: ``arch`` is none of these, or a Hub name that cannot be loaded.
    """
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    if arch in ARCHS:
        with torch.device("meta") if weights_are_empty() else contextlib.nullcontext():
            model = LlamaForCausalLM(LlamaConfig(**ARCHS[arch]))
        return model if dtype is None else model.to(dtype)
    source = pretrained_source(arch)
    if weights_are_empty():
        from transformers import AutoConfig

        config = _from_pretrained(AutoConfig, arch, source)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        return model if dtype is None else model.to(dtype)
    return _from_pretrained(AutoModelForCausalLM, arch, source, **({} if dtype is None else {"dtype": dtype}))


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The default LoRA targets: every attention and MLP projection of a Llama/Qwen/Gemma block."""


def wrap_lora(model, cfg: dict):
    """``model`` wrapped by peft LoRA adapters (only they train; the base weights are frozen).

    Args:
        cfg: ``{r, alpha, dropout, target_modules}``; ``alpha`` defaults to ``2 r``, ``target_modules`` to
            :data:`LORA_TARGETS`. The adapted layers compute ``W x + (alpha / r) B A x`` with ``B = 0`` at the start.

    Raises:
        ValueError: an unknown key in ``cfg``.
    """
    from peft import LoraConfig, get_peft_model

    allowed = {"r", "alpha", "dropout", "target_modules"}
    unknown = set(cfg) - allowed
    if unknown:
        raise ValueError(f"model.lora: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    conf = LoraConfig(
        r=int(cfg.get("r", 8)),
        lora_alpha=float(cfg.get("alpha", 2 * cfg.get("r", 8))),
        lora_dropout=float(cfg.get("dropout", 0.0)),
        target_modules=list(cfg.get("target_modules") or LORA_TARGETS),
    )
    with warnings.catch_warnings():  # peft asks transformers 5.x for the deprecated `is_gradient_checkpointing`
        warnings.filterwarnings("ignore", "`is_gradient_checkpointing` is deprecated", FutureWarning)
        return get_peft_model(model, conf)


@contextlib.contextmanager
def frozen_reference(model, copy=None):
    """The frozen reference policy to score with, as a context: ``copy`` when given (a separate frozen model), else
    ``model`` itself with its peft adapters disabled, i.e. the base under LoRA (no copy of the weights is made).

    Only valid as a reference when the adapters started as the identity (peft's ``B = 0``): then the disabled model
    is exactly the policy at the start of training. Use it under ``torch.no_grad()``; the adapters are enabled again
    on leaving the block, also on an error.

    Raises:
        ValueError: no ``copy`` and ``model`` is not a peft model (nothing to disable).
    """
    if copy is not None:
        yield copy
        return
    if not hasattr(model, "disable_adapter"):
        raise ValueError("frozen_reference: the model has no peft adapters to disable; pass a frozen copy")
    with model.disable_adapter():
        yield model


def enable_checkpointing(model, use_reentrant: bool | None = None) -> None:
    """Recompute activations in the backward pass of an HF model: ``activation_checkpointing_enable`` where
    transformers has it (5.x renamed ``gradient_checkpointing_enable``, now a deprecated alias), else the old name.
    ``use_reentrant=False`` is needed where gradients are taken at inner outputs (ShaPO's ascent step)."""
    kwargs = None if use_reentrant is None else {"use_reentrant": use_reentrant}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def load_tokenizer(path: str | os.PathLike | None = None):
    """Load a tokenizer with ``AutoTokenizer.from_pretrained``: from a directory (local files only) or a Hub name.

    Args:
        path: a tokenizer or model directory, or a Hub name (``owner/name``, see :func:`pretrained_source`); ``None``
            means the shipped zoo-lm tokenizer (:data:`TOKENIZER_DIR`).

    Returns:
        A ``transformers`` fast tokenizer with a pad token (the eos token is used when the directory has none).

    Raises:
        ValueError: ``path`` is neither a directory nor a Hub name, or a Hub name that cannot be loaded.
    """
    from transformers import AutoTokenizer

    path = str(TOKENIZER_DIR if path is None else path)
    if Path(path).is_dir():
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    elif HUB_NAME.match(path) and not os.path.exists(path):
        tok = _from_pretrained(AutoTokenizer, path, path)
    else:
        raise ValueError(f"tokenizer: {path!r} is not a directory")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def tokenizer_for(arch: str, tokenizer: str | None) -> str | None:
    """The tokenizer a module uses: ``tokenizer`` if given, else the model's own for a pretrained ``arch`` (a base
    id's cached directory, a local directory, a Hub name: :func:`pretrained_source`), else ``None`` (the shipped
    zoo-lm tokenizer, for presets)."""
    if tokenizer is not None:
        return tokenizer
    return None if arch in ARCHS else pretrained_source(arch)


def tokenizer_signature(tokenizer) -> dict[str, Any]:
    """What must agree between two tokenizers for token ids to mean the same thing: vocabulary size, the
    special-token ids and the chat template."""
    return {
        "vocabulary": len(tokenizer),
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "chat_template": getattr(tokenizer, "chat_template", None),
    }


def check_tokenizer_fits(tokenizer, model, where: str, tokenizer_name: str) -> None:
    """Fail before any training when ``tokenizer`` produces ids that ``model``'s embedding cannot hold, or special
    ids the model's config does not name.

    Args:
        tokenizer: a transformers tokenizer; model: a transformers causal LM (its ``config.vocab_size`` and
            ``bos/eos/pad_token_id``); where / tokenizer_name: how to name both sides in the message.

    Raises:
        ValueError: naming the tokenizer's vocabulary (or special id) and the model's.
    """
    cfg = model.config
    if len(tokenizer) > cfg.vocab_size:
        raise ValueError(
            f"{tokenizer_name} has {len(tokenizer)} tokens but {where} embeds only {cfg.vocab_size} "
            "rows; ids past the embedding would be out of range. Use the model's own tokenizer (leave "
            "the tokenizer unset: it follows model.arch / init_from)"
        )
    for key in ("eos_token_id", "bos_token_id"):
        mine, theirs = getattr(tokenizer, key), getattr(cfg, key, None)
        if mine is not None and theirs is not None and not isinstance(theirs, list) and mine != theirs:
            raise ValueError(f"{tokenizer_name} has {key}={mine} but {where} was built with {key}={theirs}")


def check_same_tokenizer(a, b, a_name: str, b_name: str) -> None:
    """Fail when two tokenizers that must share ids (a policy and its cost model, a datamodule and its model) differ.

    Raises:
        ValueError: naming each differing item with both sides' values.
    """
    sa, sb = tokenizer_signature(a), tokenizer_signature(b)
    diff = [
        f"{k}: {a_name} {sa[k]!r}, {b_name} {sb[k]!r}"
        if k != "chat_template"
        else f"chat_template: {a_name} and {b_name} differ"
        for k in sa
        if sa[k] != sb[k]
    ]
    if diff:
        raise ValueError(f"{a_name} and {b_name} do not share a tokenizer:\n  " + "\n  ".join(diff))


def tied_aliases(model: torch.nn.Module, prefix: str = "") -> dict[str, str]:
    """Parameter names that alias an earlier parameter (tied weights): ``{alias: kept_name}``.

    With ``tie_word_embeddings`` the output projection ``lm_head.weight`` *is* ``model.embed_tokens.weight``;
    safetensors refuses to save one tensor under two names, so packages store it once (*ours*).
    """
    first: dict[int, str] = {}
    aliases = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in first:
            aliases[prefix + name] = prefix + first[id(param)]
        else:
            first[id(param)] = name
    return aliases


def drop_tied_aliases(module, state_dict, prefix, local_metadata) -> None:
    """``state_dict`` post-hook: store each tied weight once (under its first name).

    Use on a LightningModule holding a causal LM: set ``module._tied = tied_aliases(module.<attr>, "<attr>.")`` and
    ``module.register_state_dict_post_hook(drop_tied_aliases)`` plus
    ``module.register_load_state_dict_pre_hook(fill_tied_aliases)``.
    """
    for alias in module._tied:
        state_dict.pop(prefix + alias, None)


def fill_tied_aliases(
    module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
) -> None:
    """``load_state_dict`` pre-hook: restore the tied names :func:`drop_tied_aliases` left out."""
    for alias, kept in module._tied.items():
        if prefix + alias not in state_dict and prefix + kept in state_dict:
            state_dict[prefix + alias] = state_dict[prefix + kept]


def load_causal_lm(ref: str):
    """Load a causal LM and its tokenizer from a zoo id (``zoo-lm.chat``), a base id, a local Hugging Face directory
    or a Hub name.

    For a zoo id, ``zoo.core.hub.load_package(ref)`` returns the resolved recipe and the verified state dict; the
    model is ``build_causal_lm(config["model"]["arch"])`` with the package's ``lm.*`` weights, and the tokenizer
    is ``config["model"]["tokenizer"]`` (``None``: the model's own, :func:`tokenizer_for`). Anything else is
    loaded by :func:`build_causal_lm` with the model's own tokenizer.

    Returns:
        ``(model, tokenizer)``; the model is in eval mode.

    Raises:
        ValueError: the package was not produced by a module holding a causal LM under ``lm.``, or ``ref`` is
            none of these (a preset name is built randomly initialised, with the shipped tokenizer).
    """
    from zoo.core.hub import load_package, read_manifest

    if ref not in read_manifest() and not (Path(ref) / "config.yaml").is_file():  # not a zoo id or package folder
        return build_causal_lm(ref).eval(), load_tokenizer(tokenizer_for(ref, None))
    config, state = load_package(ref)
    model_cfg = config.get("model") or {}
    if "arch" not in model_cfg:
        raise ValueError(f"{ref}: its recipe has no model.arch (method {config.get('method')!r}); not a causal LM")
    model = build_causal_lm(model_cfg["arch"])
    load_lm_state(model, strip_prefix(state, "lm."))
    return model.eval(), load_tokenizer(tokenizer_for(model_cfg["arch"], model_cfg.get("tokenizer")))


#: Two real prompts of different lengths: the example batch LM-based graphs are exported and parity-checked with.
EXPORT_TEXTS = ("How do I bake bread?", "Name three rivers in Europe and say which one is the longest.")


def export_batch(tokenizer, texts=EXPORT_TEXTS) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[dict, dict]]:
    """``((input_ids, attention_mask), dynamic shapes)`` for graph export of an LM-based network: the texts
    tokenised and right-padded to ``(B, T)`` (mask 1 = real token), and ``{0: batch, 1: seq}`` for both inputs so the
    exported graph takes any batch size and length."""
    from torch.export import Dim

    enc = [tokenizer(t, add_special_tokens=False, split_special_tokens=True)["input_ids"] for t in texts]
    width = max(map(len, enc))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.tensor([e + [pad] * (width - len(e)) for e in enc])
    mask = torch.tensor([[1] * len(e) + [0] * (width - len(e)) for e in enc])
    dims = {0: Dim("batch", min=1, max=1024), 1: Dim("seq", min=2, max=4096)}
    return (ids, mask), (dims, dims)
