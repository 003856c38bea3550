"""Training loops of the experiment scripts: a fixed number of epochs (``fit``) or early stopping on ``val/ap`` in
resumable calls (``fit_until_converged``), on the recipe's module and datamodule, without the run-directory machinery
of ``train.py`` (the scripts keep their own checkpoints and tables); and the TGN baseline's loop (``run_tgn``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import lightning as L
import torch

from zoo.core.build import build_datamodule, build_module
from zoo.core.data import set_seed


def trainer(max_epochs: int) -> L.Trainer:
    """A one-CPU Lightning trainer for ``max_epochs`` epochs with no validation, logging, checkpoints or progress bar
    (the experiment scripts validate and checkpoint themselves)."""
    return L.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=max_epochs,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )


def fit(cfg: dict, seed: int):
    """Train the recipe's module on its datamodule; returns (module, datamodule, events/s)."""
    set_seed(seed)
    module, dm = build_module(cfg), build_datamodule(cfg)
    tr = trainer(int(cfg["trainer"]["max_epochs"]))
    dm.setup("fit")
    t0 = time.perf_counter()
    tr.fit(module, dm)
    speed = dm.train_idx.numel() * tr.current_epoch / (time.perf_counter() - t0)
    return module, dm, tr, speed


def fit_until_converged(cfg: dict, seed: int, run_dir: Path, patience: int, epochs_per_call: int):
    """Train with early stopping on ``val/ap`` (``patience`` epochs without a new best), up to the recipe's
    ``trainer.max_epochs``, at most ``epochs_per_call`` epochs per call: a long run is several calls of the same
    command, each resuming from ``run_dir/last.ckpt`` (the training order and per-batch draws depend on the seed, epoch
    and batch position only, :mod:`zoo.core.resumable`, so the calls draw what one uninterrupted run would).

    Returns:
        ``(module with the best-val/ap weights, datamodule, trainer, info)`` once the run has stopped (early, or at
        ``max_epochs``), else ``None`` (rerun to continue). ``info``: ``epochs`` trained, ``early_stopped``,
        ``best_epoch`` (1-based), ``best_val_ap``, ``train_seconds`` (all calls).
    """
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from zoo.core import resumable

    run_dir.mkdir(parents=True, exist_ok=True)
    progress_file, last = run_dir / "progress.json", run_dir / "last.ckpt"
    info = json.loads(progress_file.read_text()) if progress_file.is_file() else {"epochs": 0, "train_seconds": 0.0}
    total = int(cfg["trainer"]["max_epochs"])
    set_seed(seed)
    module, dm = build_module(cfg), build_datamodule(cfg)
    stop = EarlyStopping(monitor="val/ap", mode="max", patience=patience)
    best = ModelCheckpoint(dirpath=run_dir, monitor="val/ap", mode="max", save_top_k=1, save_last=True, filename="best")
    tr = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=total if info.get("stopped") else min(total, info["epochs"] + epochs_per_call),
        num_sanity_val_steps=0,
        logger=False,
        callbacks=[stop, best, resumable.StepSeededRng(seed)],
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    resumable.prepare_dataloaders(module, dm, seed)
    t0 = time.perf_counter()
    if not info.get("stopped"):
        tr.fit(module, dm, ckpt_path=str(last) if last.is_file() else None)
        info["train_seconds"] += time.perf_counter() - t0
        info["epochs"] = tr.current_epoch
        info["early_stopped"] = stop.stopped_epoch > 0
        info["stopped"] = info["early_stopped"] or tr.current_epoch >= total
        info["best_val_ap"] = float(best.best_model_score)
        info["best_path"] = best.best_model_path
        progress_file.write_text(json.dumps(info, indent=1))
    if not info["stopped"]:
        return None
    dm.setup("fit")
    if module.net is None:  # a run that had already stopped: build the network for the datamodule's graph
        module._build(dm.num_nodes, dm.edge_feat_dim)
    elif module.net.node_emb.num_embeddings != dm.num_nodes + 1:  # ... or resize init_from weights to it
        module._transfer_to(dm.num_nodes, dm.path)
    state = torch.load(info["best_path"], map_location="cpu", weights_only=False)
    module.load_state_dict(state["state_dict"])
    info["best_epoch"] = int(state["epoch"]) + 1
    return module, dm, tr, {k: v for k, v in info.items() if k != "best_path"}  # best_path: this machine's only


def run_tgn(cfg: dict, dm, seed: int, lr: float, patience: int = 0) -> dict:
    """Train PyG's TGN on ``dm``'s training events and evaluate it on the same test events as the other models: for
    the recipe's ``trainer.max_epochs`` epochs, or with ``patience`` up to that many with early stopping on
    validation AP (:func:`zoo.methods.st_tgexplainer.tgn.train_until_converged`, the best epoch's test metrics).

    Returns:
        ``test/*`` metrics, ``train_events_per_s`` (training passes only) and ``lr``; with ``patience`` also
        ``epochs``, ``best_epoch``, ``best_val_ap``, ``early_stopped``.
    """
    from zoo.methods.st_tgexplainer import tgn

    set_seed(seed)
    model = tgn.build_tgn(dm)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    epochs = int(cfg["trainer"]["max_epochs"])
    if patience:
        out, info = tgn.train_until_converged(model, dm, opt, g, patience, epochs)
        out |= {k: info[k] for k in ("epochs", "best_epoch", "best_val_ap", "early_stopped")}
        epochs, seconds = info["epochs"], info["train_seconds"]
    else:
        t0 = time.perf_counter()
        for _ in range(epochs):
            tgn.train_epoch(model, dm, opt, g)
        seconds = time.perf_counter() - t0
        out = tgn.evaluate(model, dm)
    out["train_events_per_s"] = dm.train_idx.numel() * epochs / seconds
    out["lr"] = lr
    return out


def fit_all(
    cfgs: dict[str, dict], seed: int, patience: int = 0, run_dir: Path | None = None, epochs_per_call: int = 10
):
    """Fit each named recipe: for its ``trainer.max_epochs`` (:func:`fit`), or with ``patience`` to convergence in
    ``run_dir/<name>`` (:func:`fit_until_converged`; every unfinished run advances ``epochs_per_call`` epochs per call).

    Returns:
        ``{name: (module, datamodule, trainer, info)}`` with ``info["train_events_per_s"]`` (and, converged, the
        ``fit_until_converged`` info), or None while a run still needs calls.
    """
    if not patience:
        out = {}
        for name, cfg in cfgs.items():
            module, dm, tr, speed = fit(cfg, seed)
            out[name] = (module, dm, tr, {"train_events_per_s": speed})
        return out
    out = {
        name: fit_until_converged(cfg, seed, run_dir / name, patience, epochs_per_call) for name, cfg in cfgs.items()
    }
    if any(v is None for v in out.values()):
        return None
    for _, dm, _, info in out.values():
        info["train_events_per_s"] = dm.train_idx.numel() * info["epochs"] / info["train_seconds"]
    return out
