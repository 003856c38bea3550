"""``AnchorAdapterModule``: the two stages of the Anchor-Adapter study (Yan et al., arXiv 2601.11061) on a small LM.

* ``stage: midtrain`` - stage 1, the contaminated base: LoRA (adapter ``midtrain`` on every projection; r = 64 over zoo-lm, 16 over SmolLM2) over
  ``base`` trained by next-token loss on the chain_sum mid-training corpus (or the clean control).
* ``stage: grpo`` - stage 2: GRPO (``zoo.models.grpo``; manual optimisation, ``updates`` = μ optimiser steps per
  rollout batch) with one of four rewards, LoRA ``grpo`` (r = 16) over the frozen stage-1 model ``stage1``.

At the end of fit both stages score benchmark B before and after (accuracy leaked / clean, answer and prompt
perplexity) into ``<run>/anchor/eval.json``; the GRPO stage then runs the circuit analyses named in
``analyses`` (``zoo.methods.anchor_adapter.circuit``) and writes their JSON and PNGs there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import torch

from zoo.core.constraints import NonNegative, OneOf, Positive, PositiveInt, Range
from zoo.core.errors import UserError
from zoo.core.module import ZooModule
from zoo.core.optim import build_optimizer
from zoo.core.registry import register_method
from zoo.methods.anchor_adapter.chain_sum import prompt_text
from zoo.methods.anchor_adapter.datamodule import AnchorAdapterDataModule
from zoo.methods.anchor_adapter.evaluation import bench_metrics
from zoo.methods.anchor_adapter.policy import adapters, build_policy, decode_completions, encode_prompts
from zoo.methods.anchor_adapter.rewards import get_reward, ground_truth
from zoo.models.causal_lm import drop_tied_aliases, fill_tied_aliases, tied_aliases

ANALYSES = ("patching", "logit_lens", "key_scaling", "jsd", "resets")


class StageMismatch(UserError, ValueError):
    """``model.stage1`` holds weights of another base or another stage-1 LoRA than this recipe builds."""


@register_method("anchor-adapter", datamodule=AnchorAdapterDataModule)
class AnchorAdapterModule(ZooModule):
    """Args:
    stage: ``midtrain`` or ``grpo``.
    base: zoo id or local HF directory of the base LM (``zoo-lm.base``; paper: Qwen2.5-Math-7B).
    stage1: the stage-1 weights the GRPO stage starts from (zoo id, ``.ckpt`` or ``.safetensors``;
        ``null``: a fresh ``midtrain`` adapter, for tests).
    midtrain_lora, grpo_lora: ``{r, alpha, dropout}`` of the two adapters (64/128, 16/32).
    reward: ``ground_truth``, ``random``, ``incorrect`` or ``format`` (GRPO stage).
    group_size: G completions per prompt (8); max_new_tokens: completion cap (32); temperature: sampling T (1.0).
    epsilon: clip range ε (0.2); beta: KL weight β (0); updates: μ optimiser steps per rollout batch (2).
    max_grad_norm: gradient-norm clip per update (1.0).
    eval_tokens: greedy reply cap when scoring benchmark B (32); n_eval: score only the first n items of B.
    score_before: also score the model before this stage (off in grids: it is the same model every run).
    analyses: subset of ``patching, logit_lens, key_scaling, jsd, resets`` run after GRPO.
    rollouts: sampled replies per item in patching / key scaling (4); n_analysis: leaked items analysed (64).
    scales: key-scaling factors s; top_k: neurons scaled (10).
    optimizer: ``zoo.core.optim`` settings.
    """

    export_formats = ("package",)
    arg_schemas: ClassVar[dict] = {
        "midtrain_lora": {
            k: {"types": t} for k, t in (("r", ["int"]), ("alpha", ["int", "float"]), ("dropout", ["float"]))
        },
        "grpo_lora": {
            k: {"types": t} for k, t in (("r", ["int"]), ("alpha", ["int", "float"]), ("dropout", ["float"]))
        },
    }

    def __init__(
        self,
        stage: Literal["midtrain", "grpo"] = "grpo",
        base: str = "zoo-lm.base",
        stage1: str | None = "anchor-adapter.math",
        midtrain_lora: dict | None = None,
        grpo_lora: dict | None = None,
        reward: Literal["ground_truth", "random", "incorrect", "format"] = "random",
        group_size: Annotated[int, Range(2)] = 8,
        max_new_tokens: PositiveInt = 32,
        temperature: Positive = 1.0,
        epsilon: Positive = 0.2,
        beta: NonNegative = 0.0,
        updates: PositiveInt = 2,
        max_grad_norm: Positive = 1.0,
        eval_tokens: PositiveInt = 32,
        n_eval: PositiveInt | None = None,
        score_before: bool = True,
        analyses: list[Annotated[str, OneOf(ANALYSES)]] | None = None,
        rollouts: PositiveInt = 4,
        n_analysis: PositiveInt = 64,
        scales: list[float] | None = None,
        top_k: PositiveInt = 10,
        optimizer: dict | None = None,
    ):
        super().__init__()
        if stage not in ("midtrain", "grpo"):
            raise ValueError(f"model.stage must be 'midtrain' or 'grpo', got {stage!r}")
        unknown = sorted(set(analyses or []) - set(ANALYSES))
        if unknown:
            raise ValueError(f"model.analyses: unknown {unknown}; choose from {list(ANALYSES)}")
        self.reward_fn = get_reward(reward)
        self.save_hyperparameters()
        self.automatic_optimization = stage == "midtrain"
        mid = dict(midtrain_lora or {"r": 64, "alpha": 128})
        self.lm, self.tokenizer = build_policy(
            base, mid, dict(grpo_lora or {"r": 16, "alpha": 32}) if stage == "grpo" else None
        )
        self._tied = tied_aliases(self.lm, "lm.")  # the tied output weight is stored once
        self.register_state_dict_post_hook(drop_tied_aliases)
        self.register_load_state_dict_pre_hook(fill_tied_aliases)
        if stage == "grpo" and stage1:
            self._load_stage1(stage1)
        self.outputs: dict = {}

    def _load_stage1(self, ref: str) -> None:
        """Load the stage-1 package's ``lm.*`` tensors (base + ``midtrain`` adapter); only ``grpo`` may be missing.

        Raises:
            StageMismatch: the package lacks tensors of this model other than the ``grpo`` adapter, or its tensors'
                shapes differ (another base, or another ``midtrain_lora`` rank).
        """
        from zoo.core.hub import clean_state_dict, load_weights

        hint = f"model.stage1={ref!r} does not fit this model (same model.base and model.midtrain_lora needed)"
        state, _ = load_weights(ref)
        state = {k[3:]: v for k, v in clean_state_dict(state).items() if k.startswith("lm.")}
        try:
            result = self.lm.load_state_dict(state, strict=False)
        except RuntimeError as err:  # size mismatches
            shapes = [line.strip() for line in str(err).splitlines() if "size mismatch" in line]
            raise StageMismatch(f"{hint}: {shapes[0] if shapes else err}") from None
        tied = {a[3:] for a in self._tied}
        missing = [k for k in result.missing_keys if ".grpo." not in k and k not in tied]
        if missing or result.unexpected_keys:
            raise StageMismatch(f"{hint}: missing {missing[:5]}, unexpected {result.unexpected_keys[:5]}")

    def configure_optimizers(self):
        params = [p for p in self.lm.parameters() if p.requires_grad]
        steps = self.trainer.estimated_stepping_batches if self._trainer is not None else None
        if self.hparams.stage == "grpo" and steps is not None:
            steps = int(steps) * self.hparams.updates  # each rollout batch makes μ optimiser steps
        return build_optimizer(params, self.hparams.optimizer or {"name": "adamw", "lr": 1e-4}, total_steps=steps)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``[B, T, V]`` logits of the current model (all active adapters)."""
        return self.lm(input_ids=input_ids, attention_mask=attention_mask).logits

    def training_step(self, batch, batch_idx):
        if self.hparams.stage == "midtrain":
            labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
            loss = self.lm(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels).loss
            self.log("train/loss", loss, prog_bar=True, batch_size=len(labels))
            return loss
        return self._grpo_step(batch)

    def _grpo_step(self, items: list[dict]) -> None:
        """Sample G completions per prompt, reward them, normalise within groups, take μ clipped-loss steps."""
        from zoo.models.grpo import group_advantages, policy_update, sample_rollouts

        hp, tok = self.hparams, self.tokenizer
        ids, mask = encode_prompts(tok, [prompt_text(it["question"]) for it in items], self.device)
        roll = sample_rollouts(
            self.lm,
            ids,
            mask,
            hp.group_size,
            hp.max_new_tokens,
            [tok.eos_token_id],
            tok.pad_token_id,
            temperature=hp.temperature,
        )
        texts = decode_completions(tok, roll.completion_ids, roll.completion_mask)
        grouped = [it for it in items for _ in range(hp.group_size)]
        gen = torch.Generator().manual_seed(hash((int(self.trainer.datamodule.seed), self.global_step)) % 2**31)
        rewards = self.reward_fn(texts, grouped, gen)
        adv = group_advantages(rewards, hp.group_size, eps=1e-4).to(self.device)
        opt = self.optimizers()
        stats = policy_update(
            self.lm,
            opt,
            roll,
            adv,
            updates=hp.updates,
            backward=self.manual_backward,
            max_grad_norm=hp.max_grad_norm,
            temperature=hp.temperature,
            epsilon=hp.epsilon,
            beta=hp.beta,
            loss_type="grpo",
        )
        sched = self.lr_schedulers()
        if sched is not None:
            for _ in range(hp.updates):
                sched.step()
        n = len(items)
        self.log_dict(
            {
                "train/reward": float(rewards.mean()),
                "train/loss": stats[-1]["loss"],
                "train/clip_fraction": stats[-1]["clip_fraction"],
                "train/ratio_mean": stats[-1]["ratio_mean"],
                "train/accuracy": float(ground_truth(texts, grouped).mean()),
                "train/boxed": float(sum("\\boxed{" in t for t in texts) / len(texts)),
            },
            batch_size=n,
            prog_bar=True,
        )

    def before_after(self) -> tuple[list[str], list[str]]:
        """Adapter sets of the model before and after this stage (``[]`` = the bare base)."""
        if self.hparams.stage == "midtrain":
            return [], ["midtrain"]
        return ["midtrain"], ["midtrain", "grpo"]

    def score(self, bench: list[dict]) -> dict:
        """Benchmark-B metrics before and after this stage: ``{"before": (metrics, rows), "after": ...}``."""
        out = {}
        for name, names in zip(("before", "after"), self.before_after()):
            if name == "before" and not self.hparams.score_before:
                continue
            if names:
                with adapters(self.lm, names):
                    out[name] = bench_metrics(self.lm, self.tokenizer, bench, self.hparams.eval_tokens)
            else:
                with self.lm.disable_adapter():
                    out[name] = bench_metrics(self.lm, self.tokenizer, bench, self.hparams.eval_tokens)
        return out

    def on_train_end(self) -> None:
        """Score benchmark B before / after and run the analyses; write ``<run>/anchor/``."""
        bench = self.trainer.datamodule.bench[: self.hparams.n_eval]
        root = Path(self.trainer.default_root_dir) / "anchor"  # the run directory
        root.mkdir(parents=True, exist_ok=True)
        scored = self.score(bench)
        (root / "eval.json").write_text(json.dumps({k: m for k, (m, _) in scored.items()}, indent=1))
        (root / "items.json").write_text(json.dumps({k: rows for k, (_, rows) in scored.items()}))
        from zoo.methods.anchor_adapter.plots import perplexity_scatter

        if "before" in scored:
            perplexity_scatter(scored["before"][1], scored["after"][1], str(root / "perplexity.png"))
        if self.hparams.stage == "grpo" and self.hparams.analyses and "before" in scored:
            from zoo.methods.anchor_adapter.circuit import run_analyses

            run_analyses(self, bench, scored, root)
        self.outputs = {"dir": str(root)}

    def evaluate(self, datamodule) -> dict[str, float]:
        """Benchmark-B metrics of this model before and after its stage (``before/acc_leaked``, ...)."""
        bench = datamodule.bench[: self.hparams.n_eval]
        return {f"{k}/{name}": v for k, (m, _) in self.score(bench).items() for name, v in m.items()}

    predict_schema: ClassVar = [
        {
            "prompt": str,
            "gold": int,
            "benchmark": (str, None),
            "answer_token": str,
            "replies": [{"model": str, "adapters": [str], "reply": str, "correct": bool}],
            "lens": [{"layer": int, "stream": str, "rank": int, "top3": [str]}],
        }
    ]

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> list[dict]:
        """``zoo predict anchor-adapter.<tag> "Question: 23 + 48 - 17 = ?"``: per question the replies before and
        after, whether the item is in benchmark B's leaked half, and the logit-lens table of the after model
        (:func:`.predict.predict_record`)."""
        from zoo.methods.anchor_adapter.predict import predict_record

        return [predict_record(self, q) for q in inputs]

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record` as text, one block per question; with ``out_dir`` also ``D/predict.txt``."""
        from zoo.methods.anchor_adapter.predict import predict_text

        text = "\n\n".join(predict_text(d) for d in self.predict_record(inputs))
        if out_dir:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            (Path(out_dir) / "predict.txt").write_text(text + "\n")
        return text
