"""Stage C through the Lightning loop: accumulation equals one big batch; the ShaPO step leaves weights restored."""

import copy
import json

import lightning as L
import pytest
import torch

from zoo.data.preference import PreferenceDataModule
from zoo.methods.shapo.module import ShaPOModule


def _data(tmp_path, batch_size):
    rows = [
        {
            "prompt": f"\n\nHuman: question number {i}?\n\nAssistant:",
            "chosen": f"I can't help with {i}.",
            "rejected": f"Sure, here is how to do {i} and more",
        }
        for i in range(4)
    ]
    p = tmp_path / "pairs.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return PreferenceDataModule(
        path=str(p), val_path=str(p), batch_size=batch_size, shuffle=False, max_length=40, redteam_path=None
    )


def _fit(module, dm):
    tr = L.Trainer(
        accelerator="cpu",
        max_steps=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
    )
    tr.fit(module, datamodule=dm)
    return {k: v.detach().clone() for k, v in module.policy.state_dict().items()}


@pytest.mark.parametrize("variant", ["dpo", "token"])
def test_accumulation_equals_one_big_batch(tmp_path, variant):
    torch.manual_seed(0)
    base = ShaPOModule(
        arch="zoo-lm-tiny",
        variant=variant,
        shapo_every=1,
        perturbation="rho",
        rho=0.5,
        max_grad_norm=None,
        optimizer={"name": "sgd", "lr": 1.0},
        eval_generation=False,
    )
    base.neuron_masks[:, ::7] = True  # fixed masks: stage A is not what this test is about
    base.masks_ready.fill_(True)
    start = {k: v.clone() for k, v in base.policy.state_dict().items()}
    big, small = copy.deepcopy(base), copy.deepcopy(base)
    small.hparams.accumulate_grad_batches = 2
    w_big = _fit(big, _data(tmp_path, 4))
    w_small = _fit(small, _data(tmp_path, 2))
    moved = 0
    for k in w_big:
        assert torch.allclose(w_big[k], w_small[k], atol=1e-6, rtol=1e-5), k
        moved += int(not torch.equal(w_big[k], start[k]))
    assert moved > 0


def test_shapo_step_differs_from_dpo_and_restores_weights(tmp_path):
    torch.manual_seed(0)
    module = ShaPOModule(
        arch="zoo-lm-tiny",
        variant="token",
        shapo_every=1,
        perturbation="rho",
        rho=0.5,
        optimizer={"name": "sgd", "lr": 1.0},
        eval_generation=False,
    )
    module.neuron_masks[:, ::7] = True
    module.masks_ready.fill_(True)
    dm = _data(tmp_path, 4)
    dm.setup("fit")
    module.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    before = {k: v.clone() for k, v in module.policy.state_dict().items()}
    module.shapo_backward([batch], 1.0)
    sam = {n: p.grad.clone() for n, p in module.policy.named_parameters() if p.grad is not None}
    for k, v in module.policy.state_dict().items():
        assert torch.equal(v, before[k]), k  # the perturbation is undone bit for bit
    module.policy.zero_grad(set_to_none=True)
    loss, _ = module._loss(batch, "train")
    loss.backward()
    plain = {n: p.grad for n, p in module.policy.named_parameters() if p.grad is not None}
    assert any(not torch.allclose(sam[n], plain[n]) for n in plain)  # the gradient was taken elsewhere
