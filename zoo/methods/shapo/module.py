"""ShaPO (sharpness-aware preference optimisation on an alignment-critical subspace) and its DPO baselines.

The module holds construction, the DPO-family loss of a batch and stage C (the masked sharpness-aware step); the
policy/reference lifecycle and FSDP2 sharding are in ``policy.py``, stage A in ``stage_a.py`` and evaluation in
``evaluation.py`` (mixins of :class:`ShaPOModule`); what stays here (~400 lines) shares one set of hyperparameters.
"""

from __future__ import annotations

import math
from typing import Annotated, ClassVar, Literal

import torch
from torchmetrics.aggregation import MeanMetric

from zoo.core.constraints import NonNegative, NonNegativeInt, Positive, PositiveInt, Range
from zoo.core.module import ZooModule
from zoo.core.optim import build_optimizer
from zoo.core.registry import register_method
from zoo.methods.shapo import losses as L
from zoo.methods.shapo.ascent import MaskedGradient, all_reduce_mean
from zoo.methods.shapo.datamodule import PreferenceDataModule
from zoo.methods.shapo.evaluation import Evaluation
from zoo.methods.shapo.lm import sequence_logps
from zoo.methods.shapo.metrics import preference_accuracy
from zoo.methods.shapo.policy import PolicyLifecycle, config_dtype
from zoo.methods.shapo.stage_a import StageA
from zoo.methods.shapo.subspace import SIGNS, MaskedPerturbation, down_projections
from zoo.models.causal_lm import drop_tied_aliases, enable_checkpointing, fill_tied_aliases, tied_aliases
from zoo.models.sharding import reshard

VARIANTS = ("dpo", "token", "reward")


