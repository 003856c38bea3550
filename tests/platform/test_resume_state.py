"""What a resumed fit gets back besides the weights the optimiser trained (#40), on tiny Lightning fits: the draws
made while a batch is read (``ResumableSampler`` seeds them by batch position), state a module fits after the
checkpoint of its step (``LastCheckpoint`` writes it in), and ``ZooModule.resuming`` at ``on_fit_start``. The
registry-driven end-to-end check is test_resume_every_method.py (slow)."""

import lightning as L
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from zoo.core import resumable, resumable_data
from zoo.core.module import ZooModule


class Noisy(Dataset):
    """Items drawn from the global torch RNG when read (as a random placement or a fresh background is)."""

    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.rand(()) + i


def _read(skip: int) -> list[torch.Tensor]:
    sampler = resumable_data.ResumableSampler(Noisy(), 1, 0, True, 7, lambda: 1, skip=skip, batch_size=3)
    return list(DataLoader(Noisy(), batch_size=3, sampler=sampler))


def test_what_reading_a_batch_draws_does_not_depend_on_the_process_history():
    straight = _read(0)
    torch.manual_seed(123)  # a resumed process's RNG is wherever its own set-up left it
    resumed = _read(6)  # the checkpoint had trained on the first two batches
    assert len(straight) == 4 and len(resumed) == 2
    for a, b in zip(straight[2:], resumed):
        assert torch.equal(a, b)
    assert len({round(float(x) % 1, 6) for b in straight for x in b}) == 12  # twelve distinct draws


def test_weighted_draws_are_per_epoch_and_epoch_0_is_the_samplers_own():
    weights = torch.tensor([0.1, 0.5, 0.2, 0.2], dtype=torch.double)
    own = list(torch.utils.data.WeightedRandomSampler(weights, 8, generator=torch.Generator().manual_seed(3)))

    def epoch_draws(epoch, skip=0):
        return list(resumable_data.ResumableWeightedSampler(weights, 8, True, range(4), 1, 0, 3, lambda: epoch, skip))

    assert epoch_draws(0) == own
    assert epoch_draws(1) != own and epoch_draws(1) == epoch_draws(1)
    assert epoch_draws(1, skip=4) == epoch_draws(1)[4:]
    halves = [
        list(resumable_data.ResumableWeightedSampler(weights, 7, True, range(4), 2, r, 3, lambda: 0)) for r in (0, 1)
    ]
    assert len(halves[0]) == len(halves[1]) == 4  # 7 draws padded to 8, as DistributedSampler pads


class GlobalPoisson:
    """A batch sampler that draws each batch's members from the global RNG when asked (as Opacus' does)."""

    def __len__(self) -> int:
        return 5

    def __iter__(self):
        for _ in range(5):
            yield (torch.rand(10) < 0.5).nonzero().flatten().tolist()


def test_a_batch_sampler_of_its_own_draws_batch_k_the_same_after_a_resume():
    straight = list(resumable_data.SeededBatches(GlobalPoisson(), 7, lambda: 2, 0))
    torch.manual_seed(99)
    resumed = list(resumable_data.SeededBatches(GlobalPoisson(), 7, lambda: 2, 0, skip=3))
    assert resumed == straight[3:] and len({tuple(b) for b in straight}) > 1


class Fits(ZooModule):
    """One weight trained by SGD and halved after each batch (as pulse renormalises its decoder); ``calibrated``
    counts epoch ends and ``fitted`` copies the weight when the fit ends (as watchlog's threshold and LTC's directions
    are set): each in a module hook, which Lightning calls after the callbacks' (``LastCheckpoint`` saved by then)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1))
        self.register_buffer("calibrated", torch.zeros((), dtype=torch.long))
        self.register_buffer("fitted", torch.zeros(1))
        self.resuming_at_fit_start = None

    def training_step(self, batch, batch_idx):
        return ((self.w - batch) ** 2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return DataLoader(torch.arange(8.0), batch_size=4)  # two batches an epoch

    def on_fit_start(self) -> None:
        self.resuming_at_fit_start = self.resuming

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        with torch.no_grad():
            self.w.mul_(0.5)

    def on_train_epoch_end(self) -> None:
        self.calibrated.add_(1)

    def on_train_end(self) -> None:
        self.fitted.copy_(self.w.detach())


class ReadsLast(L.Callback):
    """Records ``calibrated`` as ``last.ckpt`` holds it at each batch start, and whether its ``w`` is the module's (it
    runs after ``LastCheckpoint``)."""

    def __init__(self, path):
        self.path, self.seen, self.same_w = path, [], []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.path.is_file():
            state = torch.load(self.path, weights_only=True)["state_dict"]
            self.seen.append(int(state["calibrated"]))
            self.same_w.append(torch.equal(state["w"], pl_module.w.detach()))


def _fit(module, tmp_path, ckpt_path=None, every_n_steps=None, **limits):
    last = resumable.LastCheckpoint(tmp_path, every_n_steps=every_n_steps, every_n_minutes=None)
    probe = ReadsLast(last.path)
    trainer = L.Trainer(
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[last, probe],
        default_root_dir=str(tmp_path),
        **limits,
    )
    trainer.fit(module, ckpt_path=ckpt_path)
    return torch.load(last.path, weights_only=True), probe


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_last_checkpoint_holds_what_the_module_fitted_after_it_was_written(tmp_path):
    module = Fits()
    ckpt, probe = _fit(module, tmp_path, every_n_steps=1, max_epochs=2)  # saved after every step
    assert probe.same_w == [True, True, True]  # each step's checkpoint has the weight as the batch-end hook left it
    assert probe.seen == [0, 1, 1]  # the epoch-0 checkpoint has what the module's epoch-end hook set
    assert int(ckpt["state_dict"]["calibrated"]) == 2
    assert torch.equal(ckpt["state_dict"]["fitted"], module.w.detach())
    assert ckpt["global_step"] == 4 and module.resuming_at_fit_start is False


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_step_cut_fit_keeps_its_mid_epoch_loop_state_and_gets_the_fitted_state(tmp_path):
    module = Fits()
    ckpt, _ = _fit(module, tmp_path, max_steps=1)  # written at the batch that reached max_steps, mid-epoch
    assert torch.equal(ckpt["state_dict"]["fitted"], module.w.detach())
    assert ckpt["loops"]["fit_loop"]["epoch_progress"]["current"]["completed"] == 0
    again = Fits()
    ckpt, _ = _fit(again, tmp_path, ckpt_path=str(tmp_path / "last.ckpt"), max_steps=2)
    assert again.resuming_at_fit_start is True and ckpt["global_step"] == 2
