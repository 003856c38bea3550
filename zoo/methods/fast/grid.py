"""One SAE of the FAST experiment grid: trained through the recipe and measured (:func:`train_one`), the GSNR
probe, and the setup notes kept beside a resume log. Used by :mod:`zoo.methods.fast.experiments` (the grid) and
:mod:`zoo.methods.fast.studies` (the peer, gap, model-size and steering studies)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import lightning as L
import torch

from zoo.methods.fast.metrics import delta_loss, eq7_mse, error_by_position, gsnr
from zoo.methods.fast.pipelines import truncated_lm

METRICS = [
    "log2_mse",
    "log2_mse_st",
    "log2_mse_st_after0",
    "delta_loss",
    "l0",
    "explained_variance",
    "dead",
    "dense",
    "gsnr",
    "high_quality",
    "seconds",
]


class Probe(L.Callback):
    """Keeps the fitted module and datamodule, and measures GSNR (*ours*) at ``points`` steps: per-minibatch SAE loss
    gradients over ``n_batches`` fixed minibatches of ``batch`` activations from the pipeline's own stream."""

    def __init__(self, points: int = 1, n_batches: int = 32, batch: int = 256, seed: int = 0):
        self.points, self.n_batches, self.batch, self.seed = points, n_batches, batch, seed
        self.curve: list[tuple[int, float]] = []

    def on_train_start(self, trainer, pl_module):
        self.module, self.datamodule = pl_module, trainer.datamodule
        sample = trainer.datamodule.sample(self.n_batches * self.batch, seed=10_000 + self.seed)
        self.batches = sample.split(self.batch)
        total = int(trainer.estimated_stepping_batches)
        self.at = {0, *[round(total * (i + 1) / self.points) - 1 for i in range(self.points)]}
        self.measure(pl_module, 0)

    def measure(self, module, step: int):
        grads = []
        for b in self.batches:
            module.sae.zero_grad()
            module.sae_loss(b, step).loss.backward()
            grads.append(torch.cat([p.grad.flatten() for p in module.sae.parameters()]))
        module.sae.zero_grad()
        self.curve.append((step, gsnr(torch.stack(grads))))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step - 1 in self.at and trainer.global_step > 1:
            self.measure(pl_module, trainer.global_step)


def padded(ids, size: int = 16):
    """``(input_ids, attention_mask)`` batches of ``size`` right-padded sequences."""
    out = []
    for start in range(0, len(ids), size):
        group = ids[start : start + size]
        batch = torch.zeros(len(group), max(map(len, group)), dtype=torch.long)
        mask = torch.zeros_like(batch)
        for i, s in enumerate(group):
            batch[i, : len(s)], mask[i, : len(s)] = torch.tensor(s), 1
        out.append((batch, mask))
    return out


def position_edges(max_length: int) -> list[int]:
    """Bins of token positions for the error-vs-position curve: 0, 1, 2, 4, ... up to ``max_length`` (the last bin
    ends at ``max_length + 1``; 256 gives :data:`POSITION_EDGES`)."""
    edges = [0, 1]
    while edges[-1] * 2 < max_length:
        edges.append(edges[-1] * 2)
    return [*edges, max_length + 1]


#: The model keys a setting of each SAE sets, and the row columns they are reported in.
SETTING_COLUMNS = {"l1_coefficient": "l1", "l0_coefficient": "l0_coef", "jumprelu_init_threshold": "threshold"}
SAE_SETTINGS = {"standard": ("l1_coefficient",), "jumprelu": ("l0_coefficient", "jumprelu_init_threshold")}


def recipe_overrides(args) -> list[str]:
    """The recipe and overlays every SAE of the experiment is trained from."""
    return [f"recipe={args.recipe}", *[f"overlay={o}" for o in args.overlay]]


