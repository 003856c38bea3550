"""Recipe -> LightningModule, LightningDataModule, Trainer; and the train / evaluate / load flows on top."""

from __future__ import annotations

import json
import logging
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch

from zoo.core import hub, phases, plots, resumable, run
from zoo.core.bases import BASES
from zoo.core.data import DataError, set_seed
from zoo.core.final_validation import ValidateAtEnd, fit
from zoo.core.preflight import check_run, with_recipe_key
from zoo.core.progress import ProgressBar, ProgressLines, previous_metrics, quiet_lightning_noise, summary
from zoo.core.recipe import anchor_shipped_paths, apply_overrides_checked, load_recipe, validate
from zoo.core.registry import constructor_kwargs, get_method
from zoo.core.resume import announce, finished, nothing_trained, own_settings

log = logging.getLogger("zoo")


def _construct(cls, kwargs: dict, block: str):
    """``cls(**kwargs)``; a ValueError/TypeError from the constructor becomes a RecipeError naming ``block``."""
    from zoo.core.recipe import RecipeError

    try:
        return cls(**kwargs)
    except DataError as e:  # bad data read at construction: name the recipe key to change
        raise with_recipe_key(e, kwargs if block == "data" else {}) from None
    except (ValueError, TypeError) as e:
        msg = str(e)
        raise RecipeError(msg if msg.startswith((block + ".", block + ":")) else f"{block}: {msg}") from e


def _get(cfg: dict, path: str):
    for part in path.split("."):
        if not isinstance(cfg, dict):
            return None
        cfg = cfg.get(part)
    return cfg


def _set(cfg: dict, path: str, value) -> None:
    *parents, last = path.split(".")
    for part in parents:
        cfg = cfg.setdefault(part, {}) if isinstance(cfg.get(part), dict) or part not in cfg else cfg[part]
        if not isinstance(cfg, dict):
            return
    cfg[last] = value


def _norm(v):
    return [_norm(x) for x in v] if isinstance(v, (list, tuple)) else v


def reconcile_settings(cfg: dict, src_cfg: dict, src_method: str, ref: str) -> list[str]:
    """Bring the settings the weights depend on (``weight_settings`` of both methods, matched by name) into ``cfg``.

    A recipe value of ``None`` adopts the package's; any other difference fails. ``cfg`` is updated in place (so the
    run's config.yaml records what was adopted).

    Returns:
        One log line per adopted setting.

    Raises:
        RecipeError: settings that differ, each named with the recipe's and the package's value.
    """
    from zoo.core.recipe import RecipeError
    from zoo.core.registry import RegistryError

    if not src_cfg or not src_method or src_method == "hf":
        return []
    mine = get_method(cfg["method"]).module_cls.weight_settings
    try:
        theirs = get_method(src_method).module_cls.weight_settings
    except RegistryError:  # a package of a method this install does not have: nothing to compare
        return []
    adopted, clashes = [], []
    for name, path in mine.items():
        if name not in theirs:
            continue
        want, have = _get(src_cfg, theirs[name]), _get(cfg, path)
        if want is None:
            continue
        if have is None:
            _set(cfg, path, want)
            adopted.append(f"{path} = {want!r} (from {ref})")
        elif _norm(have) != _norm(want):
            clashes.append(f"{path}: recipe {have!r}, {ref} ({theirs[name]}) {want!r}")
    if clashes:
        raise RecipeError(
            f"init_from {ref}: the weights were trained with other settings (model and data keys they "
            "depend on); set these as the package has them, or leave them unset (null) to adopt the "
            "package's:\n  " + "\n  ".join(clashes)
        )
    return adopted


def size_from_source(cfg: dict, state: dict, src_cfg: dict, src_method: str) -> list[str]:
    """Fill the data-derived sizes a method declares (the keys of its ``sizes_from_state``) that the recipe leaves
    ``None`` from the source's saved hparams, else from its tensor shapes, when the source is the same method: the
    networks are then built in ``__init__``, before the weights arrive.

    Returns:
        One log line per filled argument.
    """
    if src_method != cfg["method"]:
        return []
    cls = get_method(cfg["method"]).module_cls
    saved = src_cfg.get("model") or {}
    model = cfg.setdefault("model", {})
    lines = []
    for k, from_shapes in cls.sizes_from_state(state).items():
        v = saved.get(k) if saved.get(k) is not None else from_shapes
        if model.get(k) is None and v is not None:
            model[k] = v
            lines.append(f"model.{k} = {v!r}")
    return lines


