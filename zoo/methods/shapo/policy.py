"""ShaPO's policy and its frozen companions: LoRA wrapping, loading causal-LM weights, the reference pi_ref and the
cost model (built in ``setup``, kept outside the state dict), FSDP2 sharding, the checkpoint hooks that carry a copied
reference, and HF export. A mixin of :class:`zoo.methods.shapo.module.ShaPOModule` (reads its ``hparams``, ``policy``
and ``_frozen``)."""

from __future__ import annotations

import copy

import torch

from zoo.core.phases import phase
from zoo.core.recipe import RecipeError
from zoo.models.sharding import reshard


def map_lm_state(own: dict, state: dict, tied: bool) -> dict:
    """Map causal-LM weights ``state`` onto ``own``'s ``policy.``-prefixed keys (possibly peft-wrapped).

    A source key matches the own key whose plain HF name (``policy.``, ``base_model.model.`` and ``.base_layer``
    removed) equals the source key with some leading components dropped (``lm.model.layers.0...`` ->
    ``model.layers.0...``). Source keys that match nothing are returned unchanged (the loader reports them as
    unexpected); own keys without a source are left out (the loader reports them as missing, and excuses only
    head keys: LoRA adapters and stage-A buffers). A missing tied ``lm_head.weight`` is the embedding (ours:
    bookkeeping, no method content).
    """

    def plain(key: str) -> str:
        return key[len("policy.") :].removeprefix("base_model.model.").replace(".base_layer.", ".")

    targets = {plain(k): k for k in own if k.startswith("policy.") and "lora_" not in k}
    out, found = {}, set()
    for key, value in state.items():
        parts = key.split(".")
        cand = next((".".join(parts[i:]) for i in range(len(parts)) if ".".join(parts[i:]) in targets), None)
        if cand is None:
            out[key] = value
        else:
            out[targets[cand]] = value
            found.add(cand)
    if tied and "lm_head.weight" in targets and "lm_head.weight" not in found:
        emb = next((k for k in targets if k.endswith("embed_tokens.weight") and k in found), None)
        if emb is not None:
            out[targets["lm_head.weight"]] = out[targets[emb]]
    return out


def merged_if_lora(state: dict, source_cfg: dict | None, arch: str) -> dict:
    """``state`` unchanged, or, when it holds LoRA adapters (a LoRA ShaPO package or run), its ``policy.*`` weights
    merged (:func:`merge_lora_state`, with the source's ``model.lora`` and ``model.arch``).

    Raises:
        ValueError: LoRA adapters whose ``model.lora`` settings are unknown (a bare state dict).
    """
    if not any("lora_" in k for k in state):
        return state
    src_model = (source_cfg or {}).get("model") or {}
    if not src_model.get("lora"):
        raise ValueError(
            "the weights hold LoRA adapters but their model.lora settings are unknown (load a zoo "
            "package or a run's checkpoint, whose config carries them)"
        )
    policy = {k[len("policy.") :]: v for k, v in state.items() if k.startswith("policy.")}
    merged = merge_lora_state(src_model.get("arch", arch), src_model["lora"], policy)
    rest = {k: v for k, v in state.items() if not k.startswith("policy.")}
    return {**{f"policy.{k}": v for k, v in merged.items()}, **rest}


def merge_lora_state(arch: str, lora: dict, policy_state: dict) -> dict:
    """A LoRA policy's weights (``base_model.model.*`` with ``lora_A/B``, no ``policy.`` prefix) merged into plain
    HF causal-LM weights with peft's ``merge_and_unload`` (W + (alpha / r) B A on every adapted layer).

    Raises:
        RuntimeError: the state does not fit a LoRA model of ``arch`` with ``lora``'s settings.
    """
    from zoo.models.causal_lm import build_causal_lm, fill_tied_aliases, tied_aliases, wrap_lora

    model = wrap_lora(build_causal_lm(arch, dtype=torch.float32), lora)
    holder = torch.nn.Module()
    holder.policy, holder._tied = model, tied_aliases(model, "policy.")
    fill = {f"policy.{k}": v for k, v in policy_state.items()}
    fill_tied_aliases(holder, fill, "", {}, True, [], [], [])
    model.load_state_dict({k[len("policy.") :]: v for k, v in fill.items()}, strict=True)
    merged = model.merge_and_unload()
    aliases = tied_aliases(merged)  # a tied lm_head is stored once, as the embedding (as in packages)
    return {k: v for k, v in merged.state_dict().items() if k not in aliases}


def config_dtype(arch: str) -> torch.dtype | None:
    """The parameter dtype a local HF model directory declares (``config.json``), ``None`` for a preset or none."""
    import os

    if not os.path.isdir(arch):
        return None
    from transformers import AutoConfig

    dtype = getattr(AutoConfig.from_pretrained(arch), "dtype", None)
    dtype = getattr(torch, dtype, None) if isinstance(dtype, str) else dtype
    return dtype if isinstance(dtype, torch.dtype) else None