def train_one(
    args, pipeline: str, sae: str, seed: int, layer: int, setting: dict, extra: tuple = ()
) -> tuple[dict, Probe]:
    """Train one SAE through the recipe (plus ``args.set`` and ``extra`` overrides) and measure it; returns its row
    and the probe (module, curves)."""
    from zoo.cli import compose_and_validate
    from zoo.core.training import train

    sizes = [
        f"data.{k}={v}"
        for k, v in (("harvest_tokens", args.harvest), ("training_tokens", args.tokens))
        if v is not None
    ]
    cfg = compose_and_validate(
        [
            *recipe_overrides(args),
            f"model.sae={sae}",
            f"model.layer={layer}",
            f"data.pipeline={pipeline}",
            f"seed={seed}",
            *sizes,
            *[f"model.{k}={v}" for k, v in setting.items()],
            f"out_dir={args.out_dir}",
            "export.formats=[]",
            "logger.kind=none",
            *args.set,
            *extra,
        ]
    )
    probe = Probe(seed=seed, n_batches=args.gsnr_batches)
    start = time.time()
    train(cfg, callbacks=[probe])
    seconds = time.time() - start
    module, dm = probe.module.eval(), probe.datamodule
    s = module.last_val
    model, tok = module.lm_and_tokenizer()
    val = dm.prepare_val()
    batches = padded(val["ids"][: args.delta_convs])
    base_key = (module.hparams.lm, layer, args.delta_convs)
    with torch.no_grad():
        if base_key not in args.base_ce:  # the LM's own loss, the same for every SAE on this LM and layer
            args.base_ce[base_key] = delta_loss(model, truncated_lm(model, layer), layer, batches, lambda x: x)[0]
        _, _, dl = delta_loss(
            model, truncated_lm(model, layer), layer, batches, module.forward, base_ce=args.base_ce[base_key]
        )
    edges = position_edges(int(cfg["data"]["max_length"]))
    row = {
        "pipeline": pipeline,
        "sae": sae,
        "layer": layer,
        "seed": seed,
        **{
            SETTING_COLUMNS[k]: (setting.get(k, cfg["model"][k]) if k in SAE_SETTINGS[sae] else None)
            for k in SETTING_COLUMNS
        },
        "log2_mse": s["log2_mse"],
        "log2_mse_st": s["log2_mse_st"],
        "log2_mse_st_after0": math.log2(
            eq7_mse(s["sq"], s["seq"], module.sae.cfg.d_in, s["template"] & (s["pos"] > 0))
        ),
        "delta_loss": dl,
        "l0": s["l0_mean"],
        "d_sae": module.sae.cfg.d_sae,
        "l0_fraction": s["l0_mean"] / module.sae.cfg.d_sae,
        "explained_variance": float(module.trainer.callback_metrics["val/explained_variance"]),
        "dead": s["dead"],
        "dense": s["dense"],
        "gsnr": probe.curve[-1][1],
        "harvested_tokens": dm.stats["harvested_tokens"],
        "passes": dm.stats["passes"],
        "seconds": seconds,
        "gsnr_curve": probe.curve,
        "position_edges": edges,
        "error_by_position": error_by_position(s["sq"], s["pos"], module.sae.cfg.d_in, edges),
        "log10_density": torch.log10(s["freq"].clamp_min(1e-6)).tolist() if seed == 0 else None,
        "setting": {k: setting.get(k, cfg["model"][k]) for k in SAE_SETTINGS[sae]},
    }
    if not args.context:
        args.context = describe_setup(cfg, module, dm, args)
    if args.quality:
        from zoo.methods.fast.quality import feature_quality, random_coherence

        if args.random_sets is None:
            args.random_sets = random_coherence(val["ids"], tok)
        q = feature_quality(module, val["ids"], val["acts"], tok, args.random_sets, seed=seed)
        row["high_quality"] = q["high_quality"]
    print(
        f"[fast-exp] {pipeline} {sae} layer {layer} seed {seed} {row['setting']}: "
        + ", ".join(f"{k} {row[k]:.4g}" for k in METRICS if isinstance(row.get(k), float)),
        flush=True,
    )
    return row, probe


def describe_setup(cfg: dict, module, dm, args) -> dict:
    """What the notes of a results file say about the LM, the data and the budgets (from the first trained SAE)."""
    model, tok = module.lm_and_tokenizer()
    val = dm.prepare_val()
    marked = sorted(
        {tok.decode([i]) for ids, m in zip(val["ids"], val["template"]) for i in torch.tensor(ids)[m].tolist()}
    )
    d = cfg["data"]
    return {
        "lm": cfg["model"]["lm"],
        "d": module.sae.cfg.d_in,
        "d_sae": module.sae.cfg.d_sae,
        "blocks": model.config.num_hidden_layers,
        "max_length": d["max_length"],
        "block_size": d["block_size"],
        "harvest": d["harvest_tokens"],
        "tokens": d["training_tokens"],
        "batch": d["batch_size"],
        "buffer": d["buffer_tokens"],
        "val": len(val["ids"]),
        "template": marked,
        "chat": d["path"],
        "pretrain": d.get("pretrain_path") or "zoo-lm's pre-training text (tinyshakespeare + Alpaca)",
        "boundary": d.get("document_boundary"),
        "shuffle_blocks": d.get("shuffle_blocks"),
        "lr": cfg["model"]["lr"],
        "lr_end": cfg["model"]["lr_end"],
        "clip": cfg["trainer"].get("gradient_clip_val"),
    }


def load_setup(args, log: Path) -> None:
    """What the notes say (:func:`describe_setup`), kept beside a resume log for a resumed run that trains nothing."""
    if args.context is None and log.with_suffix(".setup.json").is_file():
        args.context = json.loads(log.with_suffix(".setup.json").read_text())


def save_setup(args, log: Path) -> None:
    log.with_suffix(".setup.json").write_text(json.dumps(args.context))
