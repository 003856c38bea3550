"""ShaPO's evaluation: preference accuracy and reward margin on held-out pairs, and on sampled replies the KL to the
reference and the cost model's harmful-completion rate; ``zoo predict`` replies. A mixin of
:class:`zoo.methods.shapo.module.ShaPOModule`."""
from __future__ import annotations

from typing import ClassVar

import torch

from zoo.core.phases import phase
from zoo.data.preference import encode_prompt
from zoo.methods.shapo.lm import completion_kl, right_pad, sample_completions
from zoo.methods.shapo.metrics import preference_accuracy
from zoo.models.sharding import reshard


class Evaluation:
    """Validation metrics and user-facing sampling of :class:`ShaPOModule` (a mixin)."""

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
        prompts = dm.generation_prompts()
        with phase(f"ShaPO validation at step {self.trainer.global_step}: sampling a reply to each of {len(prompts)} "
                   "prompts, KL to the reference and the cost model's verdict"):
            metrics = self.generation_metrics(prompts, dm.tokenizer)
        for name, value in metrics.items():
            self.log(f"val/{name}", value)

    @torch.no_grad()
    def generation_metrics(self, prompts: list[tuple[str, list[int]]], tokenizer) -> dict[str, torch.Tensor]:
        """Sample a reply to each prompt; KL to the reference along it; the cost model's verdict. With
        ``greedy_eval`` and ``temperature > 0`` the same again for greedy replies (keys suffixed ``_greedy``).

        Args:
            prompts: ``(source, token ids)`` with source ``redteam`` or ``heldout``.

        Returns:
            ``kl_ref`` (nats per reply) and, with a cost model, ``harmful_rate`` (share of replies whose cost
            exceeds the cost model's threshold), ``harmful_rate_redteam``, ``harmful_rate_heldout``, ``cost``.
        """
        hp = self.hparams
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        ids = [p for _, p in prompts]
        src = [s == "redteam" for s, _ in prompts]
        was_training = self.policy.training
        self.policy.eval()
        out = {}
        temperatures = [(hp.temperature, "")] + [(0.0, "_greedy")] * bool(hp.greedy_eval and hp.temperature > 0)
        for temperature, suffix in temperatures:
            completions = sample_completions(self.policy, ids, pad, tokenizer.eos_token_id, hp.max_new_tokens,
                                             temperature, hp.gen_seed, hp.gen_batch_size)
            out |= {k + suffix: v for k, v in self._judge(ids, src, completions, pad).items()}
        self.policy.train(was_training)
        return out

    def _judge(self, ids: list[list[int]], src: list[bool], completions: list[list[int]], pad: int) -> dict:
        """KL to the reference along ``completions`` and, with a cost model, harmful rates (all, red-team, held-out)
        and mean cost."""
        hp = self.hparams
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
            red = torch.tensor(src, device=harmful.device)
            for metric, values, key in ((self.val_harmful, harmful, "harmful_rate"),
                                        (self.val_harmful_redteam, harmful[red], "harmful_rate_redteam"),
                                        (self.val_harmful_heldout, harmful[~red], "harmful_rate_heldout"),
                                        (self.val_cost, costs, "cost")):
                if values.numel():
                    metric.update(values)
                    out[key] = metric.compute()
                    metric.reset()
        return out

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
        replies = sample_completions(self.policy.eval(), prompts, pad, tok.eos_token_id, self.hparams.max_new_tokens,
                                     self.hparams.temperature, self.hparams.gen_seed, self.hparams.gen_batch_size)
        return [{"prompt": x, "reply": tok.decode(r, skip_special_tokens=True).strip()} for x, r in zip(inputs, replies)]

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record` as ``> prompt`` then the reply, blank-line separated."""
        return "\n\n".join(f"> {r['prompt']}\n{r['reply']}" for r in self.predict_record(inputs, out_dir))
