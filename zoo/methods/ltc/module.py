"""``LTCModule``: pretrain a small CLIP (contrastive loss on image–caption pairs), then run LTC post hoc: exact
per-head decomposition, locate spurious (S) and salient (Y) heads on val, mean-ablate S and inject text directions
into Y on test, and score every baseline (WG, Avg, Gap). With ``backbone: ViT-B-16`` and a local ``pretrained`` file
the CLIP is OpenCLIP's and training is skipped (``trainer.max_epochs: 0``): only the post-hoc steps run.

At the end of training the pipeline runs on the datamodule's val/test splits, prints the table and writes
``<run_dir>/ltc/{rows.json, table.md, groups.png, head_map.png, top_images.png}``; S, Y, the test means of every
head and the injected directions are stored in the weights for ``zoo predict``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, ClassVar

import torch

from zoo.core.constraints import Keys, OneOf, PositiveInt
from zoo.core.data import DataError
from zoo.core.module import ZooModule
from zoo.core.optim import build_optimizer
from zoo.core.registry import register_method
from zoo.core.results import render_table
from zoo.methods.ltc import plots
from zoo.methods.ltc.datamodule import WaterbirdsDataModule, normalise
from zoo.methods.ltc.evaluation import decompose_set, located_summary, run_pipeline, text_state
from zoo.methods.ltc.locate import correct, logits
from zoo.methods.ltc.metrics import wg_avg_gap
from zoo.methods.ltc.prompts import PROMPT_SETS, caption_texts

TINY = {
    "embed_dim": 128,
    "image_size": 48,
    "patch_size": 8,
    "vision_layers": 6,
    "vision_width": 128,
    "vision_heads": 4,
    "text_layers": 2,
    "text_width": 128,
    "text_heads": 4,
}
TABLE = ["method", "wg", "avg", "gap"]
log = logging.getLogger("zoo")


@register_method("ltc", datamodule=WaterbirdsDataModule)
class LTCModule(ZooModule):
    """A CLIP and LTC's located heads.

    Args:
        backbone: ``tiny`` (our open_clip config :data:`TINY`, caption vocabulary) or an open_clip model name.
        pretrained: local weights file for a named backbone (no downloads here).
        clip: overrides of :data:`TINY` (tiny only).
        context_length: text tokens (tiny only; named backbones use their own).
        vocab_ids: the open_clip BPE ids of the caption vocabulary (tiny only). None: the shipped captions' words
            and those of ``prompts``; a fit then adds the words of the training captions (``data.path``'s) and of
            ``prompts`` in ``setup`` and stores the ids here, so the run's checkpoint and package rebuild the same
            vocabulary.
        prompts: key of :data:`~zoo.methods.ltc.prompts.PROMPT_SETS`.
        random_draws: draws of the random-head control.
        evaluate: run the pipeline at the end of training.
        eval_batch: batch size of the decomposition.
        optimizer: ``zoo.core.optim.build_optimizer`` dict.
    Raises:
        ValueError: an unknown prompt set; a named backbone without ``pretrained``.
    """

    fit_sized_buffers = ("spurious", "salient", "directions")
    weight_settings: ClassVar[dict[str, str]] = {"backbone": "model.backbone", "prompts": "model.prompts"}

    def __init__(
        self,
        backbone: str = "tiny",
        pretrained: str | None = None,
        clip: Annotated[dict | None, Keys(TINY, **dict.fromkeys(TINY, PositiveInt))] = None,
        context_length: PositiveInt = 16,
        prompts: Annotated[str, OneOf(PROMPT_SETS)] = "waterbirds-cifar",
        random_draws: PositiveInt = 20,
        evaluate: bool = True,
        eval_batch: PositiveInt = 256,
        optimizer: dict | None = None,
        vocab_ids: list[int] | None = None,
    ):
        super().__init__()
        if prompts not in PROMPT_SETS:
            raise ValueError(f"model.prompts: unknown {prompts!r}; one of {sorted(PROMPT_SETS)}")
        self.save_hyperparameters()
        if backbone == "tiny":
            from zoo.models.clip import CaptionVocab, build_clip

            self.vocab = (
                CaptionVocab(vocab_ids, context_length)
                if vocab_ids
                else CaptionVocab.from_texts(caption_texts() + PROMPT_SETS[prompts].all_prompts(), context_length)
            )
            self.clip = build_clip(len(self.vocab), context_length, **{**TINY, **(clip or {})})
        else:
            import open_clip

            if not pretrained:
                raise ValueError(f"model.pretrained: backbone {backbone!r} needs a local weights file")
            self.clip = open_clip.create_model(backbone, pretrained=pretrained)
            self.vocab = open_clip.get_tokenizer(backbone)
        v = self.clip.visual
        L, H, D = len(v.transformer.resblocks), v.transformer.resblocks[0].attn.num_heads, v.output_dim
        self.register_buffer("spurious", torch.zeros(0, 2, dtype=torch.long))
        self.register_buffer("salient", torch.zeros(0, 2, dtype=torch.long))
        self.register_buffer("directions", torch.zeros(0, D))
        self.register_buffer("head_means", torch.zeros(L, H, D))
        self.register_buffer("class_emb", torch.zeros(D, 2))
        self._loss, self._ran = None, False

    def tokenize(self, texts: list[str]) -> torch.Tensor:
        return self.vocab(texts)

    def encode_text(self, texts: list[str]) -> torch.Tensor:
        """Unnormalised text embeddings ``(n, D)``."""
        with torch.no_grad():
            return self.clip.encode_text(self.tokenize(texts).to(self.device)).float().cpu()

    def setup(self, stage: str) -> None:
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if dm is not None:
            dm.tokenize = self.tokenize
            if stage == "fit" and self.hparams.backbone == "tiny" and dm.train_set is not None:
                self._grow_vocabulary([c for c in dm.train_set.captions if c], "the training captions")
                self._grow_vocabulary(PROMPT_SETS[self.hparams.prompts].all_prompts(), "model.prompts")

    def _grow_vocabulary(self, texts: list[str], what: str) -> None:
        """Add the BPE tokens of ``texts`` (``what``: where they come from, for the log line) the vocabulary lacks:
        the token embedding gains a row per new token (normal, std 0.02, as open_clip initialises it), the known
        tokens keep theirs (``init_from`` weights included), and the ids go into ``hparams.vocab_ids``."""
        grown = self.vocab.with_texts(texts)
        if grown is self.vocab:
            return
        old, emb = self.vocab, self.clip.token_embedding
        weight = torch.empty(len(grown), emb.embedding_dim, device=emb.weight.device).normal_(std=0.02)
        for token, i in old.index.items():
            weight[grown.index[token]] = emb.weight.data[i]
        self.clip.token_embedding = torch.nn.Embedding.from_pretrained(weight, freeze=False)
        self.clip.vocab_size, self.vocab = len(grown), grown
        self.hparams["vocab_ids"] = list(grown.ids)
        log.info(
            "ltc: %s add %d token(s) to the caption vocabulary (%d -> %d)",
            what,
            len(grown) - len(old),
            len(old),
            len(grown),
        )

    # ---- pretraining -------------------------------------------------------------------------------------------
    def training_step(self, batch, batch_idx):
        from open_clip.loss import ClipLoss

        self._loss = self._loss or ClipLoss()
        x, tokens = batch
        img, txt, scale = self.clip(x, tokens)
        loss = self._loss(img, txt, scale)
        self.log("train/loss", loss, batch_size=len(x), prog_bar=True)
        return loss

    def configure_optimizers(self):
        """AdamW (or ``model.optimizer``) on the CLIP; none for a post-hoc run (``trainer.max_epochs: 0``: nothing is
        trained, so a schedule has no steps to span)."""
        if self._trainer is not None and self.trainer.max_epochs == 0:
            return None
        cfg = self.hparams.optimizer or {"name": "adamw", "lr": 5e-4}
        decays = cfg.get("schedule", "constant") != "constant"
        steps = self.trainer.estimated_stepping_batches if decays and self._trainer is not None else None
        return build_optimizer(self.clip.parameters(), cfg, total_steps=steps)

    # ---- the post-hoc pipeline -----------------------------------------------------------------------------------
    def on_train_epoch_end(self) -> None:
        """After the last epoch: ``trainer.max_epochs`` reached, or ``trainer.max_steps`` (``max_epochs=-1`` counts
        steps only). S, Y, the means and the directions reach ``last.ckpt`` (``zoo.core.resumable.LastCheckpoint``
        writes the module's state left by this hook into it)."""
        t = self.trainer
        if 0 < t.max_epochs <= t.current_epoch + 1 or 0 < t.max_steps <= t.global_step:
            self.on_train_end()

    def on_fit_start(self) -> None:
        """A post-hoc run (``trainer.max_epochs: 0``: a given CLIP, captions not needed) trains no epoch, and Lightning
        then reaches no train hook: the pipeline runs here."""
        if self.trainer.max_epochs == 0:
            self.on_train_end()

    def on_train_end(self) -> None:
        """Runs the pipeline once (from :meth:`on_fit_start` when no epoch runs)."""
        dm = getattr(self.trainer, "datamodule", None)
        if self.hparams.evaluate and dm is not None and not self._ran:
            self._ran = True
            out = self.artifact_dir("ltc")
            rows = self.run_ltc(dm, out)
            print(table_text(rows))

    @torch.no_grad()
    def run_ltc(self, dm: WaterbirdsDataModule, out: Path | None = None, seed: int = 0) -> list[dict]:
        """The pipeline on ``dm``'s splits; stores S, Y, means and directions; writes artifacts under ``out``.

        Returns:
            rows ``{method, wg, avg, gap, ...}`` (percent) followed by one ``{"method": "located", ...}`` row.
        """
        self.clip.eval()
        ts = text_state(self.encode_text, PROMPT_SETS[self.hparams.prompts])
        enc = lambda s: decompose_set(self.clip.visual, normalise(s.x).to(self.device), self.hparams.eval_batch)
        val, test = enc(dm.val_set), enc(dm.test_set)
        train_emb = torch.cat(
            [
                self.clip.encode_image(normalise(dm.train_set.x[i : i + 512]).to(self.device)).cpu()
                for i in range(0, len(dm.train_set), 512)
            ]
        )
        rows, state = run_pipeline(
            val,
            test,
            ts,
            dm.val_set.y,
            dm.val_set.group,
            dm.test_set.y,
            dm.test_set.group,
            train_emb,
            dm.train_set.y,
            dm.train_set.group,
            self.hparams.random_draws,
            seed,
        )
        loc = state["located"]
        self.spurious = torch.tensor(loc.spurious, dtype=torch.long).view(-1, 2).to(self.device)
        self.salient = torch.tensor(loc.salient, dtype=torch.long).view(-1, 2).to(self.device)
        self.directions = ts.U_accept.to(self.device)
        self.head_means.copy_(state["test_means"])
        self.class_emb.copy_(ts.T)
        rows.append(
            {
                "method": "located",
                **located_summary(loc),
                "full": located_summary(state["located_full"]),
                "textspan": [list(h) for h in state["textspan"]],
            }
        )
        if out is not None:
            self._artifacts(out, rows, dm, val, loc)
        return rows

    def _artifacts(self, out: Path, rows: list[dict], dm, val, loc) -> None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "rows.json").write_text(json.dumps(rows, indent=1))
        (out / "table.md").write_text(table_text(rows))
        plots.group_grid(out / "groups.png", dm.test_set.x, dm.test_set.group)
        plots.head_map(out / "head_map.png", loc.f_wrong, loc.f_right, loc.spurious, loc.salient)
        lens = torch.einsum("nlhd,dc->nlhc", val.heads, self.class_emb.cpu())
        gap = lens[..., 1] - lens[..., 0]  # head's vote for vehicle over animal
        scores = {
            f"{kind} ({l},{h}): {'vehicle' if s > 0 else 'animal'} vote": gap[:, l, h] * s
            for kind, heads in (("S", loc.spurious), ("Y", loc.salient))
            for (l, h) in heads
            for s in (1, -1)
        }
        plots.top_images(out / "top_images.png", dm.val_set.x, scores)

    @torch.no_grad()
    def evaluate(self, dm: WaterbirdsDataModule) -> dict[str, float]:
        """``zoo eval``: zero-shot and LTC WG / Avg / Gap (%) on ``dm``'s test split with the stored heads, means
        and directions (the pipeline's ``zero-shot`` and ``ltc`` rows when ``dm`` is the split it ran on).
        """
        dm.setup("test")
        self.clip.eval()
        test = decompose_set(self.clip.visual, normalise(dm.test_set.x).to(self.device), self.hparams.eval_batch)
        T = self.class_emb.cpu()
        S, Y = [tuple(h) for h in self.spurious.tolist()], [tuple(h) for h in self.salient.tolist()]
        corrected = correct(test.heads, S, Y, self.directions.cpu(), self.head_means.cpu())
        out = {}
        for name, lg in (("zero_shot", logits(test.heads, test.others, T)), ("ltc", logits(corrected, test.others, T))):
            out.update(
                {f"test/{name}_{k}": v for k, v in wg_avg_gap(lg.argmax(1), dm.test_set.y, dm.test_set.group).items()}
            )
        return out

    # ---- prediction ------------------------------------------------------------------------------------------------
    predict_schema: ClassVar = {
        "spurious_heads": [[int]],
        "salient_heads": [[int]],
        "rows": [
            {"image": str, "p_vehicle_zero_shot": float, "p_vehicle_ltc": float, "shares": {str: float}, "wrote": [str]}
        ],
    }

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> dict:
        """``zoo predict ltc.<tag> IMAGE ... [--out-dir D]``: per image the zero-shot and LTC probabilities of
        vehicle (y = 1) vs animal (y = 0) and each located head's share of the zero-shot logit gap (``shares``,
        keyed ``S(layer, head)`` for spurious and ``Y(layer, head)`` for salient heads); ``ltc_<image>.png`` into
        ``D``.

        Raises:
            DataError: no input, or an unreadable image (named).
        """
        from PIL import Image

        if not inputs:
            raise DataError("zoo predict ltc: give one or more image files")
        size = self.clip.visual.image_size[0] if isinstance(self.clip.visual.image_size, tuple) else 48
        S = [tuple(h) for h in self.spurious.tolist()]
        Y = [tuple(h) for h in self.salient.tolist()]
        rows = []
        self.clip.eval()
        scale = float(self.clip.logit_scale.exp())
        for path in inputs:
            try:
                with Image.open(path) as im:
                    raw = (
                        torch.tensor(
                            list(im.convert("RGB").resize((size, size), Image.BILINEAR).getdata()), dtype=torch.uint8
                        )
                        .view(size, size, 3)
                        .permute(2, 0, 1)[None]
                    )
            except (OSError, ValueError) as e:
                raise DataError(f"{path}: not a readable image ({e})") from None
            d = decompose_set(self.clip.visual, normalise(raw))
            T = self.class_emb.cpu()
            z = logits(d.heads, d.others, T)
            heads = correct(d.heads, S, Y, self.directions.cpu(), self.head_means.cpu())
            norm = lambda lg, e: torch.softmax(scale * lg / e.norm(dim=-1, keepdim=True), -1)[0, 1]
            p0 = float(norm(z, d.embedding()))
            p1 = float(norm(logits(heads, d.others, T), heads.sum((1, 2)) + d.others.sum(1)))
            lens = d.heads[0] @ T
            total = float(z[0, 1] - z[0, 0])
            shares = {
                f"{k}{h}": float(lens[h[0], h[1], 1] - lens[h[0], h[1], 0]) / total
                for k, hs in (("S", S), ("Y", Y))
                for h in hs
            }
            rows.append(
                {
                    "image": Path(path).name,
                    "p_vehicle_zero_shot": p0,
                    "p_vehicle_ltc": p1,
                    "shares": shares,
                    "wrote": [],
                }
            )
            if out_dir:
                png = plots.predict_panel(
                    Path(out_dir) / f"ltc_{Path(path).stem}.png",
                    raw[0],
                    shares,
                    f"p(vehicle): zero-shot {p0:.2f}, LTC {p1:.2f}",
                )
                rows[-1]["wrote"].append(str(png))
        return {"spurious_heads": [list(h) for h in S], "salient_heads": [list(h) for h in Y], "rows": rows}

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record` as TSV: ``image``, both probabilities, then one ``share_`` column per located head."""
        out = self.predict_record(inputs, out_dir)
        heads = [f"S{tuple(h)}" for h in out["spurious_heads"]] + [f"Y{tuple(h)}" for h in out["salient_heads"]]
        lines = ["image\tp_vehicle_zero_shot\tp_vehicle_ltc\t" + "\t".join(f"share_{h}" for h in heads)]
        for r in out["rows"]:
            lines.append(
                "\t".join(
                    [r["image"], f"{r['p_vehicle_zero_shot']:.3f}", f"{r['p_vehicle_ltc']:.3f}"]
                    + [f"{r['shares'][h]:+.3f}" for h in heads]
                )
            )
            lines += [f"# wrote {w}" for w in r["wrote"]]
        return "\n".join(lines)


def table_text(rows: list[dict]) -> str:
    """A markdown table of the method rows (WG, Avg, Gap in %, :func:`zoo.core.results.render_table`) and the located
    heads."""
    cells = [
        {"method": r["method"], "WG": f"{r['wg']:.1f}", "Avg": f"{r['avg']:.1f}", "Gap": f"{r['gap']:.1f}"}
        for r in rows
        if "wg" in r
    ]
    text = render_table(cells, ["method", "WG", "Avg", "Gap"])
    loc = [r for r in rows if r["method"] == "located"]
    if loc:
        text += f"\n\nlocated: S = {loc[0]['spurious']}, Y = {loc[0]['salient']}"
    return text + "\n"
