"""ShaPO (sharpness-aware preference optimisation on an alignment-critical subspace) and its DPO baselines."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import torch
from torchmetrics.aggregation import MeanMetric

from zoo.core.module import ZooModule
from zoo.core.optim import build_optimizer
from zoo.core.recipe import RecipeError
from zoo.core.registry import register_method
from zoo.methods.shapo import losses as L
from zoo.methods.shapo.ascent import MaskedGradient, all_reduce_mean
from zoo.methods.shapo.lm import completion_kl, right_pad, sample_completions, sequence_logps
from zoo.methods.shapo.metrics import preference_accuracy
from zoo.methods.shapo.probe import mean_pooled_states, train_probe
from zoo.methods.shapo.subspace import SIGNS, MaskedPerturbation, down_projections, rank_neurons
from zoo.models.causal_lm import drop_tied_aliases, fill_tied_aliases, tied_aliases
from zoo.models.preference_data import PreferenceDataModule, format_prompt
from zoo.models.sharding import reshard

VARIANTS = ("dpo", "token", "reward")
MASKS_FILE = "shapo_masks.safetensors"


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


def _config_dtype(arch: str) -> torch.dtype | None:
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


@register_method("shapo", datamodule=PreferenceDataModule)
class ShaPOModule(ZooModule):
    """Preference optimisation of a causal LM: DPO-family losses, with ShaPO's masked sharpness-aware step.

    ``variant="dpo"`` trains with the chosen loss only (the baselines); ``"token"`` is token-level ShaPO (every
    ``shapo_every``-th optimiser step is a masked SAM step); ``"reward"`` is reward-level ShaPO (the soft-label loss
    with p* from the cost model, plus the same masked SAM steps). Optimisation is manual (two passes per ShaPO step).

    Args:
        arch: a zoo-lm preset (``zoo-lm-small``, ``zoo-lm-tiny``) or a local HF model directory.
        tokenizer: tokenizer directory (``None``: the arch directory, else zoo-lm's tokenizer).
        reference: weights of the frozen reference pi_ref (zoo id, package, HF dir, .ckpt, .safetensors);
            ``None`` = a copy of the policy as it is when training or evaluation starts, or under LoRA the
            policy with its adapters disabled (no copy).
        variant: ``dpo`` | ``token`` | ``reward``.
        loss: ``dpo`` | ``ipo`` | ``rdpo`` | ``simpo`` (ignored by ``reward``, which uses the soft label).
        beta: DPO beta. label_smoothing: cDPO eps. rdpo_epsilon: rDPO eps. simpo_gamma_beta_ratio: SimPO gamma/beta.
        aggregation: ``mean`` | ``drdpo`` (Dr.DPO log-sum-exp with ``drdpo_beta`` = beta').
        shapo_every: k; optimiser steps s with (s + 1) % k == 0 are ShaPO steps (k = 1: all).
        perturbation: ``gamma`` (authors: eps = gamma g_masked, gamma ~ U[gamma_min, gamma_max] per step) or
            ``rho`` (ours: eps = rho g_masked / ||g_masked||).
        probe_percentage: p, percent of all down-projection neurons selected.
        neuron_sign: ``negative`` (authors' ascending sort) | ``positive`` | ``abs``; see README.
        probe_pairs: training pairs the probe reads (each gives a safe and an unsafe example).
        probe_epochs, probe_lr: probe optimiser settings.
        masks_path: reuse saved masks (a ``shapo_masks.safetensors`` written by a run) instead of stage A.
        cost_model: the cost model (``shapo-cost-model`` zoo id, package or run dir): the p* of ``reward`` and the
            judge of the harmful-completion rate; ``None`` disables both.
        reward_beta: beta_r of p*.
        lora: ``{r, alpha, dropout, target_modules}`` for peft LoRA; ``None`` or r = 0 for full fine-tuning (the
            recipes carry ``{r: 0, ...}`` so that ``model.lora.r=8`` switches LoRA on).
        precompute_ref_logps: compute the reference log-probabilities of every pair once before training.
        accumulate_grad_batches: micro-batches per optimiser step.
        max_grad_norm: gradient clipping (L2 norm), ``None`` for none.
        optimizer: :func:`zoo.core.optim.build_optimizer` dict.
        eval_generation: sample completions on validation to measure the harmful rate and the KL.
        max_new_tokens, temperature, gen_seed, gen_batch_size: sampling settings (temperature 0 = greedy).
        gradient_checkpointing: enable HF gradient checkpointing on the policy.
    """

    export_formats = ("package", "hf")

    def __init__(self, arch: str = "zoo-lm-small", tokenizer: str | None = None, reference: str | None = None,
                 variant: str = "token", loss: str = "dpo", beta: float = 0.1, label_smoothing: float = 0.0,
                 rdpo_epsilon: float = 0.1, simpo_gamma_beta_ratio: float = 0.5, aggregation: str = "mean",
                 drdpo_beta: float = 1.0, shapo_every: int = 5, perturbation: str = "gamma",
                 gamma_min: float = 2e-6, gamma_max: float = 4e-6, rho: float = 0.05,
                 probe_percentage: float = 1.0, neuron_sign: str = "negative", probe_pairs: int = 512,
                 probe_epochs: int = 10, probe_lr: float = 1e-3, masks_path: str | None = None,
                 cost_model: str | None = None, reward_beta: float = 0.5, lora: dict | None = None,
                 precompute_ref_logps: bool = False, accumulate_grad_batches: int = 1,
                 max_grad_norm: float | None = 10.0, optimizer: dict | None = None, eval_generation: bool = True,
                 max_new_tokens: int = 48, temperature: float = 1.0, gen_seed: int = 0, gen_batch_size: int = 32,
                 gradient_checkpointing: bool = False):
        super().__init__()
        self.save_hyperparameters()
        self._check_args()
        from zoo.models.causal_lm import build_causal_lm

        # fp32 weights (loaded straight into fp32, no bf16 copy first): a local HF directory would otherwise load in
        # its config's dtype (bf16 for Llama 3.2), where AdamW at lr 5e-7 and the un-normalised gamma perturbation
        # would round away; trainer.precision decides the compute dtype
        self._source_dtype = _config_dtype(arch)  # what export_hf writes back
        self.policy = build_causal_lm(arch, dtype=torch.float32)
        if gradient_checkpointing:  # non-reentrant: stage C's ascent takes gradients at inner outputs
            self.policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if self.uses_lora:
            self.policy = self._wrap_lora(self.policy, lora)
        self._tied = tied_aliases(self.policy, "policy.")
        self.register_state_dict_post_hook(drop_tied_aliases)
        self.register_load_state_dict_pre_hook(fill_tied_aliases)
        projections = down_projections(self.policy)
        d_ff = projections[0].weight.shape[projections[0].neuron_axis]
        d = projections[0].weight.shape[1 - projections[0].neuron_axis]
        # stage A outputs live in the state dict, so packages and checkpoints carry them
        self.register_buffer("neuron_masks", torch.zeros(len(projections), d_ff, dtype=torch.bool))
        self.register_buffer("probe_direction", torch.zeros(d))
        self.register_buffer("masks_ready", torch.tensor(False))
        self.automatic_optimization = False
        self._frozen: dict = {}          # reference and cost model: outside the state dict on purpose
        self._ref_cache: dict = {}       # (split, index) -> (ref chosen logp, ref rejected logp)
        self._cost_cache: dict = {}      # train index -> (c_w, c_l)
        self._pending: list = []         # micro-batches of the current ShaPO step
        self._micro = 0
        self._perturbation: MaskedPerturbation | None = None
        self._dp_group = None            # FSDP2: the data-parallel process group the policy is sharded over
        self.probe_stats: dict = {}
        self.val_accuracy, self.val_margin, self.val_loss = MeanMetric(), MeanMetric(), MeanMetric()
        self.val_harmful, self.val_harmful_redteam, self.val_harmful_heldout = MeanMetric(), MeanMetric(), MeanMetric()
        self.val_kl, self.val_cost = MeanMetric(), MeanMetric()

    # ------------------------------------------------------------------ construction
    def _check_args(self) -> None:
        hp = self.hparams
        choices = {"variant": (hp.variant, VARIANTS), "loss": (hp.loss, L.LOSSES),
                   "aggregation": (hp.aggregation, L.AGGREGATIONS), "perturbation": (hp.perturbation, ("gamma", "rho")),
                   "neuron_sign": (hp.neuron_sign, SIGNS)}
        for key, (value, allowed) in choices.items():
            if value not in allowed:
                raise ValueError(f"model.{key}: {value!r} is not one of {allowed}")
        if hp.shapo_every < 1 or hp.accumulate_grad_batches < 1:
            raise ValueError("model.shapo_every and model.accumulate_grad_batches must be >= 1")
        if not 0 <= hp.gamma_min <= hp.gamma_max:
            raise ValueError(f"model.gamma_min/gamma_max: need 0 <= {hp.gamma_min} <= {hp.gamma_max}")
        if hp.variant == "reward" and not hp.cost_model:
            raise ValueError("model.variant=reward needs model.cost_model (a shapo-cost-model zoo id or run)")

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

    # ------------------------------------------------------------------ forward pieces
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Policy logits ``(B, T, V)``."""
        return self.policy(input_ids=input_ids, attention_mask=attention_mask).logits

    def _pair_logps(self, model, batch: dict) -> tuple[torch.Tensor, ...]:
        """One forward over chosen and rejected stacked: ``(sum_w, sum_l, n_w, n_l)``, each ``(B,)``."""
        ids = torch.cat([batch["chosen_input_ids"], batch["rejected_input_ids"]])
        mask = torch.cat([batch["chosen_attention_mask"], batch["rejected_attention_mask"]])
        labels = torch.cat([batch["chosen_labels"], batch["rejected_labels"]])
        logp, n = sequence_logps(model, ids, mask, labels)
        B = batch["chosen_input_ids"].shape[0]
        return logp[:B], logp[B:], n[:B], n[B:]

    @torch.no_grad()
    def _reference_logps(self, batch: dict, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        keys = [(split, int(i)) for i in batch["index"]]
        if self.hparams.precompute_ref_logps and all(k in self._ref_cache for k in keys):
            vals = torch.tensor([self._ref_cache[k] for k in keys], device=self.device)
            return vals[:, 0], vals[:, 1]
        if "reference" in self._frozen:
            ref = self._frozen_model("reference")
            ref_w, ref_l, _, _ = self._pair_logps(ref, batch)
            reshard(ref)  # FSDP2: no backward follows to free its root's gathered parameters
        else:  # LoRA without a named reference: the base model is the reference
            with self.policy.disable_adapter():
                ref_w, ref_l, _, _ = self._pair_logps(self.policy, batch)
        return ref_w, ref_l

    @torch.no_grad()
    def _p_star(self, batch: dict) -> torch.Tensor:
        """p* from the cost model, cached per training pair (the cost model is frozen)."""
        keys = [int(i) for i in batch["index"]]
        missing = [k for k in keys if k not in self._cost_cache]
        if missing:
            cost = self._frozen_model("cost")
            c_w = cost.score(batch["chosen_input_ids"], batch["chosen_attention_mask"])
            c_l = cost.score(batch["rejected_input_ids"], batch["rejected_attention_mask"])
            for k, a, b in zip(keys, c_w.tolist(), c_l.tolist()):
                self._cost_cache[k] = (a, b)
        vals = torch.tensor([self._cost_cache[k] for k in keys], device=self.device)
        return L.reward_preference_probability(vals[:, 0], vals[:, 1], self.hparams.reward_beta)

    def _loss(self, batch: dict, split: str) -> tuple[torch.Tensor, dict]:
        """Scalar loss of one (micro-)batch and detached per-example statistics."""
        hp = self.hparams
        pol_w, pol_l, n_w, n_l = self._pair_logps(self.policy, batch)
        ref_w, ref_l = self._reference_logps(batch, split)
        p_star = self._p_star(batch) if hp.variant == "reward" and split == "train" else None
        per_example = L.preference_losses(
            hp.loss, hp.beta, pol_w, pol_l, ref_w, ref_l, avg_chosen=pol_w / n_w.clamp_min(1),
            avg_rejected=pol_l / n_l.clamp_min(1), label_smoothing=hp.label_smoothing, rdpo_epsilon=hp.rdpo_epsilon,
            simpo_gamma_beta_ratio=hp.simpo_gamma_beta_ratio, p_star=p_star)
        loss = L.aggregate(per_example, hp.aggregation, hp.drdpo_beta)
        chosen_reward = hp.beta * (pol_w - ref_w).detach()
        rejected_reward = hp.beta * (pol_l - ref_l).detach()
        return loss, {"margin": chosen_reward - rejected_reward}

    # ------------------------------------------------------------------ stage A
    def on_fit_start(self) -> None:
        """Stage A (probe -> masks) unless masks are already known, then the optional reference precompute."""
        dm = self.trainer.datamodule
        if self.hparams.variant != "dpo" and not bool(self.masks_ready):
            if self.hparams.masks_path:
                self.load_masks(self.hparams.masks_path)
            else:
                self.compute_masks(dm.clean_train_dataloader())
            self._save_masks(Path(self.trainer.default_root_dir) / MASKS_FILE)
        if self.hparams.precompute_ref_logps:
            for split, loader in (("train", dm.ordered_train_dataloader()), ("val", dm.val_dataloader())):
                for batch in loader:
                    batch = self._to_device(batch)
                    ref_w, ref_l = self._reference_logps(batch, split)  # not cached yet: computed
                    for i, a, b in zip(batch["index"].tolist(), ref_w.tolist(), ref_l.tolist()):
                        self._ref_cache[(split, i)] = (a, b)

    def _to_device(self, batch: dict) -> dict:
        return {k: v.to(self.device) for k, v in batch.items()}

    @torch.no_grad()
    def compute_masks(self, loader) -> dict:
        """Stage A on the pairs of ``loader``: probe, direction v = W1 - W0, neuron ranking, masks (in place).

        Returns:
            The probe statistics (also kept in ``self.probe_stats``).
        """
        hp = self.hparams
        feats, labels, seen = [], [], 0
        was_training = self.policy.training
        self.policy.eval()
        for batch in loader:
            batch = self._to_device(batch)
            take = min(hp.probe_pairs - seen, batch["index"].numel())
            if take <= 0:
                break
            for side, label in (("chosen", 0), ("rejected", 1)):
                f = mean_pooled_states(self.policy, batch[f"{side}_input_ids"][:take],
                                       batch[f"{side}_attention_mask"][:take])
                feats.append(f.cpu())
                labels.append(torch.full((take,), label, dtype=torch.long))
            seen += take
        self.policy.train(was_training)
        feats, labels = torch.cat(feats), torch.cat(labels)
        with torch.enable_grad():
            probe = train_probe(feats, labels, epochs=hp.probe_epochs, lr=hp.probe_lr,
                                heldout=max(1, len(labels) // 10), seed=0)
        masks = rank_neurons(down_projections(self.policy), probe.direction.to(self.device), hp.probe_percentage,
                             hp.neuron_sign)
        direction = probe.direction
        if self._trainer is not None and self.trainer.world_size > 1:
            # one set of masks for all ranks (FSDP2 needs it: the ranks hold shards of the same weights)
            masks, direction = self.trainer.strategy.broadcast((masks.cpu(), direction.cpu()), src=0)
        self.neuron_masks.copy_(masks.to(self.device))
        self.probe_direction.copy_(direction.to(self.device))
        self.masks_ready.fill_(True)
        self._perturbation = None
        self.probe_stats = {"probe_examples": len(labels), "probe_train_accuracy": probe.train_accuracy,
                            "probe_heldout_accuracy": probe.heldout_accuracy,
                            "neurons_selected": int(masks.sum()), "neurons_total": int(masks.numel())}
        return self.probe_stats

    def _save_masks(self, path: Path) -> None:
        if self.trainer is not None and not self.trainer.is_global_zero:
            return
        from safetensors.torch import save_file

        path.parent.mkdir(parents=True, exist_ok=True)
        save_file({"neuron_masks": self.neuron_masks.cpu().to(torch.uint8), "probe_direction": self.probe_direction.cpu()},
                  str(path), metadata={"neuron_sign": self.hparams.neuron_sign,
                                       "probe_percentage": str(self.hparams.probe_percentage),
                                       "probe_stats": json.dumps(self.probe_stats)})

    def load_masks(self, path: str) -> None:
        """Load masks saved by a run (``shapo_masks.safetensors``).

        Raises:
            ValueError: the file is missing or its masks do not fit this model.
        """
        from safetensors.torch import load_file

        if not Path(path).is_file():
            raise ValueError(f"model.masks_path: no such file {path}")
        data = load_file(path)
        masks = data["neuron_masks"].bool()
        if masks.shape != self.neuron_masks.shape:
            raise ValueError(f"model.masks_path: masks {tuple(masks.shape)} do not fit this model "
                             f"{tuple(self.neuron_masks.shape)}")
        self.neuron_masks.copy_(masks)
        self.probe_direction.copy_(data["probe_direction"])
        self.masks_ready.fill_(True)
        self._perturbation = None

    def package_extras(self) -> dict[str, str]:
        """The stage-A masks file goes into the release package beside the weights (also in the state dict)."""
        path = Path(self.trainer.default_root_dir) / MASKS_FILE if self._trainer is not None else None
        return {MASKS_FILE: str(path)} if path is not None and path.is_file() else {}

    # ------------------------------------------------------------------ stage C
    def configure_optimizers(self):
        params = [p for p in self.policy.parameters() if p.requires_grad]
        steps = None
        if self._trainer is not None:
            steps = max(1, math.ceil(self.trainer.estimated_stepping_batches / self.hparams.accumulate_grad_batches))
        return build_optimizer(params, self.hparams.optimizer, total_steps=steps)

    def is_shapo_step(self, step: int) -> bool:
        """Whether optimiser step ``step`` (0-based) is a ShaPO step."""
        return self.hparams.variant != "dpo" and (step + 1) % self.hparams.shapo_every == 0

    def perturbation_gamma(self, step: int) -> float:
        """gamma ~ U[gamma_min, gamma_max] for optimiser step ``step``, from a generator seeded by the step
        (reproducible and resume-safe; the authors draw once per micro-batch from the global RNG)."""
        g = torch.Generator().manual_seed(1_000_003 * (self.hparams.gen_seed + 1) + step)
        lo, hi = self.hparams.gamma_min, self.hparams.gamma_max
        return lo + (hi - lo) * torch.rand((), generator=g).item()

    def _get_perturbation(self) -> MaskedPerturbation:
        if self._perturbation is None:
            if not bool(self.masks_ready):
                raise RuntimeError("ShaPO step before stage A: no neuron masks (run fit, or set model.masks_path)")
            self._perturbation = MaskedPerturbation(down_projections(self.policy), self.neuron_masks)
        return self._perturbation

    def shapo_backward(self, batches: list[dict], scale: float) -> tuple[torch.Tensor, float]:
        """The masked sharpness-aware gradient of the mean loss over ``batches``, accumulated into ``.grad``.

        1. g ⊙ M, the selected columns of d(mean loss)/dW_down at theta, from the down-projections' inputs and output
           gradients (``ascent.MaskedGradient``: ``.grad`` is untouched, so the authors' stash/restore is unnecessary;
           under FSDP2 averaged over the ranks); 2. eps on the selected columns only (each rank its row shard under
           FSDP2); 3. backward of each micro-batch loss * ``scale`` at theta + eps; 4. the selected columns are
           restored bit-exactly.

        Returns:
            The mean loss at the perturbed point and ||eps||.
        """
        pert = self._get_perturbation()
        sliced = None
        with MaskedGradient(self.policy, pert.projections, pert.index) as mg:
            for batch in batches:
                loss, _ = self._loss(batch, "train")
                g = mg.grads(loss / len(batches))
                sliced = g if sliced is None else [a + b for a, b in zip(sliced, g)]
        if self._dp_group is not None:
            sliced = all_reduce_mean(sliced, self._dp_group)
        step = self.trainer.global_step if self._trainer is not None else 0
        size = pert.apply_masked(sliced, self.hparams.perturbation, gamma=self.perturbation_gamma(step),
                                 rho=self.hparams.rho)
        total = 0.0
        try:
            for batch in batches:
                loss, stats = self._loss(batch, "train")
                self._backward(loss * scale)
                total += loss.detach() / len(batches)
                self._log_train(stats)
        finally:
            pert.restore()
        return total, size

    def _backward(self, loss: torch.Tensor) -> None:
        if self._trainer is not None:
            self.manual_backward(loss)
        else:
            loss.backward()

    def training_step(self, batch: dict, batch_idx: int):
        hp = self.hparams
        acc = hp.accumulate_grad_batches
        step = self.trainer.global_step
        self._micro += 1
        last = self._micro % acc == 0
        if self.is_shapo_step(step):
            self._pending.append(batch)
            if not last:
                return None
            loss, size = self.shapo_backward(self._pending, 1.0 / acc)
            self._pending = []
            self.log("train/eps_norm", size, on_step=True, batch_size=batch["index"].numel())
        else:
            loss, stats = self._loss(batch, "train")
            self.manual_backward(loss / acc)
            self._log_train(stats)
        self.log("train/loss", loss.detach(), on_step=True, prog_bar=True, batch_size=batch["index"].numel())
        if self.probe_stats:  # stage A's probe, so the run's metrics record it
            self.log_dict({"probe/train_accuracy": self.probe_stats["probe_train_accuracy"],
                           "probe/heldout_accuracy": self.probe_stats["probe_heldout_accuracy"]},
                          on_step=False, on_epoch=True, batch_size=1)
        if last:
            opt = self.optimizers()
            if hp.max_grad_norm:
                self.clip_gradients(opt, gradient_clip_val=hp.max_grad_norm, gradient_clip_algorithm="norm")
            opt.step()
            opt.zero_grad(set_to_none=True)
            sched = self.lr_schedulers()
            if sched is not None:
                sched.step()
        return loss.detach()

    def _log_train(self, stats: dict) -> None:
        if self._trainer is None:
            return
        n = stats["margin"].numel()
        self.log("train/margin", stats["margin"].mean(), on_step=True, batch_size=n)
        self.log("train/accuracy", preference_accuracy(stats["margin"]).mean(), on_step=True, batch_size=n)

    # ------------------------------------------------------------------ evaluation
    def validation_step(self, batch: dict, batch_idx: int) -> None:
        """Preference accuracy, reward margin and loss on clean held-out pairs (never flipped)."""
        loss, stats = self._loss(batch, "val")
        n = stats["margin"].numel()
        self.val_accuracy.update(preference_accuracy(stats["margin"]))
        self.val_margin.update(stats["margin"])
        self.val_loss.update(loss.detach(), weight=n)
        self.log("val/accuracy", self.val_accuracy, on_epoch=True, prog_bar=True, batch_size=n)
        self.log("val/margin", self.val_margin, on_epoch=True, batch_size=n)
        self.log("val/loss", self.val_loss, on_epoch=True, batch_size=n)

    def on_validation_epoch_end(self) -> None:
        if not self.hparams.eval_generation or self.trainer.sanity_checking:
            return
        dm = self.trainer.datamodule
        for name, value in self.generation_metrics(dm.generation_prompts(), dm.tokenizer).items():
            self.log(f"val/{name}", value)

    @torch.no_grad()
    def generation_metrics(self, prompts: list[tuple[str, list[int]]], tokenizer) -> dict[str, torch.Tensor]:
        """Sample a reply to each prompt; KL to the reference along it; the cost model's verdict.

        Args:
            prompts: ``(source, token ids)`` with source ``redteam`` or ``heldout``.

        Returns:
            ``kl_ref`` (nats per reply) and, with a cost model, ``harmful_rate`` (share of replies whose cost
            exceeds the cost model's threshold), ``harmful_rate_redteam``, ``harmful_rate_heldout``, ``cost``.
        """
        hp = self.hparams
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        ids = [p for _, p in prompts]
        was_training = self.policy.training
        self.policy.eval()
        completions = sample_completions(self.policy, ids, pad, tokenizer.eos_token_id, hp.max_new_tokens,
                                         hp.temperature, hp.gen_seed, hp.gen_batch_size)
        kl = completion_kl(lambda i, m: self.policy(input_ids=i, attention_mask=m).logits, self._reference_logits,
                           ids, completions, pad, hp.gen_batch_size)
        self.val_kl.update(kl)
        out = {"kl_ref": self.val_kl.compute()}
        self.val_kl.reset()
        if "cost" in self._frozen:
            cost_model = self._frozen_model("cost")
            costs = []
            for i in range(0, len(ids), hp.gen_batch_size):
                seqs = [p + c for p, c in zip(ids[i: i + hp.gen_batch_size], completions[i: i + hp.gen_batch_size])]
                costs.append(cost_model.score(*right_pad(seqs, pad, self.device)))
            costs = torch.cat(costs)
            harmful = (costs > cost_model.threshold).float()
            src = torch.tensor([s == "redteam" for s, _ in prompts], device=harmful.device)
            for metric, values, key in ((self.val_harmful, harmful, "harmful_rate"),
                                        (self.val_harmful_redteam, harmful[src], "harmful_rate_redteam"),
                                        (self.val_harmful_heldout, harmful[~src], "harmful_rate_heldout"),
                                        (self.val_cost, costs, "cost")):
                if values.numel():
                    metric.update(values)
                    out[key] = metric.compute()
                    metric.reset()
        self.policy.train(was_training)
        return out

    def _reference_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if "reference" in self._frozen:
            ref = self._frozen_model("reference")
            logits = ref(input_ids=input_ids, attention_mask=attention_mask).logits
            reshard(ref)  # FSDP2: no backward follows to free its root's gathered parameters
            return logits
        with self.policy.disable_adapter():
            return self.policy(input_ids=input_ids, attention_mask=attention_mask).logits

    # ------------------------------------------------------------------ user-facing
    def _tokenizer(self):
        from zoo.models.causal_lm import load_tokenizer, tokenizer_for

        return load_tokenizer(tokenizer_for(self.hparams.arch, self.hparams.tokenizer))

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """``zoo predict shapo.zoo-lm-hh "PROMPT" ...``: one sampled reply per prompt (the recipe's sampling)."""
        tok = self._tokenizer()
        prompts = [tok(format_prompt(tok, f"\n\nHuman: {x}\n\nAssistant:"), add_special_tokens=False)["input_ids"]
                   for x in inputs]
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        replies = sample_completions(self.policy.eval(), prompts, pad, tok.eos_token_id, self.hparams.max_new_tokens,
                                     self.hparams.temperature, self.hparams.gen_seed, self.hparams.gen_batch_size)
        return "\n\n".join(f"> {x}\n{tok.decode(r, skip_special_tokens=True).strip()}" for x, r in zip(inputs, replies))

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
