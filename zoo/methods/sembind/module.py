"""``SemBindModule``: SemBind (Zhang et al., ICML 2026; notes §1) at CPU scale, in three stages of one module.

- ``stage: generator`` (``recipes/sembind-generator.yaml``, ``sembind-proxy.yaml``): trains the caption-conditioned
  pixel diffusion model (:class:`generator.CaptionDiffusion`); the provider's and the attacker's proxy model train on
  disjoint halves of the data with different seeds. Logs ``train/loss``, ``val/loss``.
- ``stage: encoder`` (``recipes/sembind-encoder.yaml``): trains the semantic encoder (:class:`encoder.SemanticEncoder`,
  class + colour). Logs ``val/class_acc``, ``val/colour_acc``.
- ``stage: masker`` (``recipes/sembind.yaml``): loads the three models above (``model.generator``, ``model.proxy``,
  ``model.encoder``: zoo ids or package folders), generates the masker's training images, trains the semantic
  masker (:mod:`masker`: feature contrast, then hash losses) in its single training step and evaluates the
  watermarks with and without SemBind under forgery (:func:`pipeline.evaluate`); writes
  ``<run_dir>/sembind/{evaluation.json, grid.png, ...}`` and logs ``eval/<scheme>/<defense>/<attack>/{tpr,far}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import torch

from zoo.core.constraints import (
    Keys,
    NonEmpty,
    NonNegative,
    NonNegativeInt,
    OneOf,
    OpenUnit,
    Positive,
    PositiveInt,
    Probability,
    Range,
)
from zoo.core.data import DataError
from zoo.core.module import ZooModule
from zoo.core.optim import build_optimizer
from zoo.core.registry import register_method
from zoo.methods.sembind.datamodule import CaptionDataModule
from zoo.methods.sembind.encoder import SemanticEncoder
from zoo.methods.sembind.generator import CaptionDiffusion
from zoo.methods.sembind.masker import MASKER_DEFAULTS
from zoo.methods.sembind.pipeline import EVAL_DEFAULTS
from zoo.methods.sembind.watermarks import SCHEMES

STAGES = ("generator", "encoder", "masker")
GENERATOR_DEFAULTS = {
    "size": 8,
    "widths": [32, 64],
    "layers_per_block": 1,
    "norm_groups": 8,
    "train_steps": 1000,
    "p_null": 0.1,
}
#: The ``generator_kwargs``, ``masker`` and ``evaluation`` blocks: each key's allowed values.
GeneratorSettings = Annotated[
    dict | None,
    Keys(
        GENERATOR_DEFAULTS,
        size=PositiveInt,
        widths=Annotated[list[PositiveInt], NonEmpty],
        layers_per_block=PositiveInt,
        norm_groups=PositiveInt,
        train_steps=PositiveInt,
        p_null=Probability,
    ),
]
MaskerSettings = Annotated[
    dict | None,
    Keys(
        MASKER_DEFAULTS,
        contrast_epochs=NonNegativeInt,
        hash_epochs=NonNegativeInt,
        lr=Positive,
        temperature=Positive,
        scale=Positive,
        net=Keys(MASKER_DEFAULTS["net"], **dict.fromkeys(MASKER_DEFAULTS["net"], PositiveInt)),
    ),
]
EvaluationSettings = Annotated[
    dict | None,
    Keys(
        EVAL_DEFAULTS,
        schemes=Annotated[list[Annotated[str, OneOf(SCHEMES)]], NonEmpty],
        ratios=Annotated[list[Annotated[float, Range(0, 1, min_open=True)]], NonEmpty],
        attacks=list[Literal["reprompt", "imprint"]],
        attackers=list[Literal["proxy", "provider"]],
        distortions=list[Literal["jpeg", "blur", "noise", "crop"]],
        n_images=PositiveInt,
        n_calibration=PositiveInt,
        n_null=PositiveInt,
        n_captions=PositiveInt,
        n_per_caption=PositiveInt,
        steps=PositiveInt,
        guidance=NonNegative,
        seeds=Annotated[list[NonNegativeInt], NonEmpty],
        fpr=OpenUnit,
        predict_r=Probability,
    ),
]


def load_stage(ref: str, stage: str) -> torch.nn.Module:
    """The network saved by a ``stage`` run (a zoo id or package folder), or a paper-scale backend
    (:mod:`backends`): for ``generator`` a diffusers Stable Diffusion folder (``unet/`` and ``vae/``), for ``encoder``
    a transformers DINOv2 folder (``config.json`` with ``model_type: dinov2``); in eval mode with gradients off.

    Raises:
        DataError: the package was made by another stage or method.
    """
    from zoo.core.hub import load_package
    from zoo.methods.sembind.backends import Dinov2Encoder, LatentCaptionDiffusion

    folder = Path(ref)
    if stage == "generator" and (folder / "unet").is_dir() and (folder / "vae").is_dir():
        return LatentCaptionDiffusion.from_pretrained(folder).eval().requires_grad_(False)
    config = folder / "config.json"
    if stage == "encoder" and config.is_file() and json.loads(config.read_text()).get("model_type") == "dinov2":
        return Dinov2Encoder.from_pretrained(folder).eval().requires_grad_(False)
    cfg, state = load_package(ref)
    model = cfg.get("model", {})
    if cfg.get("method") != "sembind" or model.get("stage") != stage:
        raise DataError(
            f"{ref}: not a sembind {stage} package (method {cfg.get('method')!r}, stage {model.get('stage')!r})"
        )
    net = build_network(stage, model.get("generator_kwargs"), model.get("encoder_width", 16))
    prefix = "net."
    net.load_state_dict({k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)})
    return net.eval().requires_grad_(False)


def build_network(stage: str, generator_kwargs: dict | None, encoder_width: int) -> torch.nn.Module:
    """:class:`CaptionDiffusion` (generator) or :class:`SemanticEncoder` (encoder) from plain arguments."""
    if stage == "generator":
        kw = {**GENERATOR_DEFAULTS, **(generator_kwargs or {})}
        kw.pop("p_null")
        return CaptionDiffusion(**kw)
    return SemanticEncoder(encoder_width)


def eval_metrics(result: dict) -> dict[str, float]:
    """``eval/<scheme>/<defense>[r]/<attack>[/<attacker>]/{tpr,far}`` of the first seed of an evaluation result
    (:func:`zoo.methods.sembind.evaluation.evaluate`), the keys the masker fit logs and ``zoo eval`` re-measures."""
    out = {}
    for row in result["rows"]:
        if row["seed"] == result["seeds"][0]:
            tag = f"{row['scheme']}/{row['defense']}{'' if row['defense'] == 'plain' else row['r']}/{row['attack']}" + (
                "" if row["attack"] == "none" else f"/{row['attacker']}"
            )
            out[f"eval/{tag}/tpr"], out[f"eval/{tag}/far"] = float(row["tpr"]), float(row["far"])
    return out


@register_method("sembind", datamodule=CaptionDataModule)
class SemBindModule(ZooModule):
    """One of SemBind's three stages (see the module docstring).

    Args:
        stage: ``generator`` | ``encoder`` | ``masker``.
        generator_kwargs: overrides of :data:`GENERATOR_DEFAULTS` (``size``, ``widths``, ``layers_per_block``,
            ``norm_groups``, ``train_steps``, ``p_null``); for the masker stage the shape of fresh generators built
            when ``model.generator``/``model.proxy`` is null (tiny runs).
        encoder_width: ResNet width of the encoder stage (and of a fresh encoder in the masker stage).
        generator, proxy, encoder: masker stage: the provider's generator, the attacker's proxy and the semantic
            encoder (zoo ids or package folders; null builds a fresh random network, for tests only).
        masker: masker settings (:data:`masker.MASKER_DEFAULTS`).
        evaluation: evaluation settings (:data:`pipeline.EVAL_DEFAULTS`).
        key_file: a JSON file of watermark keys (``pipeline.load_keys``); null = the shipped public demo keys
            (seeded, so anyone can forge them: never use them to protect real images).
        optimizer: ``zoo.core.optim.build_optimizer`` dict (default AdamW lr 1e-3).

    Raises:
        ValueError: an unknown stage.
    """

    export_formats = ("package",)

    def __init__(
        self,
        stage: Annotated[str, OneOf(STAGES)] = "generator",
        generator_kwargs: GeneratorSettings = None,
        encoder_width: PositiveInt = 16,
        generator: str | None = None,
        proxy: str | None = None,
        encoder: str | None = None,
        masker: MaskerSettings = None,
        evaluation: EvaluationSettings = None,
        key_file: str | None = None,
        optimizer: dict | None = None,
    ):
        super().__init__()
        if stage not in STAGES:
            raise ValueError(f"model.stage: {stage!r} is not one of {STAGES}")
        self.save_hyperparameters()
        self.evaluation: dict | None = None
        if stage == "masker":
            from zoo.methods.sembind.masker import SemanticMasker, masker_settings

            self.masker = SemanticMasker(in_dim=8 * encoder_width, **masker_settings(masker)["net"])
            self.register_buffer("thresholds", torch.full((len(SCHEMES),), float("nan")))  # for zoo predict
            self.automatic_optimization = False
        else:
            self.net = build_network(stage, generator_kwargs, encoder_width)

    # ---- generator / encoder training --------------------------------------------------------------------------
    def _loss(self, batch) -> tuple[torch.Tensor, dict]:
        x, y, colour, _, e = batch
        if self.hparams.stage == "generator":
            p_null = {**GENERATOR_DEFAULTS, **(self.hparams.generator_kwargs or {})}["p_null"]
            return self.net.training_loss(x * 2 - 1, e, p_null), {}
        return self.net.loss(x, y, colour)

    def training_step(self, batch, batch_idx):
        if self.hparams.stage == "masker":
            if self.evaluation is None:
                self._run_masker(self.trainer.datamodule, Path(self.trainer.default_root_dir) / "sembind")
            return None
        loss, acc = self._loss(batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch[0]))
        for k, v in acc.items():
            self.log(f"train/{k}", v, batch_size=len(batch[0]))
        return loss

    def validation_step(self, batch, batch_idx):
        if self.hparams.stage == "masker":
            return
        torch.manual_seed(batch_idx)  # the same noise and timesteps at every validation: comparable val/loss
        loss, acc = self._loss(batch)
        self.log("val/loss", loss, batch_size=len(batch[0]))
        for k, v in acc.items():
            self.log(f"val/{k}", v, batch_size=len(batch[0]))

    def configure_optimizers(self):
        if self.hparams.stage == "masker":
            return None  # the masker trains inside its single step (two stages, own optimiser)
        return build_optimizer(self.parameters(), self.hparams.optimizer or {"name": "adamw", "lr": 1e-3})

    # ---- masker + evaluation -----------------------------------------------------------------------------------
    def networks(self) -> dict[str, torch.nn.Module]:
        """The frozen provider generator, proxy generator and encoder of the masker stage (loaded once)."""
        if getattr(self, "_networks", None) is None:
            hp = self.hparams
            nets = {}
            for name, stage in (("generator", "generator"), ("proxy", "generator"), ("encoder", "encoder")):
                ref = getattr(hp, name)
                if ref:
                    nets[name] = load_stage(ref, stage)
                else:
                    torch.manual_seed({"generator": 0, "proxy": 1, "encoder": 2}[name])
                    nets[name] = (
                        build_network(stage, hp.generator_kwargs, hp.encoder_width).eval().requires_grad_(False)
                    )
            object.__setattr__(self, "_networks", nets)  # not submodules: the package holds only the masker
        return self._networks

    def _run_masker(self, dm: CaptionDataModule, out: Path) -> None:
        from zoo.methods.sembind.evaluation import evaluate
        from zoo.methods.sembind.pipeline import load_keys, train_masker_on_generations

        nets = self.networks()
        settings = self.hparams.evaluation or {}
        stats = train_masker_on_generations(
            self.masker, nets["generator"], nets["encoder"], dm, self.hparams.masker, settings
        )
        for k, v in stats.items():
            self.log(f"masker/{k}", float(v), batch_size=1)
        result = evaluate(self.masker, nets, dm, load_keys(self.hparams.key_file), settings, out)
        self.evaluation = result
        for key, value in eval_metrics(result).items():
            self.log(key, value, batch_size=1)
        for k, name in enumerate(SCHEMES):
            self.thresholds[k] = result["thresholds"].get(name, float("nan"))
        out.mkdir(parents=True, exist_ok=True)
        (out / "evaluation.json").write_text(json.dumps(result, indent=1))

    @torch.no_grad()
    def evaluate(self, dm: CaptionDataModule) -> dict[str, float] | None:
        """``zoo eval`` of a masker: the recipe's evaluation grid re-run with the stored masker (no retraining),
        the ``eval/*`` TPR and FAR the fit logged; ``None`` for the generator and encoder stages (their
        ``val/loss`` comes from ``trainer.validate``)."""
        if self.hparams.stage != "masker":
            return None
        from zoo.methods.sembind.evaluation import evaluate
        from zoo.methods.sembind.pipeline import load_keys

        self.masker.eval()
        result = evaluate(
            self.masker, self.networks(), dm, load_keys(self.hparams.key_file), self.hparams.evaluation or {}
        )
        return eval_metrics(result)

    # ---- prediction --------------------------------------------------------------------------------------------
    predict_schema: ClassVar = {
        "verified": [
            {"image": str, "scheme": str, "score": float, "threshold": (float, None), "watermarked": (bool, None)}
        ],
        "generated": [{"caption": str, "scheme": str, "wrote": str, "size": int, "r": float}],
    }

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> dict:
        """``zoo predict sembind.cifar "a red truck"`` writes a SemBind-marked PNG per scheme to ``--out-dir``
        (default ``.``); ``zoo predict sembind.cifar IMAGE.png`` scores each scheme against its threshold
        (:func:`.pipeline.predict`).

        Raises:
            DataError: no input, a masker-less package, or an input that is a file but not a readable image
                (nothing is written).
        """
        from zoo.methods.sembind.pipeline import predict

        if self.hparams.stage != "masker":
            raise DataError(
                f"zoo predict sembind: needs a masker package (stage masker), this is {self.hparams.stage!r}"
            )
        if not inputs:
            raise DataError('zoo predict sembind: give a caption ("a red truck") or an image file')
        return predict(self, inputs, out_dir)

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record` as lines: image, scheme, score, threshold, verdict; or caption, scheme, PNG written."""
        from zoo.methods.sembind.pipeline import predict_text

        return predict_text(self.predict_record(inputs, out_dir))
