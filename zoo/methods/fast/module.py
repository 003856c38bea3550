"""``FastSAEModule``: an SAE (sae-lens Standard or JumpReLU) trained on one LM layer's residual stream, the
LightningModule of FAST (Li et al., arXiv 2506.07691). Which pipeline feeds it (FAST, BT(F), BT(P)) is the
datamodule's choice; this module is the same for all three, as in the paper.

The SAE sees activations multiplied by ``act_scale`` (mean norm ``sqrt(D)`` on its training stream, set at fit
start); every metric is in the LM's own units. Validation runs each validation conversation alone and logs
``val/log2_mse`` and ``val/log2_mse_st`` (eq. 7 in log₂, all tokens / chat-template tokens), ``val/l0``,
``val/explained_variance`` (torchmetrics), ``val/dead`` and ``val/dense``.
"""

from __future__ import annotations

import functools
import math
from typing import ClassVar, Literal

import torch
from torchmetrics import ExplainedVariance

from zoo.core.constraints import NonNegative, NonNegativeInt, Positive, PositiveInt, Probability
from zoo.core.module import ZooModule
from zoo.core.registry import register_method
from zoo.methods.fast.datamodule import FastSAEDataModule
from zoo.methods.fast.metrics import dead_dense, eq7_mse
from zoo.methods.fast.sae import build_sae, coefficient_warmup, geometric_median, lr_factor, sparsity_key


@functools.lru_cache(maxsize=1)
def shared_lm(ref: str):
    """``load_causal_lm(ref)``, kept for the next module of the same LM: a grid of SAEs on SmolLM2 loads it once
    (538 MB), not once per SAE. The LM is used in eval mode under ``no_grad`` only, never changed. The load runs
    under a forked torch RNG: building the model draws random initial weights, and without the fork an SAE trained
    after a cache hit would start from other random numbers than one trained after a load (a run resumed in the
    process that trained another would then differ from the same run made in one go)."""
    from zoo.models.causal_lm import load_causal_lm

    with torch.random.fork_rng(devices=[]):
        return load_causal_lm(ref)


