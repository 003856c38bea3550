"""What a resumed run says: where it continues, that ``init_from`` yields to the checkpoint, or that a finished run
has nothing to train and how to extend it (:func:`finished`, :func:`nothing_trained`); the checkpoint itself is
checked by ``zoo.core.training._check_resume``."""

from __future__ import annotations

import logging
from pathlib import Path

from zoo.core import run
from zoo.core.logs import resume_step

log = logging.getLogger("zoo")


def announce(cfg: dict, ckpt_path: str, ckpt: dict) -> tuple[int, int, int]:
    """Log where the run continues (and that ``init_from`` is superseded by the checkpoint's weights).

    Returns:
        ``(global_step, epoch, log_step)`` of the checkpoint; ``log_step`` is the logging step it ends at (where the
        logs continue, :func:`zoo.core.logs.resume_step`).
    """
    start = (int(ckpt.get("global_step", 0)), int(ckpt.get("epoch", 0)), resume_step(ckpt))
    if not run.is_child_rank():
        log.info("resuming %s at step %d (epoch %d) from %s", Path(ckpt_path).parent.parent, *start[:2], ckpt_path)
        if cfg.get("init_from"):
            log.info("resume: init_from=%s ignored: the weights come from the checkpoint", cfg["init_from"])
    return start


def finished(cfg: dict, run_dir: Path, start: tuple[int, int, int]) -> bool:
    """True (and says how to extend it) when the resumed run already reached ``trainer.max_steps``; the fit then
    restores the checkpoint and takes no step."""
    max_steps = (cfg.get("trainer") or {}).get("max_steps")
    if max_steps is None or max_steps < 0 or start[0] < max_steps:
        return False
    if not run.is_child_rank():
        log.warning(
            "resume: %s already finished at step %d (trainer.max_steps=%d): nothing to train; to train it "
            "further raise trainer.max_steps (and trainer.max_epochs when the recipe sets it)",
            run_dir,
            start[0],
            max_steps,
        )
    return True


def nothing_trained(trainer, run_dir: Path) -> None:
    """Say that a resumed fit that had not reached ``trainer.max_steps`` stopped at once: its ``max_epochs`` were done
    (with ``max_steps`` set, Lightning counts an epoch that ``max_steps`` cut short as finished)."""
    if run.is_child_rank():
        return
    cut = " (an epoch that max_steps cut short counts as finished)" if (trainer.max_steps or -1) > 0 else ""
    log.warning(
        "resume: nothing trained: %s stopped at once at step %d, epoch %d: its trainer.max_epochs=%s "
        "epoch(s) were done%s; to train further raise trainer.max_epochs",
        run_dir,
        trainer.global_step,
        trainer.current_epoch,
        trainer.max_epochs,
        cut,
    )


def own_settings(model: dict, saved: dict, ckpt_path: str) -> dict:
    """The model arguments a resumed run takes from its checkpoint's ``saved`` hparams instead of the recipe's
    ``model``: those the module set itself during the run (sizes filled in ``setup`` from the data, such as cond-dp's
    ``in_features`` or saliency-bias's ``in_channels``), i.e. where the recipe still says what the run's saved
    ``config.yaml`` says but the hparams differ. A value changed for this resume is kept (and must fit the weights)."""
    import yaml

    config = Path(ckpt_path).parent.parent / "config.yaml"
    first = ((yaml.safe_load(config.read_text()) or {}).get("model") or {}) if config.is_file() else {}
    return {k: v for k, v in saved.items() if model.get(k) == first.get(k) != v}
