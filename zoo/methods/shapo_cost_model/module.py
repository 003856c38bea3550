"""``shapo-cost-model``: c(x, y), a scalar harmfulness cost from a causal-LM backbone and a linear head.

It stands in for the paper's ``PKU-Alignment/beaver-7b-v1.0-cost`` (a LLaMA with a score head read at the last
token, trained on PKU-SafeRLHF safety preferences). Here the backbone is zoo-lm or a pretrained base (SmolLM2, with
LoRA adapters: ``model.lora``), the data are the HH-RLHF harmless training pairs (never flipped), and the loss is
Bradley-Terry with the rejected (more harmful) reply costing more.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics.aggregation import MeanMetric

from zoo.core.constraints import NonNegative
from zoo.core.module import ZooModule
from zoo.core.optim import build_optimizer
from zoo.core.registry import register_method
from zoo.methods.shapo_cost_model.datamodule import PreferenceDataModule


def bradley_terry_cost_loss(
    cost_chosen: torch.Tensor, cost_rejected: torch.Tensor, center_weight: float = 0.0
) -> torch.Tensor:
    """-log sigma(c(x, y_l) - c(x, y_w)) + lambda (c(x, y_w) + c(x, y_l))^2, averaged over the batch.

    The first term is the Bradley-Terry likelihood of "y_l is more harmful" (Bradley & Terry 1952; the
    cost-model objective of Safe RLHF, Dai et al. 2024, without its sign-classification term). The second,
    with lambda = ``center_weight``, centres costs at zero (the reward-centring auxiliary loss of Eisenstein et
    al. 2023), which makes ``c > 0`` a usable harmful/harmless threshold (ours).

    Args:
        cost_chosen, cost_rejected: ``(B,)`` costs.
        center_weight: lambda >= 0.

    Returns:
        Scalar loss.
    """
    bt = -F.logsigmoid(cost_rejected - cost_chosen).mean()
    return bt + center_weight * ((cost_chosen + cost_rejected) ** 2).mean()


def pair_accuracy(cost_chosen: torch.Tensor, cost_rejected: torch.Tensor) -> torch.Tensor:
    """Per pair ``(B,)``: 1 when the rejected reply costs more, 0 when less, 0.5 for a tie (equal costs)."""
    return (cost_rejected > cost_chosen).float() + 0.5 * (cost_rejected == cost_chosen).float()


@register_method("shapo-cost-model", datamodule=PreferenceDataModule)
class CostModelModule(ZooModule):
    """A causal LM's decoder (``self.backbone``: the LM without its output projection) plus a linear cost head read at
    each sequence's last non-padding token. ``init_from`` a zoo-lm package maps ``lm.model.*`` to ``backbone.*``.

    Args:
        arch: a zoo-lm preset, a pretrained base id (``smollm2-135m-instruct``), a local HF model directory or a Hub
            name (:func:`zoo.models.causal_lm.build_causal_lm`); its own tokenizer and chat template come with it.
        tokenizer: tokenizer directory (``None``: the arch's own, zoo-lm's for a preset).
        center_weight: lambda of the centring term in :func:`bradley_terry_cost_loss`.
        threshold: the cost above which ShaPO's harmful-completion rate counts a reply as harmful.
        lora: ``{r, alpha, dropout, target_modules}``: peft LoRA adapters on the decoder (only they and the head
            train; :func:`zoo.models.causal_lm.wrap_lora`); ``None`` or r = 0 trains the whole decoder.
        optimizer: :func:`zoo.core.optim.build_optimizer` dict.
    """

    # the head, and LoRA adapters (fresh when a plain LM's weights are loaded under them)
    head_keys = ("head.", "backbone.*lora_*")
    export_formats = ("package", "onnx")
    weight_settings: ClassVar[dict[str, str]] = {"lm.arch": "model.arch", "lm.tokenizer": "model.tokenizer"}

    def __init__(
        self,
        arch: str = "zoo-lm-small",
        tokenizer: str | None = None,
        center_weight: NonNegative = 0.01,
        threshold: float = 0.0,
        lora: dict | None = None,
        optimizer: dict | None = None,
    ):
        super().__init__()
        self.save_hyperparameters()
        from zoo.models.causal_lm import build_causal_lm, check_tokenizer_fits, load_tokenizer, tokenizer_for, wrap_lora

        lm = build_causal_lm(arch)
        self.tokenizer = load_tokenizer(tokenizer_for(arch, tokenizer))  # follows the model; datamodules take it
        check_tokenizer_fits(
            self.tokenizer,
            lm,
            f"model.arch {arch!r}",
            f"the tokenizer {tokenizer_for(arch, tokenizer) or 'zoo-lm-bpe8k (shipped)'}",
        )
        self.backbone = lm.base_model
        if self.uses_lora:  # a peft wrapper of the decoder: forward and outputs unchanged, base weights frozen
            self.backbone = wrap_lora(self.backbone, lora)
        self.head = nn.Linear(lm.config.hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        self.threshold = float(threshold)
        self.val_accuracy, self.val_loss, self.val_gap = MeanMetric(), MeanMetric(), MeanMetric()
        self.test_accuracy, self.test_loss, self.test_gap = MeanMetric(), MeanMetric(), MeanMetric()

    @property
    def uses_lora(self) -> bool:
        """Whether the decoder carries LoRA adapters (``model.lora`` given with r > 0)."""
        return bool(self.hparams.lora) and int(self.hparams.lora.get("r", 8)) > 0

    def score(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Costs ``(B,)`` of right-padded ``(B, T)`` sequences (prompt + reply), read at the last real token."""
        h = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        last = attention_mask.long().sum(1).clamp_min(1) - 1
        return self.head(h[torch.arange(h.shape[0], device=h.device), last]).squeeze(-1).float()

    def export_graph(self) -> tuple:
        """The scorer ``score(input_ids, attention_mask) -> (B,)`` for ONNX (any batch size and length)."""
        from zoo.core.export import Bound
        from zoo.models.causal_lm import export_batch

        args, dynamic = export_batch(self.tokenizer)
        return Bound(self, "score"), args, dynamic

    def remap_init_state(self, state: dict, source_method: str, source_cfg: dict | None = None) -> dict:
        """A causal LM's weights (zoo-lm ``lm.model.*``, an HF ``model.*`` state dict) onto ``backbone.*``; the output
        projection is dropped and the head (a head key) keeps its zero init; any other key is passed on for the loader
        to refuse. Another cost model's state passes unchanged. Under LoRA the decoder weights land on the adapted
        layers' ``base_layer`` (peft's names) and the adapters start fresh."""
        if any(k.startswith("backbone.") for k in state):
            return state
        # own decoder keys by their plain HF name (peft's wrapper names removed)
        own = {
            k.removeprefix("backbone.").removeprefix("base_model.model.").replace(".base_layer.", "."): k
            for k in self.state_dict()
            if k.startswith("backbone.") and "lora_" not in k
        }
        out = {}
        for key, value in state.items():
            prefix = next((p for p in ("lm.model.", "model.") if key.startswith(p)), None)
            if prefix is not None:
                name = key[len(prefix) :]
                out[own.get(name, "backbone." + name)] = value
            elif not key.endswith("lm_head.weight"):
                out[key] = value  # left for the loader to report as unexpected
        return out

    def _pair(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.cat([batch["chosen_input_ids"], batch["rejected_input_ids"]])
        mask = torch.cat([batch["chosen_attention_mask"], batch["rejected_attention_mask"]])
        c = self.score(ids, mask)
        B = batch["chosen_input_ids"].shape[0]
        return c[:B], c[B:]

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        c_w, c_l = self._pair(batch)
        loss = bradley_terry_cost_loss(c_w, c_l, self.hparams.center_weight)
        n = c_w.numel()
        self.log("train/loss", loss, on_step=True, prog_bar=True, batch_size=n)
        self.log("train/accuracy", (c_l > c_w).float().mean(), on_step=True, batch_size=n)
        return loss

    def _held_out(self, batch: dict, stage: str) -> None:
        c_w, c_l = self._pair(batch)
        n = c_w.numel()
        acc, gap, loss = (getattr(self, f"{stage}_{m}") for m in ("accuracy", "gap", "loss"))
        acc.update(pair_accuracy(c_w, c_l))
        gap.update(c_l - c_w)
        loss.update(bradley_terry_cost_loss(c_w, c_l, self.hparams.center_weight), weight=n)
        self.log(f"{stage}/accuracy", acc, on_epoch=True, prog_bar=True, batch_size=n)
        self.log(f"{stage}/cost_gap", gap, on_epoch=True, batch_size=n)
        self.log(f"{stage}/loss", loss, on_epoch=True, batch_size=n)

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        """Validation pairs (``preference_val``: checkpoint selection): accuracy (:func:`pair_accuracy`), loss and
        mean cost gap c_l - c_w."""
        self._held_out(batch, "val")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        """The same on the test pairs (``preference_eval``), which nothing was selected on."""
        self._held_out(batch, "test")

    def configure_optimizers(self):
        steps = self.trainer.estimated_stepping_batches if self._trainer is not None else None
        params = [p for p in self.parameters() if p.requires_grad]  # under LoRA: the adapters and the head
        return build_optimizer(params, self.hparams.optimizer, total_steps=steps)

    predict_schema: ClassVar = [{"prompt": str, "reply": str, "cost": float, "harmful": bool}]

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> list[dict]:
        """``zoo predict shapo-cost-model.zoo-lm-hh PROMPT REPLY [PROMPT REPLY ...]``: the cost of each reply and
        whether it is above the model's threshold (``harmful``)."""
        if len(inputs) % 2:
            raise ValueError("give PROMPT REPLY pairs")
        tok = self.tokenizer
        out = []
        for prompt, reply in zip(inputs[::2], inputs[1::2]):
            ids = torch.tensor([PreferenceDataModule.encode_reply(tok, prompt, reply)], device=self.device)
            with torch.no_grad():
                c = self.score(ids, torch.ones_like(ids)).item()
            out.append({"prompt": prompt, "reply": reply, "cost": c, "harmful": bool(c > self.threshold)})
        return out

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """One line per reply of :meth:`predict_record`: cost, harmful or harmless, the reply's start."""
        return "\n".join(
            f"{r['cost']:+.3f} {'harmful' if r['harmful'] else 'harmless'}: {r['reply'][:60]!r}"
            for r in self.predict_record(inputs, out_dir)
        )