@register_method("fast", datamodule=FastSAEDataModule)
class FastSAEModule(ZooModule):
    """A sparse autoencoder on block ``layer`` of ``lm``.

    Args:
        lm: zoo id, base id (``smollm2-135m-instruct``), local HF directory or Hub name of the causal LM (not stored
            in checkpoints).
        layer: decoder block whose output is read (0-based; zoo-lm has 0-3, SmolLM2-135M 0-29).
        sae: ``standard`` (ReLU, L1) or ``jumprelu`` (L0, STE).
        expansion: ``d_sae = expansion * D``.
        l1_coefficient: λ of the Standard SAE's L1 penalty (paper 5).
        l0_coefficient: λ of the JumpReLU SAE's L0 penalty (paper 0.01).
        jumprelu_bandwidth, jumprelu_init_threshold: STE bandwidth and initial θ (paper 0.001 / 0.001).
        lr, lr_end: Adam learning rate and the end of its cosine decay (paper 7e-5 -> 7e-6).
        warmup_frac, decay_frac, sparsity_warmup_frac: LR warm-up, LR decay and λ warm-up as fractions of the steps
            (paper 16k, 64k and 10k of 320k steps).
        dead_window: steps without firing after which a feature counts as dead during training.
        geometric_median_sample: activations used for the ``b_dec`` initialisation.
        lr_schedule: ``paper`` (warm-up, hold, cosine to ``lr_end`` over the last ``decay_frac``: :func:`.sae.lr_factor`)
            or ``sae-lens`` (sae-lens' ``cosineannealing``: warm-up, cosine to ``lr_end`` over the middle, then linear
            from ``lr_end`` to 0 over the last ``decay_frac``); the second only for the comparison with sae-lens'
            runner (``experiments --gap``).
        b_dec_init: ``geometric_median`` (App. A) or ``zeros`` (sae-lens' runner).

    Raises:
        ValueError: a bad ``model.layer`` (naming the LM's block range) or ``model.sae``.
    """

    export_formats = ("package",)

    def __init__(
        self,
        lm: str = "zoo-lm.chat",
        layer: NonNegativeInt = 2,
        sae: Literal["standard", "jumprelu"] = "standard",
        expansion: PositiveInt = 8,
        l1_coefficient: NonNegative = 5.0,
        l0_coefficient: NonNegative = 0.01,
        jumprelu_bandwidth: Positive = 0.001,
        jumprelu_init_threshold: Positive = 0.001,
        lr: Positive = 1e-3,
        lr_end: NonNegative = 1e-4,
        warmup_frac: Probability = 0.05,
        decay_frac: Probability = 0.2,
        sparsity_warmup_frac: Probability = 0.03,
        dead_window: PositiveInt = 50,
        geometric_median_sample: PositiveInt = 4096,
        lr_schedule: Literal["paper", "sae-lens"] = "paper",
        b_dec_init: Literal["geometric_median", "zeros"] = "geometric_median",
    ):
        super().__init__()
        self.save_hyperparameters()
        model, _ = self.lm_and_tokenizer()
        from zoo.methods.fast.pipelines import truncated_lm

        truncated_lm(model, layer)  # raises "model.layer: ... out of range" before any run directory
        d_in = model.config.hidden_size
        self.sae = build_sae(
            sae, d_in, expansion * d_in, l1_coefficient, l0_coefficient, jumprelu_bandwidth, jumprelu_init_threshold
        )
        self.register_buffer("act_scale", torch.ones(()))
        self.register_buffer("steps_since_fired", torch.zeros(expansion * d_in, dtype=torch.long))
        self.explained = ExplainedVariance(multioutput="variance_weighted")
        self._val: list = []

    # ---- LM and SAE in the LM's units ------------------------------------------------------------------------
    def lm_and_tokenizer(self):
        """The LM and tokenizer (kept out of the state dict; loaded once per process: :func:`shared_lm`)."""
        if "_lm" not in self.__dict__:
            self.__dict__["_lm"] = shared_lm(self.hparams.lm)
        return self.__dict__["_lm"]

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Feature activations ``[..., d_sae]`` of LM activations ``x [..., D]``."""
        return self.sae.encode(x * self.act_scale)

    def decode(self, f: torch.Tensor) -> torch.Tensor:
        """Reconstruction ``[..., D]`` in the LM's units."""
        return self.sae.decode(f) / self.act_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))

    # ---- training ----------------------------------------------------------------------------------------------
    def on_fit_start(self) -> None:
        dm = self.trainer.datamodule
        if self.init_from_ref is None and not self.resuming:
            self.act_scale.fill_(dm.norm_scale())
            if self.hparams.b_dec_init == "geometric_median":
                sample = dm.sample(self.hparams.geometric_median_sample) * self.act_scale
                with torch.no_grad():
                    self.sae.b_dec.copy_(geometric_median(sample))

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.sae.parameters(), lr=self.hparams.lr, betas=(0.9, 0.999))
        total = int(self.trainer.estimated_stepping_batches)
        hp = self.hparams
        if hp.lr_schedule == "sae-lens":
            from sae_lens.training.optim import get_lr_scheduler

            sched = get_lr_scheduler(
                "cosineannealing",
                opt,
                total,
                hp.lr,
                round(hp.warmup_frac * total),
                round(hp.decay_frac * total),
                hp.lr_end,
                1,
            )
        else:
            sched = torch.optim.lr_scheduler.LambdaLR(
                opt, lambda s: lr_factor(s, total, hp.warmup_frac, hp.decay_frac, hp.lr_end / hp.lr)
            )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def coefficients(self, step: int) -> dict[str, float]:
        """The sparsity coefficient at ``step`` after its warm-up."""
        key = sparsity_key(self.sae)
        value = self.hparams.l1_coefficient if key == "l1" else self.hparams.l0_coefficient
        total = max(1, int(self.trainer.estimated_stepping_batches)) if self._trainer is not None else 1
        return {key: coefficient_warmup(value, step, round(self.hparams.sparsity_warmup_frac * total))}

    def sae_loss(self, x: torch.Tensor, step: int):
        """sae-lens' training forward pass on LM activations ``x [B, D]`` (scaled here)."""
        from sae_lens.saes.sae import TrainStepInput

        return self.sae.training_forward_pass(
            TrainStepInput(x * self.act_scale, self.coefficients(step), None, step, False)
        )

    def training_step(self, batch, batch_idx):
        out = self.sae_loss(batch, self.global_step)
        fired = (out.feature_acts > 0).any(dim=0)
        self.steps_since_fired.add_(1).masked_fill_(fired, 0)
        l0 = (out.feature_acts > 0).float().sum(-1).mean()
        self.log_dict(
            {
                "train/loss": out.loss,
                "train/mse": out.losses["mse_loss"],
                "train/l0": l0,
                "train/dead": (self.steps_since_fired >= self.hparams.dead_window).float().mean(),
            },
            prog_bar=True,
        )
        return out.loss

    # ---- validation (eq. 7) ------------------------------------------------------------------------------------
    def validation_step(self, batch, batch_idx):
        x = batch["x"]
        f = self.encode(x)
        x_hat = self.decode(f)
        self.explained.update(x_hat, x)
        self._val.append(
            {
                "sq": ((x - x_hat) ** 2).sum(-1),
                "seq": batch["seq"],
                "pos": batch["pos"],
                "template": batch["template"],
                "l0": (f > 0).sum(-1),
                "fired": (f > 0).sum(0),
            }
        )

    def val_summary(self) -> dict[str, torch.Tensor | float]:
        """The gathered validation tensors of the last validation epoch and their metrics."""
        cat = {k: torch.cat([v[k] for v in self._val]) for k in ("sq", "seq", "pos", "template", "l0")}
        fired = torch.stack([v["fired"] for v in self._val]).sum(0)
        freq = fired.float() / len(cat["sq"])
        dead, dense = dead_dense(freq)
        hidden = self.sae.cfg.d_in
        mse, mse_st = eq7_mse(cat["sq"], cat["seq"], hidden), eq7_mse(cat["sq"], cat["seq"], hidden, cat["template"])
        return {
            **cat,
            "freq": freq,
            "log2_mse": math.log2(mse),
            "log2_mse_st": math.log2(mse_st),
            "l0_mean": float(cat["l0"].float().mean()),
            "dead": dead,
            "dense": dense,
        }

    def on_validation_epoch_end(self) -> None:
        if not self._val:
            return
        s = self.val_summary()
        metrics = {
            "val/log2_mse": s["log2_mse"],
            "val/log2_mse_st": s["log2_mse_st"],
            "val/l0": s["l0_mean"],
            "val/explained_variance": float(self.explained.compute()),
            "val/dead": s["dead"],
            "val/dense": s["dense"],
        }
        dm = getattr(self.trainer, "datamodule", None)
        self.log_dict({**metrics, **{f"data/{k}": float(v) for k, v in getattr(dm, "stats", {}).items()}})
        self.last_val = s
        self.explained.reset()
        self._val = []
        if not self.trainer.sanity_checking:
            print(
                f"[fast] {self.hparams.sae} SAE, layer {self.hparams.layer}: log2 MSE {metrics['val/log2_mse']:.4f}"
                f"  log2 MSE_st {metrics['val/log2_mse_st']:.4f}  L0 {metrics['val/l0']:.1f}"
                f"  EV {metrics['val/explained_variance']:.3f}  dead {s['dead']:.3f}  dense {s['dense']:.3f}"
            )

    # ---- export and predict ----------------------------------------------------------------------------------
    def save_sae_lens(self, path: str) -> None:
        """Write an sae-lens inference SAE (``SAE.load_from_disk(path)``) that works on the LM's raw activations:
        the activation scale is folded into ``W_enc``, ``W_dec`` and ``b_dec``."""
        import copy

        sae = copy.deepcopy(self.sae)
        with torch.no_grad():
            s = float(self.act_scale)
            sae.W_enc.mul_(s)
            sae.W_dec.div_(s)
            sae.b_dec.div_(s)
        sae.save_inference_model(path)

    predict_schema: ClassVar = [
        {
            "text": str,
            "sae": str,
            "layer": int,
            "lm": str,
            "tokens": [{"pos": int, "token": str, "sq_error": float, "template": bool}],
            "features": [{"feature": int, "sum": float, "active_tokens": int, "peak": float, "peak_pos": int}],
        }
    ]

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> list[dict]:
        """Per user message (rendered with the chat template and a generation prompt): each token's reconstruction
        error (eq. 7 summand / H; template tokens marked) and the top-3 features by summed activation
        (:func:`.predict.describe`)."""
        from zoo.methods.fast.predict import describe

        return [describe(self, text) for text in inputs]

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record` as one table per message, blank-line separated."""
        from zoo.methods.fast.predict import describe_text

        return "\n\n".join(describe_text(d) for d in self.predict_record(inputs, out_dir))