def build_module(cfg: dict):
    """Construct the method's LightningModule from ``cfg["model"]`` and apply ``init_from`` (weights only).

    With ``init_from``, the source's saved hparams size the networks first (:func:`size_from_source`), its
    data-side settings are reconciled with the recipe's (:func:`reconcile_settings`), and the weights are loaded
    under the loading contract (:func:`zoo.core.hub.adapt_and_load`: missing, unexpected or reshaped keys are
    refused except declared head keys, which are re-initialised and logged). ``cfg`` is updated in place with
    what was adopted.
    """
    entry = get_method(cfg["method"])
    ref = str(cfg["init_from"]) if cfg.get("init_from") else None
    if ref:
        with phases.phase(f"loading init_from {ref} (checking sha256, reading the weights)"):
            state, source, src_cfg = hub.load_source(ref)
        for line in size_from_source(cfg, state, src_cfg, source) + reconcile_settings(cfg, src_cfg, source, ref):
            log.warning("init_from %s: adopted %s", ref, line)
    module = _construct(entry.module_cls, cfg.get("model") or {}, "model")
    if ref:
        report = hub.adapt_and_load(module, state, source, where=f"init_from {ref}", source_cfg=src_cfg)
        fresh = sorted(set(report["missing"]) | set(report["reshaped"]))
        if fresh:  # declared head keys (anything else was refused): expected, so not a warning
            log.info("init_from %s: re-initialised head keys %s", ref, fresh)
        if report["unexpected"]:
            log.info("init_from %s: dropped head keys the model does not have %s", ref, sorted(report["unexpected"]))
        module.init_from_ref = ref
    return module


def build_datamodule(cfg: dict):
    """Construct the method's LightningDataModule from ``cfg["data"]`` (None when the method has none)."""
    entry = get_method(cfg["method"])
    return _construct(entry.datamodule_cls, cfg.get("data") or {}, "data") if entry.datamodule_cls else None


def build_trainer(
    cfg: dict, run_dir: Path, extra_callbacks: list | tuple = (), resume_step: int | None = None
) -> L.Trainer:
    """A Trainer with zoo's checkpointing and logger: ``last.ckpt`` every ``checkpoint.every_n_train_steps`` steps
    and ``checkpoint.every_n_minutes`` minutes (written atomically, :mod:`zoo.core.resumable`), best-k checkpoints
    when ``checkpoint.monitor`` is set (no other: Lightning's default ModelCheckpoint is off), and per-batch RNG seeding
    so a resumed run draws what an uninterrupted one would; the logger continues the run's logs from ``resume_step``
    (:mod:`zoo.core.logs`)."""
    from zoo.core.logs import build_logger
    from zoo.core.parallel import register_strategies

    register_strategies()  # trainer.strategy: fsdp2
    ck = cfg.get("checkpoint") or {}
    callbacks = [
        resumable.LastCheckpoint(
            run_dir / "checkpoints",
            ck.get("every_n_train_steps", resumable.DEFAULT_EVERY_N_TRAIN_STEPS),
            ck.get("every_n_minutes", resumable.DEFAULT_EVERY_N_MINUTES),
            ck.get("every_n_epochs") or 1,
        ),
        resumable.StepSeededRng(int(cfg.get("seed", 0))),
        resumable.MainOptimizerSteps(),
    ]
    if ck.get("monitor"):
        callbacks.append(
            resumable.AtomicModelCheckpoint(
                dirpath=str(run_dir / "checkpoints"),
                monitor=ck["monitor"],
                mode=ck.get("mode", "min"),
                save_top_k=ck.get("save_top_k", 1),
                filename="best-{epoch:03d}-{step:07d}",
                auto_insert_metric_name=False,
            )
        )
    callbacks += [ValidateAtEnd(), resumable.RunStatus()]  # status.json: running, finished, killed, failed
    tr = dict(cfg.get("trainer") or {})
    if not ck.get("monitor"):  # else Lightning adds its own ModelCheckpoint, writing under logs/
        tr["enable_checkpointing"] = False
    if tr.get("strategy") == "ddp":
        from zoo.core.parallel import ZooDDPStrategy

        tr["strategy"] = ZooDDPStrategy()
    if tr.get("enable_progress_bar", True) and sys.stdout.isatty():
        callbacks.append(ProgressBar())
    else:  # a log file or a cluster job: timed progress lines instead of a bar
        tr.setdefault("enable_progress_bar", False)
        callbacks.append(ProgressLines(every_s=float((cfg.get("logger") or {}).get("progress_every_s", 30.0))))
    tr.setdefault("enable_model_summary", False)
    return L.Trainer(
        **tr,
        default_root_dir=str(run_dir),
        callbacks=callbacks + list(extra_callbacks),
        logger=build_logger(cfg, run_dir, resume_step),
    )


