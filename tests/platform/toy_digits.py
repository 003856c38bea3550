"""A tiny plug-in method for the platform tests: an MLP classifier on scikit-learn's 8x8 digits.

Loaded through ``ZOO_PLUGINS=digits-mlp=toy_digits`` (the tests put this folder on ``sys.path``), which
is also how a user adds a method without editing zoo. The digits ship inside the scikit-learn wheel.
"""

from __future__ import annotations

import os
import signal

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from zoo.core.module import ZooModule
from zoo.core.optim import build_optimizer
from zoo.core.registry import register_method


class DigitsDataModule(L.LightningDataModule):
    """scikit-learn digits (1,797 images, 64 features scaled to [0, 1]); the first 80% train, the rest val.

    Args:
        batch_size: images per batch.
        num_classes: keep digits ``< num_classes`` (to exercise head adaptation).
        limit: use only the first ``limit`` images (None = all).
    """

    def __init__(self, batch_size: int = 32, num_classes: int = 10, limit: int | None = None):
        super().__init__()
        if not 2 <= num_classes <= 10:
            raise ValueError(f"data.num_classes: must be in [2, 10], got {num_classes}")
        self.batch_size, self.num_classes, self.limit = batch_size, num_classes, limit

    def setup(self, stage: str | None = None) -> None:
        from sklearn.datasets import load_digits

        x, y = load_digits(return_X_y=True)
        keep = y < self.num_classes
        x = torch.tensor(x[keep] / 16.0, dtype=torch.float32)[: self.limit]
        y = torch.tensor(y[keep])[: self.limit]
        cut = int(0.8 * len(y))
        self.train_set, self.val_set = TensorDataset(x[:cut], y[:cut]), TensorDataset(x[cut:], y[cut:])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size)


@register_method("digits-mlp", datamodule=DigitsDataModule)
class DigitsMLP(ZooModule):
    """Two-layer MLP: (B, 64) pixels -> (B, num_classes) logits."""

    head_keys = ("head.",)
    export_formats = ("package", "onnx", "torch_export")

    def __init__(self, hidden: int = 32, num_classes: int = 10, optimizer: dict | None = None, p_drop: float = 0.0):
        super().__init__()
        if hidden < 1:
            raise ValueError(f"model.hidden: must be >= 1, got {hidden}")
        self.save_hyperparameters()
        self.body = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(p_drop))
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))

    def training_step(self, batch, batch_idx):
        # the kill-and-resume test: the process kills itself (SIGKILL, no cleanup) on reaching this optimiser step
        if int(os.environ.get("ZOO_TEST_SIGKILL_AT_STEP", "-1")) == self.global_step:
            os.kill(os.getpid(), signal.SIGKILL)
        if int(os.environ.get("ZOO_TEST_FAIL_AT_STEP", "-1")) == self.global_step:
            raise RuntimeError(f"test failure at step {self.global_step}")
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train/loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val/loss", nn.functional.cross_entropy(logits, y))
        self.log("val/acc", (logits.argmax(-1) == y).float().mean())

    def configure_optimizers(self):
        return build_optimizer(self.parameters(), self.hparams.optimizer or {"name": "adamw", "lr": 1e-2})

    def example_input(self) -> tuple:
        return (torch.rand(2, 64),)

    def predict_cli(self, inputs, out_dir=None):
        x = torch.tensor([[float(v) for v in s.split(",")] for s in inputs])
        return "\n".join(str(int(c)) for c in self(x).argmax(-1))
