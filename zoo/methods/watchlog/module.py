"""``WatchLogModule``: EDR event windows as videos -> ViT + temporal cross-attention adapter -> detection head and a
causal-LM explanation (WatchLog, ICML 2026; only the abstract is public, see README.md for what is ours).

Construction, the losses of the four stages and threshold calibration live here; verdicts, explanations and
``zoo predict`` in ``inference.py``; the baselines in ``baselines.py``. The class stays one file (~450 lines): the
four stages switch the same encoders, decoder and loss weights on and off, so splitting it would scatter one state.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import nn

from zoo.core.constraints import NonNegative, NonNegativeInt, OneOf, OpenUnit, Positive, PositiveInt
from zoo.core.module import ZooModule
from zoo.core.optim import build_optimizer
from zoo.core.registry import register_method
from zoo.methods.watchlog.baselines import TokenEncoder
from zoo.methods.watchlog.datamodule import WatchLogDataModule, WindowDataset
from zoo.methods.watchlog.decoder import Projector, PromptBuilder, teacher_forced_loss
from zoo.methods.watchlog.encoders import DetectionHead, FrameEncoder
from zoo.methods.watchlog.event_images import SYSMON_LAYOUT, EventRenderer
from zoo.methods.watchlog.inference import TECHNIQUE_BUFFERS, Inference
from zoo.methods.watchlog.metrics import best_f1_threshold, classification_metrics

_log = logging.getLogger("zoo")
STAGES = ("pretrain", "align", "sft", "detect")
_ENCODER_DEFAULTS = {
    "kind": "video",
    "patch": [8, 16],
    "dim": 48,
    "depth": 2,
    "heads": 2,
    "adapter": "pixel",
    "adapter_layers": None,
    "vocab_size": 8192,
    "token_len": 48,
}
_DECODER_DEFAULTS = {
    "arch": "zoo-lm-small",
    "init": None,
    "tokenizer": None,
    "max_answer_tokens": 40,
    "max_new_tokens": 32,
    "ground_verdict": False,
    "evidence": "head",
    "technique": "retrieval",
}


@register_method("watchlog", datamodule=WatchLogDataModule)
class WatchLogModule(Inference, ZooModule):
    """WatchLog detector + explainer; its options also build the ablations and, with ``encoder.kind=tokens``, the
    serialised-token baseline (:class:`zoo.methods.watchlog.baselines.TokenEncoder` under the same head).

    Args:
        stage: ``pretrain`` (masked-frame modelling: frame encoder + adapter), ``align`` (captioning: projector
            only, the LM and encoder frozen), ``sft`` (explanation cross-entropy + ``det_weight`` x detection loss,
            all trainable), ``detect`` (detection loss only; baselines and ablations). Stages 1/2 are ours.
        encoder: ``{kind: video|tokens, patch, dim, depth, heads, adapter: pixel|pooled|none, adapter_layers,
            vocab_size, token_len}``; ``tokens`` is the serialised-token transformer baseline.
        window: frames per window; canvas: ``[height, width, rows, cols]``; layout: slot keys (None = Sysmon);
            group_by: ``host`` | ``process``. These must match the data block (checked in ``setup``) and are what
            ``predict_cli`` uses on new files.
        frame_stride: keep every k-th frame (fewer-frames ablation, ours).
        decoder: ``{arch, init, tokenizer, max_answer_tokens, max_new_tokens, ground_verdict}`` or None (no
            language decoder). ``init`` is a zoo id / HF dir whose LM weights are loaded at construction
            (``zoo-lm.base``). ``ground_verdict`` (ours, default False): True forces the answer to start with the
            calibrated detection head's verdict (``verdict: malicious ;`` when ``p >= threshold``) so the text
            always agrees with the detector, and the LM generates only the technique and evidence; False lets the
            LM write the verdict too (it sees the detector's probabilities through the projector, and on the
            held-out recordings its verdict scored higher F1 than the calibrated threshold, docs/results.md).
        det_weight: weight of the detection loss in ``sft``.
        event_weight: weight of the per-event BCE beside the per-window BCE (ours).
        pos_weight: positive-class weight of both BCE terms (class imbalance; ours).
        mask_ratio: fraction of frames hidden in masked-frame modelling.
        optimizer: :func:`zoo.core.optim.build_optimizer` dict.
        n_techniques: size of the technique retrieval index (set from the weights when loading; the index is fitted
            on the training windows at the end of training, ``inference.Inference.fit_technique_index``).
        decoder keys ``evidence`` (``head`` | ``lm``) and ``technique`` (``retrieval`` | ``lm``): where the
            explanation's evidence and technique come from (``inference.py``; ours, default head / retrieval).

    Raises:
        ValueError: an unknown stage, an encoder/decoder key that does not exist, or a stage that needs a decoder
            (``align``, ``sft``) without one.
    """

    head_keys = ("head.", "recon.", "projector.")
    export_formats = ("package", "onnx")
    # what the weights only make sense with: how events become pixels, and the language model's identity
    weight_settings: ClassVar[dict[str, str]] = {
        "canvas": "model.canvas",
        "layout": "model.layout",
        "window": "model.window",
        "group_by": "model.group_by",
        "lm.arch": "model.decoder.arch",
        "lm.tokenizer": "model.decoder.tokenizer",
    }

    def __init__(
        self,
        stage: Annotated[str, OneOf(STAGES)] = "detect",
        encoder: dict | None = None,
        window: PositiveInt = 16,
        canvas: Sequence[PositiveInt] = (32, 128, 4, 4),
        layout: Sequence[str] | None = None,
        group_by: Literal["host", "process"] = "host",
        frame_stride: PositiveInt = 1,
        decoder: dict | None = None,
        det_weight: NonNegative = 1.0,
        event_weight: NonNegative = 0.5,
        pos_weight: Positive = 3.0,
        mask_ratio: OpenUnit = 0.5,
        optimizer: dict | None = None,
        n_techniques: NonNegativeInt | None = None,
    ):
        super().__init__()
        self.save_hyperparameters()
        if stage not in STAGES:
            raise ValueError(f"model.stage: {stage!r} is not one of {STAGES}")
        enc = _merge(_ENCODER_DEFAULTS, encoder, "model.encoder")
        self.enc_cfg = enc
        h, w, rows, cols = canvas
        self.renderer = EventRenderer(tuple(layout or SYSMON_LAYOUT), h, w, rows, cols)
        self.n_frames = len(range(0, window, frame_stride))
        if enc["kind"] == "video":
            self.encoder = FrameEncoder(
                (h, w),
                enc["patch"],
                enc["dim"],
                enc["depth"],
                enc["heads"],
                enc["adapter"],
                enc["adapter_layers"],
                max(64, window),
            )
            ph, pw = enc["patch"]
            self.recon = nn.Linear(enc["dim"], ph * pw)
        elif enc["kind"] == "tokens":
            self.encoder = TokenEncoder(
                enc["vocab_size"], enc["dim"], enc["depth"], enc["heads"], max(4096, window * enc["token_len"])
            )
            if stage == "pretrain":
                raise ValueError("model.stage=pretrain (masked-frame modelling) needs encoder.kind=video")
        else:
            raise ValueError(f"model.encoder.kind must be video | tokens, got {enc['kind']!r}")
        self.head = DetectionHead(enc["dim"])
        self.register_buffer("threshold", torch.tensor(0.5))  # verdict threshold; set on validation (ours)
        self.init_technique_index(n_techniques or 0, enc["dim"])
        self.lm = self.projector = self.builder = None
        if decoder is not None:
            dec = _merge(_DECODER_DEFAULTS, decoder, "model.decoder")
            for key, allowed in (("evidence", ("head", "lm")), ("technique", ("retrieval", "lm"))):
                if dec[key] not in allowed:
                    raise ValueError(f"model.decoder.{key}: expected one of {allowed}, got {dec[key]!r}")
            self.dec_cfg = dec
            self._build_decoder(dec, enc["dim"])
        elif stage in ("align", "sft"):
            raise ValueError(f"model.stage={stage} needs model.decoder (the language decoder)")
        if stage == "align":
            for name, p in self.named_parameters():
                p.requires_grad_(name.startswith("projector."))
        self._val: dict[str, list] = {}

    # ------------------------------------------------------------------ construction helpers
    def _build_decoder(self, dec: dict, dim: int) -> None:
        from zoo.models.causal_lm import (
            build_causal_lm,
            drop_tied_aliases,
            fill_tied_aliases,
            load_causal_lm,
            load_tokenizer,
            tied_aliases,
            tokenizer_for,
        )

        if dec["init"]:
            self.lm, tok = load_causal_lm(dec["init"])
            self.lm.train()
        else:
            self.lm = build_causal_lm(dec["arch"])
            tok = load_tokenizer(tokenizer_for(dec["arch"], dec["tokenizer"]))
        self.tokenizer = tok
        self.projector = Projector(dim, self.lm.config.hidden_size)
        self.builder = PromptBuilder(tok, self.n_frames)
        if getattr(self.lm.config, "tie_word_embeddings", False):
            self._tied = tied_aliases(self.lm, "lm.")
            self.register_state_dict_post_hook(drop_tied_aliases)
            self.register_load_state_dict_pre_hook(fill_tied_aliases)

    def remap_init_state(
        self, state: dict[str, Any], source_method: str, source_cfg: dict | None = None
    ) -> dict[str, Any]:
        """Chain the stages: keep this module's own values for whole parts the source lacks (ours).

        A stage-1 checkpoint has no ``lm.*`` / ``projector.*`` (taken from ``decoder.init`` and fresh); a ``zoo-lm``
        package has only ``lm.*`` (its keys already match ``self.lm``). Parts the source has but this module lacks
        (an LM when ``decoder`` is None) are dropped. Any other mismatch is left for the loader to report.
        """
        own = self.state_dict()
        out = {k: v for k, v in state.items() if k not in TECHNIQUE_BUFFERS or k in own}  # refitted after training
        out.setdefault("threshold", own["threshold"])
        for prefix in ("encoder.", "head.", "recon.", "projector.", "lm."):
            has_src = any(k.startswith(prefix) for k in state)
            has_own = any(k.startswith(prefix) for k in own)
            if not has_src and has_own and prefix not in self.head_keys:
                origin = (
                    f"model.decoder.init={self.dec_cfg['init']}"
                    if prefix == "lm." and self.lm is not None and self.dec_cfg["init"]
                    else "its fresh initialisation"
                )
                _log.warning("init_from (%s): the source has no %s*; kept %s", source_method, prefix, origin)
                out.update({k: v for k, v in own.items() if k.startswith(prefix)})
            elif has_src and not has_own:
                _log.warning("init_from (%s): this model has no %s*; the source's are not used", source_method, prefix)
                out = {k: v for k, v in out.items() if not k.startswith(prefix)}
        return out

    def setup(self, stage: str) -> None:
        """Check that the data block renders and windows events the way this model was built for."""
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if not isinstance(dm, WatchLogDataModule):
            return
        for key, mine in (
            ("window", self.hparams.window),
            ("canvas", list(self.hparams.canvas)),
            ("group_by", self.hparams.group_by),
            ("layout", list(self.hparams.layout or SYSMON_LAYOUT)),
        ):
            theirs = dm.hparams.get(key)
            theirs = list(theirs or SYSMON_LAYOUT) if key == "layout" else theirs
            theirs = list(theirs) if key == "canvas" else theirs
            if theirs != mine:
                raise ValueError(f"data.{key}={theirs!r} differs from model.{key}={mine!r}; set both the same")
        if self.enc_cfg["kind"] == "tokens" and dm.hparams.token_len != self.enc_cfg["token_len"]:
            raise ValueError(
                f"data.token_len={dm.hparams.token_len} must equal model.encoder.token_len="
                f"{self.enc_cfg['token_len']} for the token baseline"
            )

    # ------------------------------------------------------------------ forward
    def _inputs(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s = self.hparams.frame_stride
        key = "tokens" if self.enc_cfg["kind"] == "tokens" else "frames"
        if key not in batch:
            raise KeyError(f"batch has no {key!r}; for encoder.kind=tokens set data.token_len > 0")
        return batch[key][:, ::s], batch["mask"][:, ::s], batch["event_labels"][:, ::s]

    def encode(self, x: torch.Tensor, mask: torch.Tensor, hide: torch.Tensor | None = None) -> torch.Tensor:
        """Tokens ``(B, T, N, D)`` from frames ``(B, T, H, W)`` or token ids ``(B, T, L)``."""
        if self.enc_cfg["kind"] == "tokens":
            return self.encoder(x)
        return self.encoder(x, mask, hide)

    def forward(self, frames: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Window attack probability ``(B,)`` from frames ``(B, T, H, W)`` (or token ids) and mask ``(B, T)``."""
        z = self.encode(frames, mask)
        return torch.sigmoid(self.head(z, mask)[0])

    def example_input(self) -> tuple:
        """A two-window batch of blank frames (or padding tokens) for graph export (the exported detector
        ``forward(frames, mask) -> (B,)`` takes any number of windows)."""
        T = self.n_frames
        if self.enc_cfg["kind"] == "tokens":
            x = torch.zeros(2, T, self.enc_cfg["token_len"], dtype=torch.long)
        else:
            x = torch.zeros(2, T, self.renderer.height, self.renderer.width)
        return x, torch.ones(2, T, dtype=torch.bool)

    def _detection(self, batch: dict) -> dict[str, torch.Tensor]:
        x, mask, ev_lab = self._inputs(batch)
        z = self.encode(x, mask)
        win_logit, ev_logit, f = self.head(z, mask)
        pw = torch.tensor(self.hparams.pos_weight, device=win_logit.device)
        out = {"win_logit": win_logit, "ev_logit": ev_logit, "frames_vec": f, "mask": mask, "ev_lab": ev_lab}
        lab = batch["label"]
        if bool((lab >= 0).all()):
            loss = F.binary_cross_entropy_with_logits(win_logit, lab.float(), pos_weight=pw)
            real = ev_lab >= 0
            if self.hparams.event_weight and bool(real.any()):
                loss = loss + self.hparams.event_weight * F.binary_cross_entropy_with_logits(
                    ev_logit[real], ev_lab[real].float(), pos_weight=pw
                )
            out["det_loss"] = loss
        return out

    def _visual(self, det: dict) -> torch.Tensor:
        return self.projector(
            det["frames_vec"],
            torch.sigmoid(det["ev_logit"]).detach().masked_fill(~det["mask"], 0),
            torch.sigmoid(det["win_logit"]).detach(),
        )

    def _mfm_loss(self, batch: dict) -> torch.Tensor:
        """Masked-frame modelling (stage 1, ours): hide frames, reconstruct their pixels from the other frames.

        ``L = mean over hidden real frames, patches, pixels of (recon(Z'_t[n]) - patch_t[n])^2``.
        """
        x, mask, _ = self._inputs(batch)
        hide = (torch.rand(mask.shape, device=mask.device) < self.hparams.mask_ratio) & mask
        hide[~hide.any(1), 0] = True  # at least one hidden frame per clip
        hide &= mask
        z = self.encode(x, mask, hide)
        ph, pw = self.enc_cfg["patch"]
        B, T, H, W = x.shape
        target = x.reshape(B, T, H // ph, ph, W // pw, pw).permute(0, 1, 2, 4, 3, 5).reshape(B, T, -1, ph * pw)
        err = ((self.recon(z) - target) ** 2).mean((-1, -2))  # (B, T)
        return err[hide].mean() if bool(hide.any()) else err.sum() * 0

    def _step(self, batch: dict, split: str) -> torch.Tensor:
        st = self.hparams.stage
        bs = batch["mask"].shape[0]
        if st == "pretrain":
            loss = self._mfm_loss(batch)
            self.log(f"{split}/mfm_loss", loss, batch_size=bs, prog_bar=True)
            return loss
        det = self._detection(batch)
        if split != "train":
            self._collect(det, batch)
        if st == "detect":
            loss = det["det_loss"]
        elif st == "align":
            loss = teacher_forced_loss(
                self.lm, self.builder, self._visual(det), batch["caption"], self.dec_cfg["max_answer_tokens"]
            )
            self.log(f"{split}/lm_loss", loss, batch_size=bs, prog_bar=True)
        else:
            lm_loss = teacher_forced_loss(
                self.lm, self.builder, self._visual(det), batch["target"], self.dec_cfg["max_answer_tokens"]
            )
            self.log(f"{split}/lm_loss", lm_loss, batch_size=bs, prog_bar=True)
            loss = lm_loss + self.hparams.det_weight * det["det_loss"]
        if "det_loss" in det:
            self.log(f"{split}/det_loss", det["det_loss"], batch_size=bs)
        self.log(f"{split}/loss", loss, batch_size=bs, prog_bar=True)
        return loss

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._step(batch, "val")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._step(batch, "test")

    def _collect(self, det: dict, batch: dict) -> None:
        self._val.setdefault("prob", []).append(torch.sigmoid(det["win_logit"]).detach().cpu())
        self._val.setdefault("label", []).append(batch["label"].cpu())

    def _log_metrics(self, split: str) -> None:
        if self._val.get("prob"):
            prob, label = torch.cat(self._val["prob"]), torch.cat(self._val["label"])
            if bool((label >= 0).all()):
                for k, v in classification_metrics(prob, label, float(self.threshold)).items():
                    self.log(f"{split}/{k}", v)
        self._val = {}

    def on_validation_epoch_end(self) -> None:
        self._log_metrics("val")

    def on_test_epoch_end(self) -> None:
        self._log_metrics("test")

    def configure_optimizers(self):
        params = [p for p in self.parameters() if p.requires_grad]
        total = self.trainer.estimated_stepping_batches if self._trainer is not None else None
        return build_optimizer(params, self.hparams.optimizer or {"name": "adamw", "lr": 1e-3}, total)

    def calibrate_threshold(self, datamodule: WatchLogDataModule) -> float:
        """Set :attr:`threshold` to the window probability that maximises F1 on the validation split (ours).

        The detection head trained for minutes ranks windows well but its probabilities are not calibrated, so the
        verdict threshold is chosen on validation recordings only (never on test). Returns the threshold.
        """
        datamodule.setup()
        ds = datamodule.splits["val"]
        if self.hparams.stage == "pretrain" or not len(ds) or any(w.label < 0 for w in ds.windows):
            return float(self.threshold)
        prob = torch.tensor([p["prob"] for p in self.predict_dataset(ds, explain=False)])
        best = best_f1_threshold(prob, torch.tensor([w.label for w in ds.windows]))
        self.threshold.fill_(best)
        return best

    def on_train_epoch_end(self) -> None:
        """Calibrate the verdict threshold on the validation split and fit the technique index on the training
        windows (before the epoch's checkpoint is written)."""
        dm = getattr(self.trainer, "datamodule", None)
        if isinstance(dm, WatchLogDataModule) and self.hparams.stage in ("sft", "detect"):
            was = self.training
            self.calibrate_threshold(dm)
            self.fit_technique_index(dm.splits["train"])
            self.train(was)

    def on_fit_end(self) -> None:
        """A fit with no optimiser step (``trainer.max_steps=0`` from ``init_from``) still calibrates and indexes."""
        if self.trainer.global_step == 0:
            self.on_train_epoch_end()

    @classmethod
    def sizes_from_state(cls, state: dict[str, Any]) -> dict[str, Any]:
        """``n_techniques`` from the saved index (0 rows when the weights have none)."""
        t = state.get("technique_prototypes")
        return {"n_techniques": int(t.shape[0])} if t is not None else {}

    def evaluate(self, datamodule: WatchLogDataModule) -> dict[str, float]:
        """Window detection metrics on the validation and test recordings (what ``zoo eval`` writes).

        Explanations are not generated here (see ``experiments explanations``), so this stays cheap.
        """
        datamodule.setup()
        out = {}
        for split in ("val", "test"):
            ds = datamodule.splits[split]
            if self.hparams.stage == "pretrain":
                out[f"{split}/mfm_loss"] = self._mfm_eval(ds)
                continue
            if not len(ds) or any(w.label < 0 for w in ds.windows):
                continue
            preds = self.predict_dataset(ds, explain=False)
            prob = torch.tensor([p["prob"] for p in preds])
            label = torch.tensor([w.label for w in ds.windows])
            out.update(
                {f"{split}/{k}": v for k, v in classification_metrics(prob, label, float(self.threshold)).items()}
            )
            out[f"{split}/windows"] = float(len(ds))
        out["threshold"] = float(self.threshold)
        return out

    @torch.no_grad()
    def _mfm_eval(self, ds: WindowDataset, batch_size: int = 64) -> float:
        """Mean masked-frame reconstruction error over ``ds`` with a fixed mask seed (stage-1 score)."""
        from torch.utils.data import DataLoader

        self.eval()
        gen_state = torch.random.get_rng_state()
        torch.manual_seed(0)
        total, n = 0.0, 0
        for batch in DataLoader(ds, batch_size=batch_size):
            total += float(self._mfm_loss(batch)) * len(batch["label"])
            n += len(batch["label"])
        torch.random.set_rng_state(gen_state)
        return total / max(1, n)


def _merge(defaults: dict, given: dict | None, where: str) -> dict:
    out = dict(defaults)
    for k, v in (given or {}).items():
        if k not in defaults:
            raise ValueError(f"{where}.{k}: unknown key; allowed: {', '.join(defaults)}")
        out[k] = v
    return out
