"""ShaPO's policy and its frozen companions: LoRA wrapping, loading causal-LM weights, the reference pi_ref and the
cost model (built in ``setup``, kept outside the state dict), FSDP2 sharding, the checkpoint hooks that carry a copied
reference, and HF export. A mixin of :class:`zoo.methods.shapo.module.ShaPOModule` (reads its ``hparams``, ``policy``
and ``_frozen``)."""
from __future__ import annotations

import copy

import torch

from zoo.core.recipe import RecipeError
from zoo.models.sharding import reshard


def map_lm_state(own: dict, state: dict, tied: bool, source: str = "") -> dict:
    """Fill ``own`` (a state dict with ``policy.``-prefixed causal-LM keys, possibly peft-wrapped) from ``state``.

    A source key matches the own key whose plain HF name (``policy.``, ``base_model.model.`` and ``.base_layer``
    removed) equals the source key with some leading components dropped (``lm.model.layers.0...`` ->
    ``model.layers.0...``). Own keys without a source keep their values; a missing tied ``lm_head.weight`` is
    the embedding (ours: bookkeeping, no method content).

    Raises:
        ValueError: a base weight has no source.
    """
    def plain(key: str) -> str:
        return key[len("policy."):].removeprefix("base_model.model.").replace(".base_layer.", ".")

    targets = {plain(k): k for k in own if k.startswith("policy.") and "lora_" not in k}
    out, found = dict(own), set()
    for key, value in state.items():
        parts = key.split(".")
        for i in range(len(parts)):
            cand = ".".join(parts[i:])
            if cand in targets:
                out[targets[cand]] = value
                found.add(cand)
                break
    missing = [k for k in targets if k not in found and not (tied and k == "lm_head.weight")]
    if missing:
        raise ValueError(f"init_from ({source or 'weights'}): no source for {missing[:5]} "
                         f"(source keys start {list(state)[:3]})")
    if tied and "lm_head.weight" in targets and "lm_head.weight" not in found:
        emb = next(targets[k] for k in targets if k.endswith("embed_tokens.weight"))
        out[targets["lm_head.weight"]] = out[emb]
    return out


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
    memo = {id(p): torch.nn.Parameter(p.detach().to(dtype, copy=True), requires_grad=False)
            for p in model.parameters()}
    return copy.deepcopy(model, memo)


class PolicyLifecycle:
    """The policy/reference/cost-model lifecycle and sharding hooks of :class:`ShaPOModule` (a mixin)."""

    @property
    def uses_lora(self) -> bool:
        """Whether the policy is a peft LoRA model (``model.lora`` given with r > 0)."""
        return bool(self.hparams.lora) and int(self.hparams.lora.get("r", 8)) > 0

    @staticmethod
    def _wrap_lora(model, cfg: dict):
        from peft import LoraConfig, get_peft_model

        allowed = {"r", "alpha", "dropout", "target_modules"}
        unknown = set(cfg) - allowed
        if unknown:
            raise ValueError(f"model.lora: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        conf = LoraConfig(r=int(cfg.get("r", 8)), lora_alpha=float(cfg.get("alpha", 2 * cfg.get("r", 8))),
                          lora_dropout=float(cfg.get("dropout", 0.0)),
                          target_modules=list(cfg.get("target_modules") or
                                              ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                               "down_proj"]))
        return get_peft_model(model, conf)

    def remap_init_state(self, state: dict, source_method: str) -> dict:
        """Map causal-LM weights (zoo-lm ``lm.*``, a bare HF state dict, another ShaPO run) onto ``policy.*``.

        Keys this module has but the source lacks (LoRA adapters, stage-A buffers, a tied ``lm_head``) keep their
        current values.

        Raises:
            ValueError: a policy base weight has no source.
        """
        own = self.state_dict()
        if source_method == self.method_name and any(k.startswith("policy.") for k in state):
            return {**own, **state}
        tied = bool(getattr(self._hf_model().config, "tie_word_embeddings", False))
        return map_lm_state(own, state, tied, source_method)

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
                    "zoo/methods/shapo/README.md), or model.variant=dpo for the baselines.")
            if isinstance(strategy, DeepSpeedStrategy) or not isinstance(
                    strategy, (SingleDeviceStrategy, DDPStrategy, ModelParallelStrategy)):  # DeepSpeed is a DDP
                raise RecipeError(
                    f"trainer.strategy: ShaPO's masked step supports single-device, DDP and FSDP2 (fsdp2), not {name}; "
                    "model.variant=dpo runs the baselines under other strategies.")
        if (self.hparams.reference or not self.uses_lora) and "reference" not in self._frozen:
            dtype = self._reference_dtype()
            if self.hparams.reference:
                self._frozen["reference"] = self._load_reference(self.hparams.reference, dtype)
            else:
                self._frozen["reference"] = copy_in_dtype(self.policy, dtype)
            ref = self._frozen["reference"].eval()
            for p in ref.parameters():
                p.requires_grad_(False)
        if self.hparams.cost_model and "cost" not in self._frozen:
            from zoo.core.build import load_module

            cost, _ = load_module(self.hparams.cost_model)
            if not hasattr(cost, "score"):
                raise ValueError(f"model.cost_model {self.hparams.cost_model!r} is a {cost.method_name!r} run, "
                                 "not a shapo-cost-model")
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
        from zoo.core.hub import clean_state_dict, load_weights
        from zoo.models.causal_lm import build_causal_lm

        model = build_causal_lm(self.hparams.arch, dtype=dtype)
        state, source = load_weights(ref)
        own = {f"policy.{k}": v for k, v in model.state_dict().items()}
        mapped = map_lm_state(own, clean_state_dict(state), bool(model.config.tie_word_embeddings), source)
        model.load_state_dict({k[len("policy."):]: v for k, v in mapped.items()})
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
        mesh = self._device_mesh
        if mesh is None or self._dp_group is not None:
            return
        if "tensor_parallel" in (mesh.mesh_dim_names or ()) and mesh["tensor_parallel"].size() != 1:
            raise RecipeError(f"trainer.strategy: tensor_parallel_size={mesh['tensor_parallel'].size()} is not "
                              "supported by shapo; use trainer.strategy=fsdp2 (every device data-parallel, "
                              "parameters sharded by FSDP2)")
        self.shard(mesh["data_parallel"] if "data_parallel" in (mesh.mesh_dim_names or ()) else mesh)

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

                set_model_state_dict(ref, checkpoint["shapo_reference"],
                                     options=StateDictOptions(full_state_dict=True))
            else:
                ref.load_state_dict(checkpoint["shapo_reference"])

    def _tokenizer(self):
        from zoo.models.causal_lm import load_tokenizer, tokenizer_for

        return load_tokenizer(tokenizer_for(self.hparams.arch, self.hparams.tokenizer))
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
