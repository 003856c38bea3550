"""Construction: recipe -> LightningModule (with ``init_from`` weights), LightningDataModule, Trainer.

The flows on top live beside it: :mod:`zoo.core.training` (``train.py``, ``zoo train``), :mod:`zoo.core.loading` (a
trained module from an id, package or run), :mod:`zoo.core.evaluation` (``zoo eval``'s metrics) and
:mod:`zoo.core.release` (``zoo release``)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import lightning as L

from zoo.core import hub, phases, resumable
from zoo.core.data import DataError
from zoo.core.final_validation import ValidateAtEnd
from zoo.core.preflight import with_recipe_key
from zoo.core.progress import ProgressBar, ProgressLines
from zoo.core.registry import get_method

log = logging.getLogger("zoo")


def construct(cls, kwargs: dict, block: str):
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
    with phases.phase(
        f"building {entry.module_cls.__name__} (model: its networks; a pretrained base's weights load here)"
    ):
        module = construct(entry.module_cls, cfg.get("model") or {}, "model")
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
    return construct(entry.datamodule_cls, cfg.get("data") or {}, "data") if entry.datamodule_cls else None


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
