"""Every fit validates at its end, so a short fine-tune still logs ``val/*``, writes its metrics and its best
checkpoint (README: "a fit always validates at its end")."""
from __future__ import annotations

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
        last_epoch = trainer.max_epochs is not None and trainer.max_epochs > 0 and \
            trainer.current_epoch + 1 >= trainer.max_epochs and epoch_loop.batch_progress.is_last_batch
        if (last_step or last_epoch) and trainer.enable_validation:
            trainer.should_stop = True
