"""The train flow (``train.py``, ``zoo train``): open the run directory, build the module, datamodule and trainer
(:mod:`zoo.core.build`), fit (resuming a killed run), then write ``metrics.json``, the recipe's exports and the
curves."""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from zoo.core import hub, plots, resumable, run
from zoo.core.build import build_datamodule, build_module, build_trainer, size_from_source
from zoo.core.data import set_seed
from zoo.core.evaluation import plain_metrics
from zoo.core.final_validation import fit
from zoo.core.preflight import check_run
from zoo.core.progress import previous_metrics, quiet_lightning_noise, summary
from zoo.core.registry import constructor_kwargs, get_method
from zoo.core.resume import announce, finished, nothing_trained, own_settings

log = logging.getLogger("zoo")


def train(cfg: dict, callbacks: list | tuple = ()) -> Path:
    """Train a validated recipe: open the run dir, build everything, fit, then write metrics and exports.

    Args:
        cfg: a recipe from ``load_recipe`` that passed ``validate``.
        callbacks: extra Lightning callbacks (for Python users and benchmarks; recipes cannot name classes).

    Returns:
        The run directory.
    """
    quiet_lightning_noise()
    if cfg.get("threads"):  # before the model is built (recipe key, default 1 in _defaults.yaml; null: torch's own)
        torch.set_num_threads(int(cfg["threads"]))
    set_seed(int(cfg.get("seed", 0)))
    module = build_module(cfg)  # bad values fail here, before a run directory exists
    datamodule = build_datamodule(cfg)
    check_run(cfg, module, datamodule)  # bad data and refused trainer settings fail here too, named
    run_dir, resume_ckpt = run.open_run_dir(cfg)
    if cfg.get("resume") and not resume_ckpt and not run.is_child_rank():
        log.info(
            "resume=auto: no run of %s under %s to resume: starting fresh in %s", cfg["name"], run_dir.parent, run_dir
        )
    if not run.is_child_rank():
        changed = run.write_config(run_dir, cfg, resuming=bool(resume_ckpt))
        for line in changed:
            log.warning("resume: recipe differs from the saved config.yaml at %s", line)
    try:
        resume_step = None
        if resume_ckpt:
            module, ckpt = _check_resume(cfg, module, resume_ckpt)
            start = announce(cfg, resume_ckpt, ckpt)
            done = finished(cfg, run_dir, start)  # says so; the fit still restores it (and exports below)
            resume_step = start[2]
        with run.pinned_run_dir(run_dir):
            trainer = _trainer_or_recipe_error(cfg, run_dir, callbacks, resume_step)
            resumable.prepare_dataloaders(module, datamodule, int(cfg.get("seed", 0)))
            started = time.perf_counter()
            fit(trainer, module, datamodule, resume_ckpt)
            seconds = time.perf_counter() - started
            if resume_ckpt and not done and trainer.global_step == start[0] and not trainer.interrupted:
                nothing_trained(trainer, run_dir)
            if (trainer.global_step == 0 or trainer.fast_dev_run) and not trainer.interrupted:
                # no optimiser step (an enumeration, a closed-form estimator) or a fast_dev_run (Lightning saves none)
                # still leaves a checkpoint for zoo export/eval (weights_only=False: also save loop state)
                trainer.save_checkpoint(str(run_dir / "checkpoints" / "last.ckpt"), weights_only=False)
    except BaseException:
        # a fresh run that failed before writing any checkpoint leaves nothing worth keeping (nor for resume=auto)
        if not resume_ckpt and not run.is_child_rank() and not any((run_dir / "checkpoints").glob("*.ckpt")):
            shutil.rmtree(run_dir, ignore_errors=True)
            if run_dir.parent.is_dir() and not any(run_dir.parent.iterdir()):
                run_dir.parent.rmdir()  # nor an empty runs/<name>/
        raise
    from zoo.core.parallel import unsharded_copy

    module = unsharded_copy(module, trainer)  # fsdp2: gathered from the shards (a collective); else unchanged
    if trainer.is_global_zero:
        metrics = {**(previous_metrics(run_dir) if resume_ckpt else {}), **plain_metrics(trainer.callback_metrics)}
        metrics["global_step"] = float(trainer.global_step)
        best = run.find_checkpoint(run_dir).name != "last.ckpt"  # what `zoo eval RUN` will load
        doc = {
            "run": str(run_dir),
            "source": "end of training (last logged values; `zoo eval` re-measures "
            + ("the best checkpoint)" if best else "last.ckpt: the run has no best checkpoint)"),
            "metrics": metrics,
        }
        (run_dir / "metrics.json").write_text(json.dumps(doc, indent=2))
        formats = (cfg.get("export") or {}).get("formats") or []
        if formats:
            from zoo.core.export import export_module

            export_module(module, cfg, formats, run_dir / "export")
        log.info("%s", summary(run_dir, trainer, metrics, seconds, list(formats), plots.write_curves(run_dir)))
    return run_dir


def _trainer_or_recipe_error(cfg: dict, run_dir: Path, callbacks, resume_step):
    """:func:`build_trainer`; Lightning's refusal of a trainer setting becomes a RecipeError naming ``trainer``."""
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    from zoo.core.recipe import RecipeError

    try:
        return build_trainer(cfg, run_dir, callbacks, resume_step)
    except (MisconfigurationException, ValueError) as e:
        raise RecipeError(f"trainer: {e}") from None


def _check_resume(cfg: dict, module, ckpt_path: str) -> tuple[Any, dict]:
    """``resume``: size the module from the checkpoint's hparams (those the run set itself, :func:`resume.own_settings`;
    rebuilding it when they differ from the recipe), then hold its weights to the loading contract, no head keys
    excused, before Lightning restores them. Raises hub.HubError: missing, unexpected or reshaped keys, a table."""
    ckpt, model = hub.read_ckpt(ckpt_path), cfg.setdefault("model", {})
    state, saved = hub.clean_state_dict(ckpt["state_dict"]), ckpt.get("hyper_parameters") or {}
    own = own_settings(model, constructor_kwargs(get_method(cfg["method"]).module_cls, saved), ckpt_path)
    if size_from_source(cfg, state, {"model": saved}, cfg["method"]) or own:
        module = build_module(dict(cfg, model={**model, **own}, init_from=None))
    hub.check_fit(module, state, (), where=f"resume {ckpt_path}")
    return module, ckpt
