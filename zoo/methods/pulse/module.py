"""``PulseModule``: the r/ChatGPT study of Dai, Garcia, Pierson, Recht and Haghtalab (ICML 2026) as a LightningModule.

``stage=sae`` trains the top-K SAE on text embeddings (Adam, normalised MSE + auxiliary-K); at the end it names the
features and writes the SAE's own daily series (aggregates' schema) into ``<run>/pulse/``. ``stage=replay`` is an
analysis shell (no optimiser step, like praxis): one step fits the release-anchored trends, replays the PuLSE
alarms on the archives and writes ``trends.json``, ``alarms.json`` and the PNGs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import numpy as np
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
)
from zoo.core.data import DataError
from zoo.core.module import ZooModule
from zoo.core.optim import build_optimizer
from zoo.core.registry import register_method
from zoo.methods.pulse.datamodule import STAGES, PulseDataModule
from zoo.methods.pulse.naming import daily_series, name_features
from zoo.methods.pulse.plots import plot_trends, plot_wealth
from zoo.methods.pulse.replay import EMOTIONAL, alarm_rows, trend_rows
from zoo.methods.pulse.sae import TopKSAE

_REPLAY = {
    "features": EMOTIONAL,
    "search": "exact",
    "n_boot": 100,
    "eta": 0.01,
    "v_min": 0.05,
    "alpha": 0.1,
    "beta": 1.05,
    "monitor_feature": 57,
    "monitor_archive": "c2",
    "monitor_start": "2024-04-04",
    "r": [14, 28, 42],
    "n_monitored": [1, 3, 7],
    "end": "2025-11-30",
    "daily_subreddit": "ChatGPT",
}
#: The ``replay`` block: each key's allowed values.
ReplaySettings = Annotated[
    dict | None,
    Keys(
        _REPLAY,
        features=Annotated[list[NonNegativeInt], NonEmpty],
        search=Literal["exact", "greedy"],
        n_boot=NonNegativeInt,
        eta=Positive,
        v_min=Probability,
        alpha=OpenUnit,
        beta=Positive,
        monitor_feature=NonNegativeInt,
        r=Annotated[list[PositiveInt], NonEmpty],
        n_monitored=Annotated[list[PositiveInt], NonEmpty],
    ),
]


@register_method("pulse", datamodule=PulseDataModule)
class PulseModule(ZooModule):
    """Top-K SAE featuriser and PuLSE replay.

    Args:
        stage: ``sae`` | ``replay``.
        input_dim: embedding width (384 for MiniLM, 1536 for text-embedding-3-small); n_features: ``M``; k: ``K``;
        aux_k: dead features in the auxiliary loss (None = ``2K``); aux_coef: its weight; dead_steps: steps
        without activation after which a feature is dead.
        optimizer: :func:`zoo.core.optim.build_optimizer` dict (``sae``).
        replay: analysis settings (defaults in ``_REPLAY``): features, search (exact | greedy), n_boot, eta, v_min,
            alpha, beta, monitor_feature / monitor_archive / monitor_start, r (list), n_monitored (list), end,
            daily_subreddit (texts counted in the SAE's own daily series; None = all).
    Raises:
        ValueError: an unknown stage or replay key.
    """

    export_formats = ("package",)
    fit_sized_buffers = ("meta_json",)
    weight_settings: ClassVar[dict[str, str]] = {"input_dim": "model.input_dim"}

    def __init__(
        self,
        stage: Annotated[str, OneOf(STAGES)] = "replay",
        input_dim: PositiveInt = 384,
        n_features: PositiveInt = 128,
        k: PositiveInt = 4,
        aux_k: PositiveInt | None = None,
        aux_coef: NonNegative = 1 / 32,
        dead_steps: PositiveInt = 256,
        optimizer: dict | None = None,
        replay: ReplaySettings = None,
    ):
        super().__init__()
        if stage not in STAGES:
            raise ValueError(f"model.stage: {stage!r} is not one of {STAGES}")
        unknown = set(replay or {}) - set(_REPLAY)
        if unknown:
            raise ValueError(f"model.replay: unknown key(s) {sorted(unknown)}; known: {sorted(_REPLAY)}")
        self.save_hyperparameters()
        self.cfg = {**_REPLAY, **(replay or {})}
        self.sae = TopKSAE(input_dim, n_features, k, aux_k, dead_steps)
        self.register_buffer("meta_json", torch.zeros(0, dtype=torch.uint8))
        self.automatic_optimization = stage == "sae"
        self._done = False
        self._artifacts: dict[str, str] = {}

    @property
    def meta(self) -> dict:
        """Feature names and training summary stored with the weights."""
        return json.loads(bytes(self.meta_json.tolist()).decode()) if self.meta_json.numel() else {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Sparse activations ``(N, M)`` of embeddings ``x (N, input_dim)``."""
        return self.sae.encode(x)

    # ---- sae -------------------------------------------------------------------------------------------------
    def configure_optimizers(self):
        if self.hparams.stage == "replay":
            return None
        return build_optimizer(self.parameters(), self.hparams.optimizer or {"name": "adam", "lr": 5e-4})

    def on_fit_start(self) -> None:
        dm = self.trainer.datamodule
        if (
            self.hparams.stage == "sae"
            and not self.meta_json.numel()
            and self.init_from_ref is None
            and not self.resuming
        ):
            if dm.X.shape[1] != self.hparams.input_dim:
                raise DataError(f"embeddings have width {dm.X.shape[1]}, model.input_dim is {self.hparams.input_dim}")
            self.sae.init_from_data(dm.X, torch.Generator().manual_seed(int(torch.initial_seed()) % 2**31))

    def training_step(self, batch, batch_idx):
        if self.hparams.stage == "replay":
            if not self._done:
                self._replay()
            return None
        x, w = batch
        loss, parts = self.sae.loss(x, w, self.hparams.aux_coef, track=True)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(x))
        for key, value in parts.items():
            self.log(f"train/{key}", value, batch_size=len(x))
        return loss

    def on_after_backward(self) -> None:
        self.sae.project_decoder_grad()

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        if self.hparams.stage == "sae":
            self.sae.normalise_decoder()

    def validation_step(self, batch, batch_idx):
        x, w = batch
        loss, parts = self.sae.loss(x, w, self.hparams.aux_coef)
        self.log("val/nmse", parts["nmse"], batch_size=len(x))
        self.log("val/loss", loss, batch_size=len(x))

    def on_train_end(self) -> None:
        out = self.artifact_dir("pulse")
        if self.hparams.stage == "sae":
            self._artifacts = self._describe(self.trainer.datamodule, out)
            for cb in self.trainer.checkpoint_callbacks:  # they saved before the names existed: save again
                for path in {cb.last_model_path, cb.best_model_path} - {""}:
                    self.trainer.save_checkpoint(path)

    @torch.no_grad()
    def _describe(self, dm: PulseDataModule, out: Path) -> dict[str, str]:
        """Names (c-TF-IDF + nearest paper label) into ``meta_json``; the SAE's own daily series (aggregates' schema)."""
        out.mkdir(parents=True, exist_ok=True)
        X = dm.X.to(self.device)
        recon, acts, _ = self.sae(X)
        acts, err = acts.cpu().numpy(), ((recon - X).pow(2).sum(1) / (X - X.mean(0)).pow(2).sum(1).mean()).cpu().numpy()
        files = {}
        if dm.texts:
            label_emb = labels = paper = None
            if dm.series_path and Path(dm.series_path).is_file() and str(dm.series_path).endswith(".json"):
                from zoo.methods.pulse.series import read_series
                from zoo.models.text_embedding import embed_texts

                paper = read_series(dm.series_path)
                labels = paper.labels
                label_emb = embed_texts(labels).numpy() if self.hparams.input_dim == 384 else None
            names = name_features(acts, [t["text"] for t in dm.texts], dm.X.numpy(), label_emb, labels)
            for n in names:  # the paper feature's own index, not its position in the file
                n["nearest_idx"] = paper.idx[n["nearest_idx"]] if n["nearest_idx"] is not None else None
            sub = self.cfg["daily_subreddit"]
            keep = [i for i, t in enumerate(dm.texts) if not sub or t["subreddit"] == sub]
            if keep:
                series = daily_series([dm.texts[i]["date"] for i in keep], acts[keep], err[keep], names)
                files["sae_series.json"] = out / "sae_series.json"
                files["sae_series.json"].write_text(json.dumps(series))
        else:
            names = [
                {"feature": m, "n_active": int((acts[:, m] > 0).sum()), "keywords": []} for m in range(acts.shape[1])
            ]
        files["feature_names.json"] = out / "feature_names.json"
        files["feature_names.json"].write_text(json.dumps(names, indent=1))
        meta = {"names": names, "n_texts": len(X), "alive": int((acts > 0).any(0).sum())}
        self.meta_json = torch.tensor(list(json.dumps(meta).encode()), dtype=torch.uint8)
        return {k: str(v) for k, v in files.items()}

    def package_extras(self) -> dict[str, str]:
        return dict(self._artifacts)

    # ---- replay ----------------------------------------------------------------------------------------------
    def _replay(self) -> None:
        dm, c = self.trainer.datamodule, self.cfg
        out = self.artifact_dir("pulse")
        out.mkdir(parents=True, exist_ok=True)
        feats = [f for f in c["features"] if f in dm.series.idx]
        rows, fits = trend_rows(
            dm.series, feats, Path(dm.series_path).stem, c["search"], c["n_boot"], eta=c["eta"], v_min=c["v_min"]
        )
        (out / "trends.json").write_text(json.dumps(rows, indent=1))
        plot_trends(dm.series, fits, str(out / "trends.png"))
        files = {"trends.json": out / "trends.json", "trends.png": out / "trends.png"}
        for f in fits:
            self.log(f"train/ratio_{f}", fits[f].ratio, batch_size=1)
            self.log(f"train/n_changepoints_{f}", float(len(fits[f].changepoints)), batch_size=1)
        if dm.archives:
            alarms, wealth = alarm_rows(
                dm.archives,
                c["monitor_feature"],
                c["monitor_archive"],
                c["monitor_start"],
                tuple(c["r"]),
                tuple(c["n_monitored"]),
                c["alpha"],
                c["beta"],
                c["end"],
            )
            (out / "alarms.json").write_text(json.dumps(alarms, indent=1))
            plot_wealth(wealth, str(out / "wealth.png"))
            files.update({"alarms.json": out / "alarms.json", "wealth.png": out / "wealth.png"})
            for a in alarms:
                if a["test"] == "feature" and a["n_monitored"] == 1:
                    day = a["alarm_date"]
                    days = float((np.datetime64(day) - np.datetime64(a["start"])).astype(int)) if day else -1.0
                    self.log(f"train/alarm_day_r{a['r']}", days, batch_size=1)
        self._artifacts = {k: str(v) for k, v in files.items()}
        self._done = True

    # ---- inference -------------------------------------------------------------------------------------------
    predict_schema: ClassVar = {
        "text": str,
        "k": int,
        "features": [{"feature": int, "activation": float, "keywords": [str], "nearest_label": (str, None)}],
    }

    @torch.no_grad()
    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> dict:
        """``zoo predict pulse.<tag> "title" ["body"] --json``: the post's active top-k features, each with its
        activation, keywords and nearest paper label; ``out_dir`` as :meth:`predict_cli`.

        Raises:
            DataError: no text given, or a model that was never trained (no names).
        """
        if not inputs:
            raise DataError('zoo predict pulse: give a post as "title" ["body"]')
        if self.hparams.input_dim != 384:
            raise DataError(f"this SAE reads {self.hparams.input_dim}-d embeddings; predict embeds with MiniLM (384)")
        from zoo.models.text_embedding import embed_texts

        text = "\n".join(inputs[:2]).strip()
        acts = self(embed_texts([text]).to(self.device))[0].cpu().numpy()
        names = self.meta.get("names", [])
        features = []
        for m in np.argsort(-acts)[: self.hparams.k]:
            if acts[m] <= 0:
                continue
            n = names[m] if m < len(names) else {}
            features.append(
                {
                    "feature": int(m),
                    "activation": float(acts[m]),
                    "keywords": list(n.get("keywords") or []),
                    "nearest_label": n.get("nearest_label"),
                }
            )
        out = {"text": text, "k": int(self.hparams.k), "features": features}
        if out_dir:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            (Path(out_dir) / "features.tsv").write_text(_features_text(out) + "\n")
        return out

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """``zoo predict pulse.<tag> "title" ["body"]``: the active features of one post and their names (the records
        of :meth:`predict_record`, one line each); with ``out_dir`` also ``D/features.tsv``."""
        return _features_text(self.predict_record(inputs, out_dir))


def _features_text(prediction: dict) -> str:
    """``PulseModule.predict_record``'s records as the lines ``zoo predict`` prints."""
    lines = [f"# top-{prediction['k']} SAE features of: {prediction['text'][:80]!r}"]
    lines += [
        f"feature {f['feature']}\tactivation {f['activation']:.3f}\tkeywords: {', '.join(f['keywords'])}"
        f"\tnearest paper label: {f['nearest_label']}"
        for f in prediction["features"]
    ]
    return "\n".join(lines)
