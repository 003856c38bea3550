"""Named Lightning strategies recipes can ask for by string (``trainer.strategy: fsdp2``).

``fsdp2`` is Lightning's ``ModelParallelStrategy`` set up for pure FSDP2 data parallelism: one data-parallel mesh
dimension over every process (``data_parallel_size = nodes x devices``, ``tensor_parallel_size = 1``; Lightning's
own "auto" would put the devices of a node on the tensor-parallel dimension instead) and single-file checkpoints
(the full state dict assembled on rank 0, so ``resume``, ``zoo release``, ``zoo eval`` and ``zoo export`` read them
like any other ``.ckpt``). The module shards itself in ``configure_model`` with ``self.device_mesh``
(see ``zoo.models.sharding.shard_causal_lm``).
"""

from __future__ import annotations

from lightning.pytorch.strategies import DDPStrategy, ModelParallelStrategy, StrategyRegistry


class ZooDDPStrategy(DDPStrategy):
    """What ``trainer.strategy: ddp`` means in zoo: Lightning's DDP with the unused-parameter search on (a
    discriminator or a frozen branch that misses a loss would otherwise stop training), and no DDP wrapper around a
    module with nothing to train (a closed-form or enumeration method: each rank fits, rank 0 checkpoints).
    ``ddp_find_unused_parameters_false`` is plain Lightning DDP."""

    def __init__(self, **kwargs):
        kwargs.setdefault("find_unused_parameters", True)
        super().__init__(**kwargs)

    def _setup_model(self, model):
        if not any(p.requires_grad for p in model.parameters()):
            return model
        return super()._setup_model(model)


class FSDP2Strategy(ModelParallelStrategy):
    """``ModelParallelStrategy`` with every process on the data-parallel dimension and full checkpoints.

    Args:
        save_distributed_checkpoint: ``False`` (default here): one ``.ckpt`` file gathered on rank 0;
            ``True``: a folder with one shard per rank (Lightning's default; zoo's tools do not read those).
        kwargs: the other ``ModelParallelStrategy`` arguments (``process_group_backend``, ``timeout``).
    """

    strategy_name = "fsdp2"

    def __init__(self, save_distributed_checkpoint: bool = False, **kwargs):
        super().__init__(
            data_parallel_size="auto",
            tensor_parallel_size=1,
            save_distributed_checkpoint=save_distributed_checkpoint,
            **kwargs,
        )

    def setup_environment(self) -> None:
        if self._data_parallel_size == "auto":
            self._data_parallel_size = self.num_nodes * self.num_processes
        super().setup_environment()

    def load_checkpoint(self, checkpoint_path, weights_only=None) -> dict:
        """Resume from a single-file checkpoint: the full model and optimiser states are loaded in one
        ``set_*_state_dict`` call each (every rank reads the file). Lightning's own loader goes parameter by
        parameter and trips over tied weights (stored once); a sharded checkpoint folder still goes there.

        Returns:
            The rest of the checkpoint (loops, callbacks, hyperparameters) for Lightning to restore.
        """
        from pathlib import Path

        import torch
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )
        from torch.distributed.fsdp import FSDPModule

        path = Path(self.broadcast(checkpoint_path))
        if path.is_dir():
            return super().load_checkpoint(path, weights_only=weights_only)
        checkpoint = torch.load(path, map_location="cpu", mmap=True, weights_only=weights_only)
        module = self.lightning_module
        for sub in module.modules():  # a root left unsharded by a forward would hold plain tensors
            if isinstance(sub, FSDPModule):
                sub.reshard()
        set_model_state_dict(
            module,
            checkpoint.pop("state_dict"),
            options=StateDictOptions(full_state_dict=True, strict=module.strict_loading),
        )
        for optimizer, state in zip(self.optimizers, checkpoint.get("optimizer_states", [])):
            state = _rekey_by_name(state, module)  # saved keyed by index, loaded by name
            set_optimizer_state_dict(
                module, optimizer, optim_state_dict=state, options=StateDictOptions(full_state_dict=True)
            )
        return checkpoint


def _rekey_by_name(state: dict, module) -> dict:
    """An optimiser state dict keyed by parameter index (a plain ``optimizer.state_dict()``, as saved) rekeyed by
    parameter name, as ``set_optimizer_state_dict`` reads it (what Lightning's private
    ``_rekey_optimizer_state_if_needed`` does, with torch's public API; an empty state passes through)."""
    if not state.get("state") or not isinstance(next(iter(state["state"])), int):
        return state
    from torch.distributed.fsdp import FullyShardedDataParallel, OptimStateKeyType

    return FullyShardedDataParallel.rekey_optim_state_dict(state, OptimStateKeyType.PARAM_NAME, module)


def register_strategies() -> None:
    """Make ``fsdp2`` a strategy name ``lightning.Trainer`` accepts (idempotent)."""
    if FSDP2Strategy.strategy_name not in StrategyRegistry:
        StrategyRegistry.register(
            FSDP2Strategy.strategy_name,
            FSDP2Strategy,
            description="FSDP2 (fully_shard) over all processes via ModelParallelStrategy",
        )


def unsharded_copy(module, trainer):
    """After fit under ``fsdp2``: a plain copy of ``module`` on rank 0 for export (``None`` on other ranks).

    Every rank must call it (the full state dict is gathered from the shards, on rank 0's CPU); the copy is rebuilt
    from the module's saved hyperparameters, so packages and HF exports never see a ``DTensor``. Its causal LMs are
    built empty (:func:`zoo.core.empty.empty_weights`: no second load of the model from disk) and take the
    gathered tensors themselves (``assign``); non-persistent buffers come from ``module``. Any other strategy:
    ``module`` itself.
    """
    if not isinstance(trainer.strategy, ModelParallelStrategy):
        return module
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    from zoo.core.empty import empty_weights
    from zoo.core.registry import constructor_kwargs

    state = get_model_state_dict(module, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if not trainer.is_global_zero:
        return None
    cls = type(module)
    kwargs = constructor_kwargs(cls, dict(module.hparams))
    with empty_weights():
        copy = cls(**kwargs)
    copy.load_state_dict(state, strict=True, assign=True)
    for sub in copy.modules():  # assign gives tied weights a Parameter each: tie them again (HF models)
        if hasattr(sub, "config") and callable(getattr(sub, "tie_weights", None)):
            sub.tie_weights()
    own = dict(module.named_buffers())
    for name, buf in list(copy.named_buffers()):
        if buf.is_meta and name in own:
            owner, _, leaf = name.rpartition(".")
            copy.get_submodule(owner)._buffers[leaf] = own[name].detach().to("cpu", copy=True)
    if any(t.is_meta for t in [*copy.parameters(), *copy.buffers()]):  # something empty_weights cannot fill
        copy = cls(**kwargs)
        copy.load_state_dict(state, strict=True)
    copy.trainer = trainer  # hooks such as package_extras read the run directory from it
    return copy