@register_method("shapo", datamodule=PreferenceDataModule)
class ShaPOModule(PolicyLifecycle, StageA, Evaluation, ZooModule):
    """Preference optimisation of a causal LM: DPO-family losses, with ShaPO's masked sharpness-aware step.

    ``variant="dpo"`` trains with the chosen loss only (the baselines); ``"token"`` is token-level ShaPO (every
    ``shapo_every``-th optimiser step is a masked SAM step); ``"reward"`` is reward-level ShaPO (the soft-label loss
    with p* from the cost model, plus the same masked SAM steps). Optimisation is manual (two passes per ShaPO step).

    Args:
        arch: a zoo-lm preset (``zoo-lm-small``, ``zoo-lm-tiny``), a pretrained base id (``smollm2-135m-instruct``),
            a local HF model directory or a Hub name (:func:`zoo.models.causal_lm.build_causal_lm`); a pretrained
            model brings its own tokenizer, chat template, BOS and EOS.
        tokenizer: tokenizer directory (``None``: the arch directory, else zoo-lm's tokenizer).
        reference: weights of the frozen reference pi_ref (zoo id, package, HF dir, .ckpt, .safetensors);
            ``None`` = a copy of the policy as it is when training or evaluation starts, or under LoRA the
            policy with its adapters disabled (no copy).
        variant: ``dpo`` | ``token`` | ``reward``.
        loss: ``dpo`` | ``ipo`` | ``rdpo`` | ``simpo`` (ignored by ``reward``, which uses the soft label).
        beta: DPO beta. label_smoothing: cDPO eps. rdpo_epsilon: rDPO eps. simpo_gamma_beta_ratio: SimPO gamma/beta.
        aggregation: ``mean`` | ``drdpo`` (Dr.DPO log-sum-exp over the batch).
        drdpo_beta: Dr.DPO's beta' (temperature of the log-sum-exp).
        shapo_every: k; optimiser steps s with (s + 1) % k == 0 are ShaPO steps (k = 1: all).
        perturbation: ``gamma`` (authors: eps = gamma g_masked, gamma ~ U[gamma_min, gamma_max] per step) or
            ``rho`` (ours: eps = rho g_masked / ||g_masked||).
        gamma_min, gamma_max: the range gamma is drawn from per step (``gamma``).
        rho: the perturbation's norm (``rho``).
        probe_percentage: p, percent of all down-projection neurons selected.
        neuron_sign: ``negative`` (authors' ascending sort) | ``positive`` | ``abs``; see README.
        probe_pairs: training pairs the probe reads (each gives a safe and an unsafe example).
        probe_epochs, probe_lr: probe optimiser settings.
        masks_path: reuse saved masks (a ``shapo_masks.safetensors`` written by a run) instead of stage A.
        stage_a_model: weights stage A reads (probe features and the ranked down-projection columns), loaded like
            ``reference``; ``None`` (default, ours) = the starting policy; ``zoo-lm.base`` = the pre-trained model
            before chat SFT, as the authors rank on the base Llama-3.2-3B (same architecture required).
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
        greedy_eval: with ``temperature > 0``, also judge greedy replies (``harmful_rate_greedy``, ``kl_ref_greedy``).
        judge_reference: also sample the reference's own replies to the same prompts (same seed) and judge them
            (``harmful_rate_ref``, ``..._ref_greedy``): the "before" figures. The reference is frozen, so this is
            done once per run, at the first validation.
        gradient_checkpointing: enable HF gradient checkpointing on the policy.
    """

    export_formats = ("package", "hf")
    trainer_rules = (
        {
            "when": {"variant": ["token", "reward"]},
            "refused_strategies": ["fsdp", "deepspeed"],
            "why": "ShaPO's masked step supports single-device, DDP and FSDP2 (trainer.strategy=fsdp2), not "
            "FSDP1's flat shards or DeepSpeed; model.variant=dpo runs the baselines under them",
        },
    )
    model_rules = (
        {
            "when": {"variant": ["reward"]},
            "requires": ["cost_model"],
            "why": "model.variant=reward takes its soft labels from a cost model: name a shapo-cost-model zoo id, "
            "package or run that reads the policy's tokens (over SmolLM2: a shapo-cost-model-smollm2.yaml run)",
        },
    )
    # stage-A outputs (recomputed when masks_ready is False) and LoRA adapters (fresh when full weights are wrapped)
    head_keys = ("neuron_masks", "probe_direction", "masks_ready", "policy.*lora_*")
    weight_settings: ClassVar[dict[str, str]] = {"lm.arch": "model.arch", "lm.tokenizer": "model.tokenizer"}

    def __init__(
        self,
        arch: str = "zoo-lm-small",
        tokenizer: str | None = None,
        reference: str | None = None,
        variant: Literal["dpo", "token", "reward"] = "token",
        loss: Literal["dpo", "ipo", "rdpo", "simpo"] = "dpo",
        beta: Positive = 0.1,
        label_smoothing: Annotated[float, Range(0, 0.5)] = 0.0,
        rdpo_epsilon: Annotated[float, Range(0, 0.5, max_open=True)] = 0.1,
        simpo_gamma_beta_ratio: NonNegative = 0.5,
        aggregation: Literal["mean", "drdpo"] = "mean",
        drdpo_beta: Positive = 1.0,
        shapo_every: PositiveInt = 5,
        perturbation: Literal["gamma", "rho"] = "gamma",
        gamma_min: NonNegative = 2e-6,
        gamma_max: NonNegative = 4e-6,
        rho: NonNegative = 0.05,
        probe_percentage: Annotated[float, Range(0, 100, min_open=True)] = 1.0,
        neuron_sign: Literal["negative", "positive", "abs"] = "negative",
        probe_pairs: PositiveInt = 512,
        probe_epochs: PositiveInt = 10,
        probe_lr: Positive = 1e-3,
        masks_path: str | None = None,
        stage_a_model: str | None = None,
        cost_model: str | None = None,
        reward_beta: Positive = 0.5,
        lora: dict | None = None,
        precompute_ref_logps: bool = False,
        accumulate_grad_batches: PositiveInt = 1,
        max_grad_norm: Positive | None = 10.0,
        optimizer: dict | None = None,
        eval_generation: bool = True,
        max_new_tokens: PositiveInt = 48,
        temperature: NonNegative = 1.0,
        gen_seed: NonNegativeInt = 0,
        gen_batch_size: PositiveInt = 32,
        greedy_eval: bool = True,
        judge_reference: bool = False,
        gradient_checkpointing: bool = False,
    ):
        super().__init__()
        self.save_hyperparameters()
        self._check_args()
        from zoo.models.causal_lm import build_causal_lm, check_tokenizer_fits, load_tokenizer, tokenizer_for, wrap_lora

        # fp32 weights (loaded straight into fp32, no bf16 copy first): a local HF directory would otherwise load in
        # its config's dtype (bf16 for Llama 3.2), where AdamW at lr 5e-7 and the un-normalised gamma perturbation
        # would round away; trainer.precision decides the compute dtype
        self._source_dtype = config_dtype(arch)  # what export_hf writes back
        self.policy = build_causal_lm(arch, dtype=torch.float32)
        # the tokenizer follows the model (model.arch, or model.tokenizer); datamodules take it from here
        self.tokenizer = load_tokenizer(tokenizer_for(arch, tokenizer))
        check_tokenizer_fits(
            self.tokenizer,
            self.policy,
            f"model.arch {arch!r}",
            f"the tokenizer {tokenizer_for(arch, tokenizer) or 'zoo-lm-bpe8k (shipped)'}",
        )
        if gradient_checkpointing:  # non-reentrant: stage C's ascent takes gradients at inner outputs
            enable_checkpointing(self.policy, use_reentrant=False)
        if self.uses_lora:
            self.policy = wrap_lora(self.policy, lora)
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
        self._frozen: dict = {}  # reference and cost model: outside the state dict on purpose
        self._ref_cache: dict = {}  # (split, index) -> (ref chosen logp, ref rejected logp)
        self._cost_cache: dict = {}  # train index -> (c_w, c_l)
        self._pending: list = []  # micro-batches of the current ShaPO step
        self._micro = 0
        self._perturbation: MaskedPerturbation | None = None
        self._dp_group = None  # FSDP2: the data-parallel process group the policy is sharded over
        self.probe_stats: dict = {}
        self.val_accuracy, self.val_margin, self.val_loss = MeanMetric(), MeanMetric(), MeanMetric()
        self.val_harmful, self.val_harmful_redteam, self.val_harmful_heldout = MeanMetric(), MeanMetric(), MeanMetric()
        self.val_kl, self.val_cost = MeanMetric(), MeanMetric()
        self.val_logp_accuracy, self.val_logp_accuracy_ref = MeanMetric(), MeanMetric()
        self._reference_judged: dict | None = None  # judge_reference: the reference's verdicts (computed once)

    # ------------------------------------------------------------------ construction
    def _check_args(self) -> None:
        hp = self.hparams
        choices = {
            "variant": (hp.variant, VARIANTS),
            "loss": (hp.loss, L.LOSSES),
            "aggregation": (hp.aggregation, L.AGGREGATIONS),
            "perturbation": (hp.perturbation, ("gamma", "rho")),
            "neuron_sign": (hp.neuron_sign, SIGNS),
        }
        for key, (value, allowed) in choices.items():
            if value not in allowed:
                raise ValueError(f"model.{key}: {value!r} is not one of {allowed}")
        if hp.shapo_every < 1 or hp.accumulate_grad_batches < 1:
            raise ValueError("model.shapo_every and model.accumulate_grad_batches must be >= 1")
        if not 0 <= hp.gamma_min <= hp.gamma_max:
            raise ValueError(f"model.gamma_min/gamma_max: need 0 <= {hp.gamma_min} <= {hp.gamma_max}")
        if hp.variant == "reward" and not hp.cost_model:
            raise ValueError("model.variant=reward needs model.cost_model (a shapo-cost-model zoo id or run)")

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
            hp.loss,
            hp.beta,
            pol_w,
            pol_l,
            ref_w,
            ref_l,
            avg_chosen=pol_w / n_w.clamp_min(1),
            avg_rejected=pol_l / n_l.clamp_min(1),
            label_smoothing=hp.label_smoothing,
            rdpo_epsilon=hp.rdpo_epsilon,
            simpo_gamma_beta_ratio=hp.simpo_gamma_beta_ratio,
            p_star=p_star,
        )
        loss = L.aggregate(per_example, hp.aggregation, hp.drdpo_beta)
        chosen_reward = hp.beta * (pol_w - ref_w).detach()
        rejected_reward = hp.beta * (pol_l - ref_l).detach()
        # reference-free preference: mean log-prob per reply token, chosen minus rejected (policy, and reference)
        n_w, n_l = n_w.clamp_min(1), n_l.clamp_min(1)
        return loss, {
            "margin": chosen_reward - rejected_reward,
            "logp_gap": (pol_w / n_w - pol_l / n_l).detach(),
            "logp_gap_ref": ref_w / n_w - ref_l / n_l,
        }

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
        size = pert.apply_masked(
            sliced, self.hparams.perturbation, gamma=self.perturbation_gamma(step), rho=self.hparams.rho
        )
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
            self.log_dict(
                {
                    "probe/train_accuracy": self.probe_stats["probe_train_accuracy"],
                    "probe/heldout_accuracy": self.probe_stats["probe_heldout_accuracy"],
                },
                on_step=False,
                on_epoch=True,
                batch_size=1,
            )
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
