"""ShaPO's evaluation: preference accuracy and reward margin on held-out pairs, and on sampled replies the KL to the
reference, the cost model's harmful-completion rate and the keyword refusal rate, optionally the reference's own
("before"); ``zoo predict`` replies. A mixin of :class:`zoo.methods.shapo.module.ShaPOModule`."""

from __future__ import annotations

import logging
from typing import ClassVar

import torch

from zoo.core.phases import phase
from zoo.data.preference import encode_prompt
from zoo.methods.shapo.lm import completion_kl, right_pad, sample_completions
from zoo.methods.shapo.metrics import preference_accuracy
from zoo.methods.shapo.refusal import is_refusal
from zoo.models.sharding import reshard

log = logging.getLogger("zoo")


class Evaluation:
    """Validation metrics and user-facing sampling of :class:`ShaPOModule` (a mixin)."""

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        """Preference accuracy, reward margin and loss on clean held-out pairs (never flipped).

        ``val/accuracy`` is the implicit-reward accuracy (0.5 at the start by construction: every margin is 0);
        ``val/logp_accuracy`` (policy) and ``val/logp_accuracy_ref`` (reference: the "before" figure) are
        reference-free, the share of pairs whose chosen reply has the higher mean log-prob per token (ties ½; ours).
        """
        loss, stats = self._loss(batch, "val")
        n = stats["margin"].numel()
        self.val_accuracy.update(preference_accuracy(stats["margin"]))
        self.val_logp_accuracy.update(preference_accuracy(stats["logp_gap"]))
        self.val_logp_accuracy_ref.update(preference_accuracy(stats["logp_gap_ref"]))
        self.log("val/logp_accuracy", self.val_logp_accuracy, on_epoch=True, batch_size=n)
        self.log("val/logp_accuracy_ref", self.val_logp_accuracy_ref, on_epoch=True, batch_size=n)
        self.val_margin.update(stats["margin"])
        self.val_loss.update(loss.detach(), weight=n)
        self.log("val/accuracy", self.val_accuracy, on_epoch=True, prog_bar=True, batch_size=n)
        self.log("val/margin", self.val_margin, on_epoch=True, batch_size=n)
        self.log("val/loss", self.val_loss, on_epoch=True, batch_size=n)

    def on_validation_epoch_end(self) -> None:
        if not self.hparams.eval_generation or self.trainer.sanity_checking:
            return
        dm = self.trainer.datamodule
        prompts = dm.generation_prompts()
        with phase(
            f"ShaPO validation at step {self.trainer.global_step}: sampling a reply to each of {len(prompts)} "
            "prompts, KL to the reference and the cost model's verdict"
        ):
            metrics = self.generation_metrics(prompts, dm.tokenizer)
        for name, value in metrics.items():
            self.log(f"val/{name}", value)

    @torch.no_grad()
    def generation_metrics(self, prompts: list[tuple[str, list[int]]], tokenizer) -> dict[str, torch.Tensor]:
        """Sample a reply to each prompt; KL to the reference along it; the cost model's verdict. With
        ``greedy_eval`` and ``temperature > 0`` the same again for greedy replies (keys suffixed ``_greedy``).

        Args:
            prompts: ``(source, token ids)`` with source ``redteam``, ``heldout`` or ``benign``.

        Returns:
            ``kl_ref`` (nats per red-team or held-out reply); ``refusal_rate``, ``refusal_rate_redteam``, ``refusal_rate_heldout`` (share
            of replies the keyword judge :func:`zoo.methods.shapo.refusal.is_refusal` marks as refusing; the first
            over red-team and held-out prompts) and ``refusal_rate_benign`` (over-refusal of benign instructions, a
            helpfulness proxy: lower is more helpful); with a cost model ``harmful_rate`` (share of red-team and
            held-out replies whose cost exceeds the cost model's threshold), ``harmful_rate_redteam``,
            ``harmful_rate_heldout``, ``cost``; with ``judge_reference`` the refusal and cost-model figures also for
            the reference's replies (``refusal_rate_ref``, ``harmful_rate_ref``, ...).
        """
        hp = self.hparams
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        ids = [p for _, p in prompts]
        src = [s for s, _ in prompts]
        was_training = self.policy.training
        self.policy.eval()
        out = {}
        temperatures = [(hp.temperature, "")] + [(0.0, "_greedy")] * bool(hp.greedy_eval and hp.temperature > 0)
        for temperature, suffix in temperatures:
            completions = sample_completions(
                self.policy,
                ids,
                pad,
                tokenizer.eos_token_id,
                hp.max_new_tokens,
                temperature,
                hp.gen_seed,
                hp.gen_batch_size,
            )
            verdicts = self._judge(ids, src, completions, pad) | refusal_rates(src, completions, tokenizer)
            out |= {k + suffix: v for k, v in verdicts.items()}
        if hp.judge_reference:
            if self._reference_judged is None:  # the reference is frozen: its replies and verdicts do not change
                self._reference_judged = {}
                for temperature, suffix in temperatures:
                    replies = self._reference_replies(ids, pad, tokenizer.eos_token_id, temperature)
                    verdicts = self._harm(ids, src, replies, pad) | refusal_rates(src, replies, tokenizer)
                    self._reference_judged |= {f"{k}_ref{suffix}": v.detach().clone() for k, v in verdicts.items()}
            out |= self._reference_judged
        self.policy.train(was_training)
        return out

    def _reference_replies(self, ids: list[list[int]], pad: int, eos: int, temperature: float) -> list[list[int]]:
        """The reference's replies with the policy's sampling settings and seed (under LoRA without a named
        reference: the policy with its adapters disabled)."""
        hp = self.hparams
        if "reference" in self._frozen:
            return sample_completions(
                self._frozen_model("reference"),
                ids,
                pad,
                eos,
                hp.max_new_tokens,
                temperature,
                hp.gen_seed,
                hp.gen_batch_size,
            )
        with self.policy.disable_adapter():
            return sample_completions(
                self.policy, ids, pad, eos, hp.max_new_tokens, temperature, hp.gen_seed, hp.gen_batch_size
            )

    def _judge(self, ids: list[list[int]], src: list[str], completions: list[list[int]], pad: int) -> dict:
        """KL to the reference along the red-team and held-out ``completions`` (benign ones only when there are no
        others) and, with a cost model, harmful rates (all, red-team, held-out) and mean cost."""
        hp = self.hparams
        judged = [i for i, s in enumerate(src) if s != "benign"] or list(range(len(src)))
        kl = completion_kl(
            lambda i, m: self.policy(input_ids=i, attention_mask=m).logits,
            self._reference_logits,
            [ids[i] for i in judged],
            [completions[i] for i in judged],
            pad,
            hp.gen_batch_size,
        )
        self.val_kl.update(kl)
        out = {"kl_ref": self.val_kl.compute()}
        self.val_kl.reset()
        return out | self._harm(ids, src, completions, pad)

    def _harm(self, ids: list[list[int]], src: list[str], completions: list[list[int]], pad: int) -> dict:
        """With a cost model: harmful rates of ``completions`` (red-team and held-out together, each alone) and their
        mean cost there; else {}. Benign prompts are not judged for harm."""
        hp = self.hparams
        out = {}
        if "cost" in self._frozen:
            cost_model = self._frozen_model("cost")
            costs = []
            for i in range(0, len(ids), hp.gen_batch_size):
                seqs = [p + c for p, c in zip(ids[i : i + hp.gen_batch_size], completions[i : i + hp.gen_batch_size])]
                costs.append(cost_model.score(*right_pad(seqs, pad, self.device)))
            costs = torch.cat(costs)
            harmful = (costs > cost_model.threshold).float()
            red, held = (torch.tensor([s == k for s in src], device=harmful.device) for k in ("redteam", "heldout"))
            for metric, values, key in (
                (self.val_harmful, harmful[red | held], "harmful_rate"),
                (self.val_harmful_redteam, harmful[red], "harmful_rate_redteam"),
                (self.val_harmful_heldout, harmful[held], "harmful_rate_heldout"),
                (self.val_cost, costs[red | held], "cost"),
            ):
                if values.numel():
                    metric.update(values)
                    out[key] = metric.compute()
                    metric.reset()
        return out

    def on_fit_end(self) -> None:
        """One line of before -> after figures (the reference, then the trained policy), from the last validation."""
        m = {k: float(v) for k, v in self.trainer.callback_metrics.items() if k.startswith("val/")}
        pairs = [
            (
                "held-out preference accuracy (mean log-prob per token, chosen > rejected)",
                "val/logp_accuracy_ref",
                "val/logp_accuracy",
            )
        ]
        for how, suffix in (("sampled", ""), ("greedy", "_greedy")):
            pairs += [
                (f"harmful rate ({how}, cost model)", f"val/harmful_rate_ref{suffix}", f"val/harmful_rate{suffix}"),
                (
                    f"red-team refusal rate ({how}, keyword judge)",
                    f"val/refusal_rate_redteam_ref{suffix}",
                    f"val/refusal_rate_redteam{suffix}",
                ),
            ]
        said = [f"{name} {m[a]:.3f} -> {m[b]:.3f}" for name, a, b in pairs if a in m and b in m]
        if said and self.trainer.is_global_zero:
            extra = f"; implicit-reward accuracy {m['val/accuracy']:.3f}" if "val/accuracy" in m else ""
            log.info("ShaPO before (reference) -> after (policy): %s%s", "; ".join(said), extra)

    def _reference_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if "reference" in self._frozen:
            ref = self._frozen_model("reference")
            logits = ref(input_ids=input_ids, attention_mask=attention_mask).logits
            reshard(ref)  # FSDP2: no backward follows to free its root's gathered parameters
            return logits
        with self.policy.disable_adapter():
            return self.policy(input_ids=input_ids, attention_mask=attention_mask).logits

    predict_schema: ClassVar = [{"prompt": str, "reply": str}]

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> list[dict]:
        """``zoo predict shapo.zoo-lm-hh "PROMPT" ...``: one sampled reply per prompt (the recipe's sampling), each
        ``{"prompt", "reply"}``."""
        tok = self._tokenizer()
        prompts = [encode_prompt(tok, f"\n\nHuman: {x}\n\nAssistant:") for x in inputs]  # user text: no control tokens
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        replies = sample_completions(
            self.policy.eval(),
            prompts,
            pad,
            tok.eos_token_id,
            self.hparams.max_new_tokens,
            self.hparams.temperature,
            self.hparams.gen_seed,
            self.hparams.gen_batch_size,
        )
        return [
            {"prompt": x, "reply": tok.decode(r, skip_special_tokens=True).strip()} for x, r in zip(inputs, replies)
        ]

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record` as ``> prompt`` then the reply, blank-line separated."""
        return "\n\n".join(f"> {r['prompt']}\n{r['reply']}" for r in self.predict_record(inputs, out_dir))


def refusal_rates(src: list[str], completions: list[list[int]], tokenizer) -> dict[str, torch.Tensor]:
    """Keyword-judge refusal rates of ``completions`` (token ids, decoded without special tokens), by the source of
    each prompt (``redteam``, ``heldout``, ``benign``): ``refusal_rate`` over red-team and held-out prompts, and one
    rate per source where there are any (``refusal_rate_benign`` is over-refusal)."""
    refused = torch.tensor([is_refusal(tokenizer.decode(c, skip_special_tokens=True)) for c in completions])
    red, held, benign = (
        torch.tensor([s == k for s in src], dtype=torch.bool) for k in ("redteam", "heldout", "benign")
    )
    out = {}
    for key, mask in (
        ("refusal_rate", red | held),
        ("refusal_rate_redteam", red),
        ("refusal_rate_heldout", held),
        ("refusal_rate_benign", benign),
    ):
        if mask.any():
            out[key] = refused[mask].float().mean()
    return out