def _plain(metrics: dict) -> dict[str, float]:
    vals = {k: v.item() if isinstance(v, torch.Tensor) and v.numel() == 1 else v for k, v in metrics.items()}
    return {
        k: float(v)
        for k, v in vals.items()
        if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v))
    }


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
        metrics = {**(previous_metrics(run_dir) if resume_ckpt else {}), **_plain(trainer.callback_metrics)}
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


def load_module(ref: str, which: str = "best", overrides: list[str] | tuple = ()) -> tuple[Any, dict]:
    """A trained LightningModule and its resolved recipe from a zoo id, a package folder or a run directory: the path
    of ``zoo.load``, ``zoo eval``, ``zoo predict``, ``zoo export`` and ``zoo release``. Networks are sized from the
    saved hparams (and ``sizes_from_state``) before the weights arrive; the weights must then fit exactly
    (:func:`zoo.core.hub.load_exact`: no missing, unexpected or reshaped key, head keys included).

    A pretrained base id (``smollm2-135m-instruct``, :mod:`zoo.core.bases`) is the module its registry recipe builds
    (``recipes/zoo-lm-smollm2-chat.yaml``: the base itself, untrained adapters that change nothing), so ``zoo predict`` and
    ``zoo eval`` measure the base as released.

    ``overrides`` are ``train.py``'s ``k=v`` / ``+k=v`` / ``~k`` tokens applied to the saved recipe before the module
    is built (``data.path=my.jsonl``, ``model.generation.temperature=0``), checked like a recipe's keys.

    Raises:
        hub.HubError / run.RunError: nothing loadable at ``ref``.
    """
    import yaml

    p = Path(ref)
    if ref in BASES and not p.exists():
        cfg = load_recipe(BASES[ref].recipe, list(overrides))
        validate(cfg)
        return build_module(cfg).eval(), cfg
    if p.is_dir() and (p / "checkpoints").is_dir():
        cfg = yaml.safe_load((p / "config.yaml").read_text())
        ckpt = hub.read_ckpt(run.find_checkpoint(p, which))
        state = ckpt["state_dict"]
        # hparams as the module saved them: a method may fill data-derived sizes (vocabulary, node count) in setup
        cfg["model"] = dict(ckpt.get("hyper_parameters") or cfg.get("model") or {})
    else:
        cfg, state = hub.load_package(ref)
    anchor_shipped_paths(cfg)  # a run trained in the project root reads its shipped data from any directory
    if overrides:
        apply_overrides_checked(cfg, overrides)
    entry = get_method(cfg["method"])
    kwargs = constructor_kwargs(entry.module_cls, cfg.get("model") or {})
    for k, v in entry.module_cls.sizes_from_state(hub.clean_state_dict(state)).items():
        if kwargs.get(k) is None:
            kwargs[k] = v
    module = _construct(entry.module_cls, kwargs, "model")
    hub.load_exact(module, state, where=str(ref))
    module.eval()
    return module, cfg


def evaluate(module, cfg: dict, overrides_data: dict | None = None) -> dict[str, float]:
    """Metrics of a trained module on its recipe's data: ``module.evaluate(datamodule)`` where it returns metrics
    (:meth:`zoo.core.module.ZooModule.evaluate`; the default returns ``None``), else ``trainer.validate`` (and
    ``trainer.test`` given a ``test_step``)."""
    quiet_lightning_noise()
    data_cfg = dict(cfg.get("data") or {}, **(overrides_data or {}))
    datamodule = build_datamodule(dict(cfg, data=data_cfg))
    if (own := module.evaluate(datamodule)) is not None:
        return _plain(own)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    metrics: dict = {}
    if type(module).validation_step is not L.LightningModule.validation_step:
        for m in trainer.validate(module, datamodule=datamodule, verbose=False):
            metrics.update(m)
    if type(module).test_step is not L.LightningModule.test_step:
        for m in trainer.test(module, datamodule=datamodule, verbose=False):
            metrics.update(m)
    return _plain(metrics)
