"""``RLCrackerModule``: the attacker LM, trained by SFT to copy (stage 0, ours) and by GRPO to rewrite (stage 1).

Stage 1 (notes §3.3): for each marked text, ``G`` rewrites are sampled from the policy π_θ; each gets the semantic
reward ``r_sem`` of its MiniLM similarity to the marked text, the group advantage ``A``, the token reward
``k = KL3_wm − KL3_h`` from the frozen reference π_0 (the policy at the start of the stage), and the loss is the
shared GRPO surrogate (``zoo.models.grpo.policy_update``, TRL's ``loss_type="grpo"``) on ``R = αA + w_KL k`` with
``β KL3(π_0‖π_θ)`` plus ``w_ppl`` times :func:`fluency_nll`, the policy's NLL of question + rewrite (as the
authors' ``_get_loss_perplexity``: every token of the bare-question prompt and of the completion, not the rewrite
alone). Training never calls a detector nor knows the key; only the held-out report at the end (``evaluation.py``)
does.

The policy is a LoRA adapter over ``init_from`` (zoo-lm.chat for stage 0, ``rlcracker.copy`` for stage 1) or over a
pretrained base (``arch: smollm2-135m-instruct``, no stage 0), so a package stores only the adapters (``zoo release
--base``). π_0 is a frozen copy of the policy at the start of stage 1 (``reference: start``, needed when the stage
starts from trained adapters) or, over a base with fresh adapters, the base itself with the adapters disabled
(``reference: base``, peft ``disable_adapter()``: no copy; :func:`zoo.models.causal_lm.frozen_reference`).
"""

from __future__ import annotations

import copy
from typing import Annotated, ClassVar, Literal

import torch