def copy_in_dtype(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """A deep copy of ``model`` whose parameters are detached ``dtype`` copies (``requires_grad=False``; buffers and
    tied parameters kept as they are). Each parameter is converted on its own, so a bf16 copy of an fp32 model never
    holds a full fp32 copy."""
    memo = {id(p): torch.nn.Parameter(p.detach().to(dtype, copy=True), requires_grad=False) for p in model.parameters()}
    return copy.deepcopy(model, memo)


class PolicyLifecycle:
    """The policy/reference/cost-model lifecycle and sharding hooks of :class:`ShaPOModule` (a mixin)."""

    @property
    def uses_lora(self) -> bool:
        """Whether the policy is a peft LoRA model (``model.lora`` given with r > 0)."""
        return bool(self.hparams.lora) and int(self.hparams.lora.get("r", 8)) > 0

    def remap_init_state(self, state: dict, source_method: str, source_cfg: dict | None = None) -> dict:
        """Map causal-LM weights (zoo-lm ``lm.*``, a bare HF state dict, another ShaPO run, full or LoRA) onto this
        policy, full or LoRA.

        * full weights into a LoRA policy: they become its base layers; the adapters are head keys and start fresh
          (B = 0, so the wrapped model computes what the full one did);
        * a LoRA ShaPO package into a full policy: merged with peft's ``merge_and_unload`` (its ``model.lora`` from
          ``source_cfg``);
        * a LoRA package into a LoRA policy with the same settings: unchanged.

        Only what the source provides is returned; the loader refuses missing and unexpected keys except the head
        keys (stage-A buffers and LoRA adapters).

        Raises:
            ValueError: a LoRA source whose ``model.lora`` settings are unknown (a bare state dict).
        """
        own = self.state_dict()
        if (
            source_method == self.method_name
            and any("lora_" in k for k in state)
            and self.uses_lora
            and set(state) <= set(own)
            and all(tuple(v.shape) == tuple(own[k].shape) for k, v in state.items())
        ):
            return state
        tied = bool(getattr(self._hf_model().config, "tie_word_embeddings", False))
        return map_lm_state(own, merged_if_lora(state, source_cfg, self.hparams.arch), tied)

    def _hf_model(self):
        """The transformers model under any peft wrapper."""
        return self.policy.get_base_model() if hasattr(self.policy, "get_base_model") else self.policy

    # ------------------------------------------------------------------ frozen models
    def setup(self, stage: str) -> None:
        """Build the frozen reference and load the cost model (neither is in the state dict).

        Raises:
            RecipeError: a ShaPO variant under FSDP1 (``trainer.strategy=fsdp``; use ``fsdp2``), DeepSpeed or
                another strategy that is not single-device, DDP or FSDP2 (``ModelParallelStrategy``).
        """
        if self._trainer is not None and self.hparams.variant != "dpo":
            from lightning.pytorch.strategies import (
                DDPStrategy,
                DeepSpeedStrategy,
                FSDPStrategy,
                ModelParallelStrategy,
                SingleDeviceStrategy,
            )

            strategy = self.trainer.strategy
            name = type(strategy).__name__
            if isinstance(strategy, FSDPStrategy):
                raise RecipeError(
                    "trainer.strategy=fsdp: ShaPO's masked step needs per-parameter shards, not FSDP1's flat ones; use "
                    "trainer.strategy=fsdp2 (FSDP2 fully_shard through Lightning's ModelParallelStrategy, see "
                    "zoo/methods/shapo/README.md), or model.variant=dpo for the baselines."
                )
            if isinstance(strategy, DeepSpeedStrategy) or not isinstance(
                strategy, (SingleDeviceStrategy, DDPStrategy, ModelParallelStrategy)
            ):  # DeepSpeed is a DDP
                raise RecipeError(
                    f"trainer.strategy: ShaPO's masked step supports single-device, DDP and FSDP2 (fsdp2), not {name}; "
                    "model.variant=dpo runs the baselines under other strategies."
                )
        if (self.hparams.reference or not self.uses_lora) and "reference" not in self._frozen:
            dtype = self._reference_dtype()
            if self.hparams.reference:
                with phase(f"loading model.reference {self.hparams.reference} (the frozen reference policy)"):
                    self._frozen["reference"] = self._load_reference(self.hparams.reference, dtype)
            else:
                self._frozen["reference"] = copy_in_dtype(self.policy, dtype)
            ref = self._frozen["reference"].eval()
            for p in ref.parameters():
                p.requires_grad_(False)
        if self.hparams.cost_model and "cost" not in self._frozen:
            from zoo.core.loading import load_module

            with phase(f"loading model.cost_model {self.hparams.cost_model} (the judge)"):
                cost, _ = load_module(self.hparams.cost_model)
            if not hasattr(cost, "score"):
                raise ValueError(
                    f"model.cost_model {self.hparams.cost_model!r} is a {cost.method_name!r} run, "
                    "not a shapo-cost-model"
                )
            from zoo.models.causal_lm import check_same_tokenizer

            # the judge scores the policy's token ids: both must mean the same tokens
            check_same_tokenizer(
                cost.tokenizer,
                self.tokenizer,
                f"model.cost_model {self.hparams.cost_model!r}",
                f"the policy (model.arch {self.hparams.arch!r})",
            )
            for p in cost.parameters():
                p.requires_grad_(False)
            self._frozen["cost"] = cost.eval()

    def _reference_dtype(self) -> torch.dtype:
        """The frozen reference's parameter dtype: bf16 under ``trainer.precision`` bf16-mixed / bf16-true, else fp32.

        The reference only runs under ``no_grad`` (and, in bf16-mixed, autocast, which computes its matmuls in bf16
        from fp32 weights too), so fp32 weights would buy it nothing but twice the memory: under bf16-mixed only its
        elementwise parts differ from an fp32 copy (embedding output, norms and residual stream carried in bf16), so
        at step 0 its log-probabilities equal the policy's to bf16 rounding rather than bit-exactly.
        """
        precision = str(getattr(self._trainer, "precision", "")) if self._trainer is not None else ""
        return torch.bfloat16 if precision.startswith("bf16") else torch.float32

    def _load_reference(self, ref: str, dtype: torch.dtype = torch.float32):
        from zoo.core.hub import clean_state_dict, load_source
        from zoo.models.causal_lm import build_causal_lm

        model = build_causal_lm(self.hparams.arch, dtype=dtype)
        state, _, src_cfg = load_source(ref)
        state = merged_if_lora(clean_state_dict(state), src_cfg, self.hparams.arch)
        own = {f"policy.{k}": v for k, v in model.state_dict().items()}
        mapped = map_lm_state(
            own, {k: v for k, v in state.items() if k not in self.head_keys}, bool(model.config.tie_word_embeddings)
        )
        # strict: a reference missing a weight (or with one the model lacks) is refused, as on every load path
        model.load_state_dict({k.removeprefix("policy."): v for k, v in mapped.items()})
        return model

    def _frozen_model(self, name: str):
        model = self._frozen[name]
        if next(model.parameters()).device != self.device:
            model.to(self.device)
        return model

    # ------------------------------------------------------------------ FSDP2
    def configure_model(self) -> None:
        """Under ``trainer.strategy=fsdp2`` (a ``ModelParallelStrategy``): shard policy and reference with FSDP2.

        Raises:
            RecipeError: a tensor-parallel dimension larger than 1 (this module only shards, it has no TP plan).
        """
        from zoo.models.sharding import data_parallel_mesh

        mesh = self._device_mesh
        if mesh is None or self._dp_group is not None:
            return
        self.shard(data_parallel_mesh(mesh, "shapo"))

    def shard(self, mesh) -> None:
        """FSDP2 on a 1-D data-parallel ``mesh``: each decoder layer of the policy is a ``fully_shard`` unit and the
        policy the root (:func:`zoo.models.sharding.shard_causal_lm`); a separate frozen reference is sharded the
        same way (it is another copy of a model the size of the policy). Under LoRA only the base weights and
        adapters of the one policy are sharded. Call on every rank, before the optimiser is built.

        Stage C then edits each rank's row shard of the down-projections (``MaskedPerturbation``) with the ascent
        gradient averaged over the ranks (``ascent.all_reduce_mean``).
        """
        from zoo.models.sharding import shard_causal_lm

        shard_causal_lm(self.policy, mesh)
        if "reference" in self._frozen:
            shard_causal_lm(self._frozen["reference"], mesh)
        self._dp_group = mesh.get_group()
        self._perturbation = None

    def _full_state(self, model) -> dict:
        """A module's full state dict on CPU (gathered from the shards under FSDP2: a collective, rank 0 gets it)."""
        from zoo.models.sharding import is_sharded

        if not is_sharded(model):
            return {k: v.cpu() for k, v in model.state_dict().items()}
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """A copied reference (``reference=None``, full fine-tuning) travels with the checkpoint so resume keeps it."""
        if not self.uses_lora and not self.hparams.reference and "reference" in self._frozen:
            checkpoint["shapo_reference"] = self._full_state(self._frozen["reference"])

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        if "shapo_reference" in checkpoint and "reference" in self._frozen:
            from zoo.models.sharding import is_sharded

            ref = self._frozen["reference"]
            if is_sharded(ref):
                from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

                reshard(ref)  # a root left gathered by a forward would hold plain tensors, not its shards

                set_model_state_dict(ref, checkpoint["shapo_reference"], options=StateDictOptions(full_state_dict=True))
            else:
                ref.load_state_dict(checkpoint["shapo_reference"])

    def _tokenizer(self):
        return self.tokenizer

    def export_hf(self, out_dir: str) -> None:
        """Save the policy (LoRA merged into a copy) and its tokenizer as an HF model directory, in the source model's
        dtype (``config.dtype``: bf16 for a Llama 3.2 directory, not the fp32 it trained in; a preset stays fp32)."""
        model = self.policy
        if self.uses_lora:
            model = copy.deepcopy(self.policy).merge_and_unload()
        if self._source_dtype is not None and self._source_dtype != next(model.parameters()).dtype:
            model = copy_in_dtype(model, self._source_dtype)
        model.save_pretrained(out_dir)
        self._tokenizer().save_pretrained(out_dir)
