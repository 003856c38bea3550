"""Every fit validates at its end, so a short fine-tune still logs ``val/*``, writes its metrics and its best
checkpoint (README: "a fit always validates at its end"); a ``trainer.val_check_interval`` longer than an epoch is a
recipe error (:func:`fit`)."""

from __future__ import annotations

import logging

import lightning as L


class ValidateAtEnd(L.Callback):
    """On the fit's last training batch, ask Lightning to stop there, which makes it validate at that batch.

    Lightning runs validation on a batch when the trainer is asked to stop (``trainer.should_stop``, the early-stopping
    path of ``_should_check_val_fx``), so flagging the batch that reaches ``trainer.max_steps``, or the last batch
    of the last epoch, validates the final weights even when ``val_check_interval`` would not land on it. A fit
    without validation (no ``validation_step``, ``limit_val_batches=0``) is left alone.
    """

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        epoch_loop = trainer.fit_loop.epoch_loop
        last_step = trainer.max_steps is not None and 0 < trainer.max_steps <= trainer.global_step
        last_epoch = (
            trainer.max_epochs is not None
            and trainer.max_epochs > 0
            and trainer.current_epoch + 1 >= trainer.max_epochs
            and epoch_loop.batch_progress.is_last_batch
        )
        if (last_step or last_epoch) and trainer.enable_validation:
            trainer.should_stop = True


def fit(trainer: L.Trainer, module, datamodule, ckpt_path: str | None) -> None:
    """``trainer.fit``, saying first that the set-up before step 0 has begun (the first progress line ends it).

    Raises:
        RecipeError: ``trainer.val_check_interval`` is more batches than an epoch has (Lightning refuses it once the
            training data are loaded, with a ValueError).
    """
    from zoo.core.recipe import RecipeError

    logging.getLogger("zoo").info(
        "setting up the fit: %s's own set-up (frozen models, caches, data loaders)%s ...",
        type(module).__name__,
        f", then restoring {ckpt_path}" if ckpt_path else "",
    )
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
    except ValueError as e:
        if "`val_check_interval`" not in str(e) or "number of the training batches" not in str(e):
            raise
        raise RecipeError(
            f"trainer.val_check_interval: {trainer.val_check_interval} is more than the "
            f"{trainer.num_training_batches} training batches of an epoch: lower it, or set "
            "trainer.check_val_every_n_epoch: null to count batches across epochs"
        ) from None
