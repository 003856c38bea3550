"""One meaning of trainer.max_steps for every method: updates of the main optimiser, whatever the number of optimisers;
validation cadence (val_check_interval) in training batches."""

import csv
from pathlib import Path

import torch
from torch import nn
from toy_digits import DigitsDataModule, DigitsMLP

from zoo.cli import main
from zoo.core.registry import register_method

DIGITS = Path(__file__).parent / "recipes" / "digits.yaml"


@register_method("two-optimiser-digits", datamodule=DigitsDataModule)
class DigitsTwoOptimisers(DigitsMLP):
    """The digits MLP trained as a method with a second (adversary-like) optimiser does: manual optimisation, the
    head stepped by its own optimiser after the body's, both every batch."""

    batches_seen = 0

    def __init__(self, hidden: int = 32, num_classes: int = 10, optimizer: dict | None = None):
        super().__init__(hidden, num_classes, optimizer)
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        type(self).batches_seen += 1
        main_opt, extra_opt = self.optimizers()
        x, y = batch
        for opt in (extra_opt, main_opt):  # the extra optimiser first, as st-tgexplainer's discriminator
            opt.zero_grad()
            loss = nn.functional.cross_entropy(self(x), y)
            self.manual_backward(loss)
            opt.step()
        self.log("train/loss", loss)

    def configure_optimizers(self):
        return [torch.optim.SGD(self.body.parameters(), lr=0.1), torch.optim.SGD(self.head.parameters(), lr=0.1)]


def test_max_steps_counts_main_optimiser_updates_with_two_optimisers(tmp_path):
    recipe = tmp_path / "two.yaml"
    recipe.write_text(f"base: {DIGITS}\nmethod: two-optimiser-digits\nmodel: {{hidden: 8}}\n")
    DigitsTwoOptimisers.batches_seen = 0
    assert (
        main(
            [
                "train",
                f"recipe={recipe}",
                f"out_dir={tmp_path}",
                "trainer.max_steps=6",
                "trainer.max_epochs=-1",
                "trainer.val_check_interval=3",
                "checkpoint.monitor=null",
                "export.formats=[]",
            ]
        )
        == 0
    )
    assert DigitsTwoOptimisers.batches_seen == 6, "max_steps=6 did not train 6 batches"
    ckpt = torch.load(tmp_path / "two" / "version_0" / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 6
    with open(tmp_path / "two" / "version_0" / "logs" / "metrics.csv", newline="") as f:
        val_rows = [r for r in csv.DictReader(f) if r.get("val/acc")]
    assert len(val_rows) == 2, "val_check_interval=3 over 6 batches validates twice"
