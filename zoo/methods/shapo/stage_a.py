"""ShaPO stage A: the probe on the frozen starting policy, the neuron masks of the alignment-critical subspace (kept as
buffers and in ``RUN_DIR/shapo_masks.safetensors``), and the optional reference log-probability precompute at fit
start. A mixin of :class:`zoo.methods.shapo.module.ShaPOModule`."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch

from zoo.core.phases import phase
from zoo.methods.shapo.probe import mean_pooled_states, train_probe
from zoo.methods.shapo.subspace import down_projections, rank_neurons

MASKS_FILE = "shapo_masks.safetensors"
log = logging.getLogger("zoo")


class StageA:
    """Stage A (probe -> direction v -> neuron masks) of :class:`ShaPOModule` (a mixin)."""

    def on_fit_start(self) -> None:
        """Stage A (probe -> masks) unless masks are already known, then the optional reference precompute."""
        dm = self.trainer.datamodule
        if self.hparams.variant != "dpo" and not bool(self.masks_ready):
            if self.hparams.masks_path:
                self.load_masks(self.hparams.masks_path)
            else:
                with phase(
                    f"ShaPO stage A: the safety probe on {self.hparams.probe_pairs} training pairs, then the "
                    "neuron masks"
                ):
                    self.compute_masks(dm.clean_train_dataloader())
            self._save_masks(Path(self.trainer.default_root_dir) / MASKS_FILE)
        if self.hparams.precompute_ref_logps:
            log.info("precomputing the reference log-probabilities of every train and val pair ...")
            for split, loader in (("train", dm.ordered_train_dataloader()), ("val", dm.val_dataloader())):
                for batch in loader:
                    batch = self._to_device(batch)
                    ref_w, ref_l = self._reference_logps(batch, split)  # not cached yet: computed
                    for i, a, b in zip(batch["index"].tolist(), ref_w.tolist(), ref_l.tolist()):
                        self._ref_cache[(split, i)] = (a, b)

    def _to_device(self, batch: dict) -> dict:
        return {k: v.to(self.device) for k, v in batch.items()}

    @torch.no_grad()
    def compute_masks(self, loader) -> dict:
        """Stage A on the pairs of ``loader``: probe, direction v = W1 - W0, neuron ranking, masks (in place).

        Returns:
            The probe statistics (also kept in ``self.probe_stats``).
        """
        hp = self.hparams
        feats, labels, seen = [], [], 0
        # the authors rank on the base model; default: the starting policy (see model.stage_a_model)
        model = self._load_reference(hp.stage_a_model).to(self.device) if hp.stage_a_model else self.policy
        was_training = self.policy.training
        model.eval()
        for batch in loader:
            batch = self._to_device(batch)
            take = min(hp.probe_pairs - seen, batch["index"].numel())
            if take <= 0:
                break
            for side, label in (("chosen", 0), ("rejected", 1)):
                f = mean_pooled_states(model, batch[f"{side}_input_ids"][:take], batch[f"{side}_attention_mask"][:take])
                feats.append(f.cpu())
                labels.append(torch.full((take,), label, dtype=torch.long))
            seen += take
        self.policy.train(was_training)
        feats, labels = torch.cat(feats), torch.cat(labels)
        with torch.enable_grad():
            probe = train_probe(
                feats, labels, epochs=hp.probe_epochs, lr=hp.probe_lr, heldout=max(1, len(labels) // 10), seed=0
            )
        masks = rank_neurons(
            down_projections(model), probe.direction.to(self.device), hp.probe_percentage, hp.neuron_sign
        )
        direction = probe.direction
        if self._trainer is not None and self.trainer.world_size > 1:
            # one set of masks for all ranks (FSDP2 needs it: the ranks hold shards of the same weights)
            masks, direction = self.trainer.strategy.broadcast((masks.cpu(), direction.cpu()), src=0)
        self.neuron_masks.copy_(masks.to(self.device))
        self.probe_direction.copy_(direction.to(self.device))
        self.masks_ready.fill_(True)
        self._perturbation = None
        self.probe_stats = {
            "probe_examples": len(labels),
            "probe_train_accuracy": probe.train_accuracy,
            "probe_heldout_accuracy": probe.heldout_accuracy,
            "neurons_selected": int(masks.sum()),
            "neurons_total": int(masks.numel()),
        }
        return self.probe_stats

    def _save_masks(self, path: Path) -> None:
        if self.trainer is not None and not self.trainer.is_global_zero:
            return
        from safetensors.torch import save_file

        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(
            {"neuron_masks": self.neuron_masks.cpu().to(torch.uint8), "probe_direction": self.probe_direction.cpu()},
            str(path),
            metadata={
                "neuron_sign": self.hparams.neuron_sign,
                "probe_percentage": str(self.hparams.probe_percentage),
                "probe_stats": json.dumps(self.probe_stats),
            },
        )

    def load_masks(self, path: str) -> None:
        """Load masks saved by a run (``shapo_masks.safetensors``).

        Raises:
            ValueError: the file is missing or its masks do not fit this model.
        """
        from safetensors.torch import load_file

        if not Path(path).is_file():
            raise ValueError(f"model.masks_path: no such file {path}")
        data = load_file(path)
        masks = data["neuron_masks"].bool()
        if masks.shape != self.neuron_masks.shape:
            raise ValueError(
                f"model.masks_path: masks {tuple(masks.shape)} do not fit this model {tuple(self.neuron_masks.shape)}"
            )
        self.neuron_masks.copy_(masks)
        self.probe_direction.copy_(data["probe_direction"])
        self.masks_ready.fill_(True)
        self._perturbation = None

    def package_extras(self) -> dict[str, str]:
        """The stage-A masks file goes into the release package beside the weights (also in the state dict)."""
        path = Path(self.trainer.default_root_dir) / MASKS_FILE if self._trainer is not None else None
        return {MASKS_FILE: str(path)} if path is not None and path.is_file() else {}