from zoo.core.constraints import NonNegative, NonNegativeInt, Positive, PositiveInt, Probability, Range
from zoo.core.module import ZooModule
from zoo.core.optim import build_optimizer
from zoo.core.registry import register_method
from zoo.methods.rlcracker.datamodule import RLCrackerDataModule
from zoo.methods.rlcracker.prompts import chat_prompt, left_pad, rewrite_prompt
from zoo.methods.rlcracker.rewards import semantic_reward, semantic_weight, similarity, token_reward, total_reward
from zoo.models import grpo
from zoo.models.causal_lm import (
    build_causal_lm,
    drop_tied_aliases,
    fill_tied_aliases,
    frozen_reference,
    load_tokenizer,
    tied_aliases,
    tokenizer_for,
)

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def fluency_nll(lm: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean NLL (nats per token) under ``lm`` of every non-padding token of ``ids`` that follows a non-padding token.

    The RLCracker NLL term on ``[question prompt ; completion]`` (``RLCrackerModule._question_inputs``): as the
    authors' ``_get_loss_perplexity`` (``model(ids, labels=ids).loss``), the question's tokens count as well as the
    completion's, averaged over all tokens of the batch. Unlike theirs, padding is left out (their labels keep the pad
    tokens, and a left-padded row's first real token is predicted from a pad; ours are masked by ``mask``).

    Args:
        ids, mask: ``[N, L]`` token ids and attention mask (left-padded question, right-padded completion).
    Returns:
        A scalar tensor with gradient.
    """
    lp = grpo.completion_logprobs(lm, ids, mask, ids.shape[1] - 1)
    m = (mask[:, 1:] * mask[:, :-1]).to(lp.dtype)
    return -(lp * m).sum() / m.sum().clamp(min=1.0)


@register_method("rlcracker", datamodule=RLCrackerDataModule)
class RLCrackerModule(ZooModule):
    """Args:
    arch: causal-LM preset or local HF directory (``null`` adopts ``init_from``'s).
    tokenizer: tokenizer directory (``null``: follows ``arch``).
    stage: ``copy`` (SFT on the rewrite prompt -> the same text) or ``grpo``.
    watermark: ``unigram`` or ``kgw``: only names the detector of the held-out report and ``zoo predict``.
    lora: ``{r, alpha}`` of the adapters on every attention and MLP projection.
    group_size: G rewrites per text; max_new_tokens: rewrite length; temperature: sampling temperature.
    tau, y: the semantic reward's threshold and ``r_sem(1) = 2y − 1``.
    w, w_kl, w_ppl, beta: the dynamic weight's scale, the token reward's and the NLL term's weights, the KL
        penalty (notes §3.3).
    token_reward: add the token-level KL reward (``false``: the ``rlcracker-no-token-reward`` ablation).
    reference: π_0 of the token reward, β and the radius: ``start`` (a frozen copy of the policy when stage 1
        starts) or ``base`` (the model with its adapters disabled: no copy; only right when the adapters start fresh,
        as over a pretrained base with ``init_from: null``).
    updates, epsilon: μ optimiser steps per batch and the clip range.
    max_grad_norm: gradient-norm clip.
    report_samples: rewrites per held-out text in the end-of-training report (``0``: no report).
    optimizer: ``zoo.core.optim`` settings.
    """

    export_formats = ("package",)
    head_keys = ("lm.*lora_*",)  # adapters start fresh over plain causal-LM weights
    weight_settings: ClassVar[dict[str, str]] = {"arch": "model.arch", "lora": "model.lora"}

    def __init__(
        self,
        arch: str | None = "zoo-lm-small",
        tokenizer: str | None = None,
        stage: Literal["copy", "grpo"] = "grpo",
        watermark: Literal["unigram", "kgw"] = "unigram",
        lora: dict | None = None,
        group_size: Annotated[int, Range(2)] = 8,
        max_new_tokens: PositiveInt = 96,
        temperature: Positive = 0.7,
        tau: Annotated[float, Range(-1, 1)] = 0.85,
        y: Probability = 0.975,
        w: NonNegative = 15.0,
        w_kl: NonNegative = 0.1,
        w_ppl: NonNegative = 0.1,
        beta: NonNegative = 0.04,
        token_reward: bool = True,
        reference: Literal["start", "base"] = "start",
        updates: PositiveInt = 1,
        epsilon: Positive = 0.2,
        max_grad_norm: Positive = 1.0,
        report_samples: NonNegativeInt = 1,
        optimizer: dict | None = None,
    ):
        super().__init__()
        if stage not in ("copy", "grpo"):
            raise ValueError(f"model.stage must be 'copy' or 'grpo', got {stage!r}")
        if watermark not in ("unigram", "kgw"):
            raise ValueError(f"model.watermark must be 'unigram' or 'kgw', got {watermark!r}")
        if reference not in ("start", "base"):
            raise ValueError(f"model.reference must be 'start' or 'base', got {reference!r}")
        if group_size < 2:
            raise ValueError(f"model.group_size must be >= 2, got {group_size}")
        self.save_hyperparameters()
        self.automatic_optimization = False
        from peft import LoraConfig, get_peft_model

        lora = {"r": 32, "alpha": 64, **(lora or {})}
        base = build_causal_lm(arch)
        self.lm = get_peft_model(
            base,
            LoraConfig(
                r=int(lora["r"]), lora_alpha=float(lora["alpha"]), lora_dropout=0.0, target_modules=LORA_TARGETS
            ),
        )
        self._tied = tied_aliases(self.lm, "lm.")
        self.register_state_dict_post_hook(drop_tied_aliases)
        self.register_load_state_dict_pre_hook(fill_tied_aliases)
        self.tokenizer = load_tokenizer(tokenizer_for(arch, tokenizer))
        self._reference: list = []  # frozen π_0, made at the start of stage 1 (not a submodule: never saved)

    # ---- weights ----------------------------------------------------------------------------------------------
    def remap_init_state(self, state, source_method, source_cfg=None):
        """Plain causal-LM weights (``zoo-lm`` packages, ``lm.*``) become the LoRA model's base layers."""
        if any("lora_" in k for k in state):
            return state
        own = {
            k.replace("base_model.model.", "").replace(".base_layer.", "."): k
            for k in self.state_dict()
            if "lora_" not in k
        }
        return {own[k]: v for k, v in state.items() if k in own}

    def reference(self):
        """The frozen copy of the policy π_0 of stage 1 (made at the first use; ``reference: start`` only)."""
        if not self._reference:
            ref = copy.deepcopy(self.lm).eval()
            for p in ref.parameters():
                p.requires_grad_(False)
            self._reference.append(ref)
        return self._reference[0]

    def reference_model(self):
        """π_0 as a context (:func:`zoo.models.causal_lm.frozen_reference`): the copy (``reference: start``) or the
        policy with its adapters disabled (``reference: base``). Use under ``torch.no_grad()``."""
        return frozen_reference(self.lm, self.reference() if self.hparams.reference == "start" else None)

    def configure_optimizers(self):
        params = [p for p in self.lm.parameters() if p.requires_grad]
        steps = self.trainer.max_steps if self._trainer is not None and self.trainer.max_steps > 0 else None
        return build_optimizer(params, self.hparams.optimizer or {"name": "adamw", "lr": 1e-4}, steps)

    # ---- training ---------------------------------------------------------------------------------------------
    def _step_scheduler(self):
        sched = self.lr_schedulers()
        if sched is not None:
            sched.step()

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        if self.hparams.stage == "copy":
            opt.zero_grad()
            loss = self.lm(**batch).loss
            self.manual_backward(loss)
            torch.nn.utils.clip_grad_norm_(
                [p for p in self.lm.parameters() if p.requires_grad], self.hparams.max_grad_norm
            )
            opt.step()
            self._step_scheduler()
            self.log("train/loss", loss.detach(), prog_bar=True, batch_size=batch["input_ids"].shape[0])
            return
        stats = self.grpo_step(batch, opt)
        self._step_scheduler()
        for k, v in stats.items():
            self.log(f"train/{k}", float(v), batch_size=len(batch))

    def _question_inputs(self, rows, rollouts):
        """``[N, Pq + C]`` ids and mask of each rollout's completion after its bare-question prompt."""
        q_ids, q_mask = left_pad(
            [chat_prompt(self.tokenizer, r["question"]) for r in rows], self.tokenizer.pad_token_id
        )
        g = rollouts.group_size
        ids = torch.cat([q_ids.repeat_interleave(g, 0).to(self.device), rollouts.completion_ids], 1)
        mask = torch.cat([q_mask.repeat_interleave(g, 0).to(self.device), rollouts.completion_mask.long()], 1)
        return ids, mask

    def grpo_step(self, rows: list[dict], opt) -> dict[str, float]:
        """One RLCracker GRPO step on ``B`` rows ``{question, watermarked}`` (notes §3.3); returns the stats."""
        hp, tok = self.hparams, self.tokenizer
        ids, mask = left_pad([rewrite_prompt(tok, r["watermarked"]) for r in rows], tok.pad_token_id)
        ro = grpo.sample_rollouts(
            self.lm,
            ids.to(self.device),
            mask.to(self.device),
            hp.group_size,
            hp.max_new_tokens,
            [tok.eos_token_id],
            tok.pad_token_id,
            hp.temperature,
        )
        texts = self.decode(ro)
        s = similarity(texts, [r["watermarked"] for r in rows for _ in range(hp.group_size)]).to(self.device)
        r_sem = semantic_reward(s, hp.tau, hp.y)
        adv = grpo.group_advantages(r_sem, hp.group_size)
        alpha = semantic_weight(r_sem, hp.w)
        n = ro.completion_ids.shape[1]
        q_ids, q_mask = self._question_inputs(rows, ro)
        with torch.no_grad():
            with self.reference_model() as ref:
                logp_wm = grpo.completion_logprobs(ref, ro.input_ids, ro.attention_mask, n, hp.temperature)
                if hp.token_reward:
                    logp_h = grpo.completion_logprobs(ref, q_ids, q_mask, n, hp.temperature)
            k = None
            if hp.token_reward:
                logp = grpo.completion_logprobs(self.lm, ro.input_ids, ro.attention_mask, n, hp.temperature)
                k = token_reward(logp_wm, logp_h, logp) * ro.completion_mask
        rewards = total_reward(adv, k, alpha, hp.w_kl)

        def nll():
            return hp.w_ppl * fluency_nll(self.lm, q_ids, q_mask)

        backward = self.manual_backward if self._trainer is not None else None  # plain backward outside Lightning
        hist = grpo.policy_update(
            self.lm,
            opt,
            ro,
            rewards,
            updates=hp.updates,
            backward=backward,
            ref_logprobs=logp_wm,
            extra_loss=nll if hp.w_ppl else None,
            max_grad_norm=hp.max_grad_norm,
            temperature=hp.temperature,
            beta=hp.beta,
            epsilon=hp.epsilon,
        )
        out = {
            "loss": hist[-1]["loss"],
            "kl_ref": hist[-1]["kl"],
            "sim": float(s.mean()),
            "r_sem": float(r_sem.mean()),
            "alpha": alpha,
            "length": float(ro.completion_mask.sum(1).mean()),
        }
        if k is not None:
            out["token_reward"] = float(k.sum() / ro.completion_mask.sum().clamp(min=1.0))
        return out

    def decode(self, rollouts) -> list[str]:
        """Completion texts (eos and padding removed)."""
        eos = self.tokenizer.eos_token_id
        return [
            self.tokenizer.decode([t for t in row[m.bool()].tolist() if t != eos])
            for row, m in zip(rollouts.completion_ids, rollouts.completion_mask)
        ]

    # ---- validation -------------------------------------------------------------------------------------------
    def validation_step(self, batch, batch_idx):
        if self.hparams.stage == "copy":
            with torch.no_grad():
                loss = self.lm(**batch).loss
            self.log("val/loss", loss, prog_bar=True, batch_size=batch["input_ids"].shape[0])
            return
        from zoo.methods.rlcracker.rewrite import rewrite_with_kl

        torch.manual_seed(1234 + batch_idx)
        texts, kl = rewrite_with_kl(self, [r["watermarked"] for r in batch], samples=1)
        s = similarity(texts, [r["watermarked"] for r in batch])
        self.log("val/sim", float(s.mean()), batch_size=len(batch))
        self.log("val/kl", kl, batch_size=len(batch))
        self.log("val/loss", float(-semantic_reward(s, self.hparams.tau, self.hparams.y).mean()), batch_size=len(batch))

    def on_train_end(self):
        """The held-out report (removal, success, similarity): the only place a detector is used."""
        dm = getattr(self.trainer, "datamodule", None)
        if self.hparams.stage != "grpo" or not self.hparams.report_samples or not getattr(dm, "test_rows", None):
            return
        from zoo.methods.rlcracker.evaluation import heldout_report

        report = heldout_report(self, dm.test_rows, self.hparams.watermark, self.hparams.report_samples)
        for key, value in report.items():
            self.trainer.callback_metrics[f"test/{key}"] = torch.tensor(value)
        print("held-out " + ", ".join(f"{k} {v:.3f}" for k, v in report.items()), flush=True)

    # ---- predict ----------------------------------------------------------------------------------------------
    predict_schema: ClassVar = [
        {
            "text": str,
            "rewrite": str,
            "watermark": str,
            "z_before": float,
            "z_after": float,
            "threshold": float,
            "similarity": float,
        }
    ]

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> list[dict]:
        """``zoo predict rlcracker.unigram text.txt``: per text (a file's content, or the argument) the rewrite, z
        before and after, and similarity (:func:`.evaluation.predict_record`).

        Raises:
            UserError: an empty (or whitespace-only) text, named by its file or argument, before any generation.
        """
        from pathlib import Path

        from zoo.core.errors import UserError
        from zoo.methods.rlcracker.evaluation import predict_record

        texts = [Path(p).read_text(encoding="utf-8") if Path(p).is_file() else p for p in inputs]
        for p, text in zip(inputs, texts):
            if not text.strip():
                raise UserError(f"{p}: no text to rewrite (empty or whitespace only)")
        return [predict_record(self, text) for text in texts]

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record` as two lines per text, blank-line separated."""
        from zoo.methods.rlcracker.evaluation import predict_lines

        return "\n\n".join(predict_lines(d) for d in self.predict_record(inputs, out_dir))
