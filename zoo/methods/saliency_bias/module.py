"""``SaliencyBiasModule``: trains a family of small classifiers on corner-shift canvases, then benchmarks their
saliency maps for centre bias (corner-shift benchmark, CSI, randomisation tests, path counts; see the card).

One optimiser trains every member at once on the same batches (their losses are summed; the members share no
parameters, so each follows its own AdamW trajectory). At the end of training the benchmark runs on the
datamodule's ``eval_set`` and ``random_set`` and writes ``<run_dir>/saliency_bias/``: ``table.md`` and ``rows.json``
(state × method rows per member), ``path_counts.json`` (VGG members) and ``grid_<member>.png`` (maps of one object
at the five positions, trained and randomised).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Annotated, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from zoo.core.constraints import NonEmpty, NonNegative, NonNegativeInt, OneOf, PositiveInt, Range
from zoo.core.data import DataError
from zoo.core.module import ZooModule
from zoo.core.optim import build_optimizer
from zoo.core.prediction import tsv
from zoo.core.registry import register_method
from zoo.core.results import render_table
from zoo.methods.saliency_bias.canvas import CORNERS, POSITIONS, corner_shift_set
from zoo.methods.saliency_bias.datamodule import CornerShiftDataModule
from zoo.methods.saliency_bias.evaluation import benchmark_model, path_count_comparison
from zoo.methods.saliency_bias.metrics import csi_centroid, csi_distance_corrected, object_mass, pointing_game
from zoo.methods.saliency_bias.plots import plot_grid
from zoo.methods.saliency_bias.saliency import METHODS, saliency_maps
from zoo.models.vision import build_vision_model

DEFAULT_FAMILY = [
    {"name": "vgg-zeros-d4", "arch": "vgg", "depth": 4, "padding_mode": "zeros"},
    {"name": "vgg-circular-d4", "arch": "vgg", "depth": 4, "padding_mode": "circular"},
    {"name": "vit", "arch": "vit"},
    {"name": "mlp", "arch": "mlp"},
]
TABLE_COLUMNS = [
    "model",
    "state",
    "method",
    "accuracy",
    "csi_centroid",
    "csi_distance",
    "mass_corner",
    "mass_centre",
    "pointing_corner",
    "pointing_centre",
    "spearman_vs_trained",
    "ssim_vs_trained",
]


def build_member(spec: dict, in_channels: int, num_classes: int, img_size: int, seed: int | None = None) -> nn.Module:
    """A family member from its spec ``{name, arch, **kwargs of zoo.models.vision.build_vision_model}``; with ``seed``
    its initialisation is drawn from that seed without touching the global RNG."""
    kwargs = {k: v for k, v in spec.items() if k not in ("name", "arch")}
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        return build_vision_model(spec["arch"], in_channels, num_classes, img_size, **kwargs)


@register_method("saliency-bias", datamodule=CornerShiftDataModule)
class SaliencyBiasModule(ZooModule):
    """A family of image classifiers and the corner-shift saliency benchmark.

    Args:
        family: member specs ``[{name, arch: vgg|resnet|vit|mlp, ...arch kwargs}]`` (default :data:`DEFAULT_FAMILY`).
        in_channels, num_classes, img_size: input channels, classes, canvas side (taken from the data in ``setup``).
        factor: canvas side / object side (``zoo predict`` pastes an image at this scale).
        methods: saliency methods of the benchmark (default all of :data:`saliency.METHODS`).
        ig_steps, sg_samples, sg_sd: Integrated Gradients steps; SmoothGrad samples and noise sd (normalised units).
        benchmark: run the benchmark at the end of training.
        random_seed: seed of the freshly initialised (fully randomised) models.
        optimizer: ``zoo.core.optim.build_optimizer`` dict (default AdamW, lr 1e-3).
    Raises:
        ValueError: duplicate or missing member names, an unknown method.
    """

    export_formats = ("package",)

    def __init__(
        self,
        family: Annotated[list[dict], NonEmpty] | None = None,
        in_channels: PositiveInt = 3,
        num_classes: Annotated[int, Range(2)] = 10,
        img_size: PositiveInt = 64,
        factor: PositiveInt = 2,
        methods: Annotated[list[Annotated[str, OneOf(METHODS)]], NonEmpty] | None = None,
        ig_steps: PositiveInt = 16,
        sg_samples: PositiveInt = 8,
        sg_sd: NonNegative = 0.5,
        benchmark: bool = True,
        random_seed: NonNegativeInt = 1000,
        optimizer: dict | None = None,
    ):
        super().__init__()
        family = [dict(m) for m in (family or DEFAULT_FAMILY)]
        names = [m.get("name") for m in family]
        if None in names or len(set(names)) != len(names):
            raise ValueError(f"model.family: every member needs a unique name, got {names}")
        unknown = sorted(set(methods or []) - set(METHODS))
        if unknown:
            raise ValueError(f"model.methods: unknown {unknown}; choose from {list(METHODS)}")
        self.save_hyperparameters()
        self._build()

    def _build(self) -> None:
        hp = self.hparams
        self.models = nn.ModuleDict(
            {
                m["name"].replace(".", "_"): build_member(m, hp.in_channels, hp.num_classes, hp.img_size)
                for m in hp.family
            }
        )
        self.register_buffer("norm_mean", torch.zeros(hp.in_channels))
        self.register_buffer("norm_std", torch.ones(hp.in_channels))

    def setup(self, stage: str) -> None:
        """Take channels, classes and canvas size from the datamodule (rebuilding the members when they differ)."""
        dm = getattr(self.trainer, "datamodule", None)
        if dm is None:
            return
        dm.setup(stage)
        hp = self.hparams
        sizes = (dm.in_channels, dm.num_classes, dm.img_size, dm.factor)
        if sizes != (hp.in_channels, hp.num_classes, hp.img_size, hp.factor):
            hp.in_channels, hp.num_classes, hp.img_size, hp.factor = sizes
            self._build()
        self.norm_mean.copy_(dm.mean)
        self.norm_std.copy_(dm.std)

    # ---- training ---------------------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of every member, ``(B, C, H, W) -> (M, B, num_classes)``."""
        return torch.stack([m(x) for m in self.models.values()])

    def _step(self, batch, split: str) -> torch.Tensor:
        x, y = batch
        losses = []
        for name, m in self.models.items():
            logits = m(x)
            losses.append(F.cross_entropy(logits, y))
            self.log(f"{split}/acc_{name}", (logits.argmax(1) == y).float().mean(), batch_size=len(y))
        loss = torch.stack(losses).sum()
        self.log(f"{split}/loss", loss / len(losses), batch_size=len(y), prog_bar=True)
        return loss

    def training_step(self, batch, batch_idx):
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx):
        self._step(batch, "val")

    def configure_optimizers(self):
        # a warm-up or cosine schedule needs the run's length (recipes/paper/ sets cosine; it failed at step 0)
        steps = self.trainer.estimated_stepping_batches if self._trainer is not None else None
        return build_optimizer(
            self.parameters(), self.hparams.optimizer or {"name": "adamw", "lr": 1e-3}, total_steps=steps
        )

    # ---- benchmark --------------------------------------------------------------------------------------------
    def on_train_end(self) -> None:
        if self.hparams.benchmark and getattr(self.trainer, "datamodule", None) is not None:
            out = Path(self.trainer.default_root_dir) / "saliency_bias"
            self.run_benchmark(self.trainer.datamodule, out)

    def run_benchmark(self, dm: CornerShiftDataModule, out: Path | None = None, obj: int = 0) -> tuple[list, list]:
        """The corner-shift benchmark of every member; writes the table, JSON and PNG grids when ``out`` is set.

        Returns:
            ``(rows, path_rows)``: state × method rows with a ``model`` column, and per VGG member its path-count
            comparison (:func:`evaluate.path_count_comparison`).
        """
        hp = self.hparams
        options = {"ig_steps": hp.ig_steps, "sg_samples": hp.sg_samples, "sg_sd": hp.sg_sd}
        rows, path_rows = [], []
        for i, spec in enumerate(hp.family):
            model = copy.deepcopy(self.models[spec["name"].replace(".", "_")]).cpu()  # the benchmark runs on CPU
            fresh = build_member(spec, hp.in_channels, hp.num_classes, hp.img_size, seed=hp.random_seed + i)
            member_rows, maps = benchmark_model(
                model, fresh, dm.eval_set, dm.random_set, hp.methods or METHODS, **options
            )
            rows += [{"model": spec["name"], **r} for r in member_rows]
            if spec["arch"] == "vgg":
                path_rows.append(
                    {"model": spec["name"], **path_count_comparison(fresh, maps[("random_random_input", "gradient")])}
                )
            if out is not None:
                grid = {f"{s}/{m}": v for (s, m), v in maps.items() if s in ("trained", "random")}
                plot_grid(
                    out / f"grid_{spec['name']}.png",
                    dm.eval_set,
                    grid,
                    obj,
                    title=f"{spec['name']}: object {obj} (class {dm.classes[int(dm.eval_set.y[obj * 5])]})",
                )
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            (out / "rows.json").write_text(json.dumps(rows, indent=1))
            (out / "path_counts.json").write_text(json.dumps(path_rows, indent=1))
            text = "# Corner-shift benchmark (one seed)\n\n" + render_table(rows, TABLE_COLUMNS) + "\n"
            if path_rows:
                text += "\n## Path counts vs measured random-init saliency\n\n" + render_table(
                    path_rows, ["model", "pearson", "ratio_theory", "ratio_measured"]
                )
            (out / "table.md").write_text(text)
        return rows, path_rows

    # ---- prediction -------------------------------------------------------------------------------------------
    predict_schema: ClassVar = {
        "rows": [
            {
                "image": str,
                "model": str,
                "predicted": int,
                "csi_centroid": float,
                "csi_distance": float,
                "mass_corner": float,
                "pointing_corner": float,
                "mass_centre": float,
            }
        ],
        "wrote": [str],
    }

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> dict:
        """``zoo predict saliency-bias.<tag> IMAGE ... [--out-dir D]``: paste each image into the four corners and
        the centre of a mean canvas and compute every member's Gradient map for its predicted class; per image and
        member the CSI (both forms, corners), object mass and pointing game; ``saliency_<image>.png`` into ``D``.

        Raises:
            DataError: no input, or an unreadable image (named).
        """
        from PIL import Image

        if not inputs:
            raise DataError("zoo predict saliency-bias: give one or more image files")
        hp = self.hparams
        side = hp.img_size // hp.factor
        rows, wrote = [], []
        for path in inputs:
            try:
                with Image.open(path) as im:
                    im = im.convert("RGB" if hp.in_channels == 3 else "L").resize((side, side), Image.BILINEAR)
                    x = torch.tensor(list(im.getdata()), dtype=torch.float32).view(side, side, -1) / 255.0
            except (OSError, ValueError) as e:
                raise DataError(f"{path}: not a readable image ({e})") from None
            x = ((x.permute(2, 0, 1) - self.norm_mean.view(-1, 1, 1)) / self.norm_std.view(-1, 1, 1))[None]
            data = corner_shift_set(x, torch.zeros(1, dtype=torch.long), "mean", hp.factor)
            corner = data.position < len(CORNERS)
            grid = {}
            for spec in hp.family:
                model = self.models[spec["name"].replace(".", "_")].eval()
                with torch.no_grad():
                    target = model(data.x).argmax(1)
                s = saliency_maps(model, data.x, target, "gradient")
                grid[spec["name"]] = s
                cls = int(target[POSITIONS.index("centre")])
                rows.append(
                    {
                        "image": Path(path).name,
                        "model": spec["name"],
                        "predicted": cls,
                        **{
                            k: float(v)
                            for k, v in (
                                ("csi_centroid", csi_centroid(s[corner], data.boxes[corner]).mean()),
                                ("csi_distance", csi_distance_corrected(s[corner], data.boxes[corner]).mean()),
                                ("mass_corner", object_mass(s[corner], data.boxes[corner]).mean()),
                                ("pointing_corner", pointing_game(s[corner], data.boxes[corner]).double().mean()),
                                ("mass_centre", object_mass(s[~corner], data.boxes[~corner]).mean()),
                            )
                        },
                    }
                )
            if out_dir:
                wrote.append(
                    str(
                        plot_grid(
                            Path(out_dir) / f"saliency_{Path(path).stem}.png",
                            data,
                            grid,
                            0,
                            title=f"{Path(path).name}: Gradient maps",
                        )
                    )
                )
        return {"rows": rows, "wrote": wrote}

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record` as TSV, one row per image and member, then the PNGs written."""
        out = self.predict_record(inputs, out_dir)
        return "\n".join([tsv(out["rows"], digits=3), *(f"# wrote {w}" for w in out["wrote"])])
