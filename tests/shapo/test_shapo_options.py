"""Options: LoRA (reference = adapters off, ShaPO perturbs the frozen base columns) and precomputed reference log-probs."""

import json

import lightning as L
import torch

from zoo.data.preference import PreferenceDataModule
from zoo.methods.shapo.module import ShaPOModule


def _dm(tmp_path, **kw):
    rows = [
        {"prompt": f"\n\nHuman: q {i}?\n\nAssistant:", "chosen": f"no {i}", "rejected": f"yes {i} sure"}
        for i in range(4)
    ]
    p = tmp_path / "pairs.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return PreferenceDataModule(
        path=str(p), val_path=str(p), batch_size=2, shuffle=False, max_length=32, redteam_path=None, **kw
    )


def test_lora_shapo_step_trains_only_adapters(tmp_path):
    torch.manual_seed(0)
    m = ShaPOModule(
        arch="zoo-lm-tiny",
        variant="token",
        shapo_every=1,
        perturbation="rho",
        rho=0.5,
        lora={"r": 2, "alpha": 4},
        eval_generation=False,
        optimizer={"name": "sgd", "lr": 0.5},
    )
    m.neuron_masks[:, ::5] = True
    m.masks_ready.fill_(True)
    base = {n: p.clone() for n, p in m.policy.named_parameters() if not p.requires_grad}
    L.Trainer(
        accelerator="cpu",
        max_steps=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
    ).fit(m, datamodule=_dm(tmp_path))
    for n, p in m.policy.named_parameters():
        if n in base:
            assert torch.equal(p, base[n]) and not p.requires_grad, n  # base weights untouched and frozen again
    assert any("lora_B" in n and p.abs().sum() > 0 for n, p in m.policy.named_parameters())
    dm = _dm(tmp_path)
    dm.setup("fit")
    batch = next(iter(dm.val_dataloader()))
    ref_w, _ = m._reference_logps(batch, "val")
    pol_w, _, _, _ = m._pair_logps(m.policy, batch)
    assert not torch.allclose(ref_w, pol_w)  # the reference is the base model, not the adapted policy


def test_precomputed_reference_logps_match(tmp_path):
    torch.manual_seed(0)
    m = ShaPOModule(arch="zoo-lm-tiny", variant="dpo", precompute_ref_logps=True, eval_generation=False)
    dm = _dm(tmp_path)
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
    tr.fit(m, datamodule=dm)
    assert len(m._ref_cache) == 8  # 4 training + 4 held-out pairs
    batch = next(iter(dm.val_dataloader()))
    cached = m._reference_logps(batch, "val")
    m.hparams.precompute_ref_logps = False
    fresh = m._reference_logps(batch, "val")
    assert torch.allclose(cached[0], fresh[0], atol=1e-4) and torch.allclose(cached[1], fresh[1], atol=1e-4)
