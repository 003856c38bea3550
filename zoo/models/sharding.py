"""FSDP2 (``torch.distributed.fsdp.fully_shard``) for Hugging Face causal LMs, plain or peft-wrapped.

Each decoder layer becomes its own FSDP2 unit (all-gathered just before it runs, freed after), and the model itself
is the root unit holding what is left (embeddings, final norm, the output head; tied embeddings stay one parameter
in the root). Every parameter becomes a ``DTensor`` sharded on dim 0 (``Shard(0)``) over the mesh.

FSDP2 gathers a unit's parameters only in that unit's ``forward``. Code that runs a model's pieces directly (the
backbone, then the head on a few positions; ``generate``) must enter through the root: :func:`shard_causal_lm`
registers ``generate`` and a generic :func:`call_as_root` entry point as FSDP forward methods, and
:func:`call_as_root` is a plain call on an unsharded model.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from typing import Any

from torch import nn

# decoder-layer paths of Llama/Qwen/Mistral (model.layers.N), GPT-NeoX (gpt_neox.layers.N), GPT-2 (transformer.h.N)
_LAYER = re.compile(r"(?:^|\.)(?:layers|h)\.\d+$")
_ROOT_CALL = "_zoo_root_call"


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The decoder layers of an HF causal LM (under a peft wrapper too), in order.

    Raises:
        ValueError: none found.
    """
    layers = [m for name, m in model.named_modules() if _LAYER.search(name)]
    if not layers:
        raise ValueError(f"{type(model).__name__}: no decoder layers (``layers.N`` / ``h.N``) to shard")
    return layers


def _root_call(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)


def shard_causal_lm(model: nn.Module, mesh, **fsdp_kwargs: Any) -> nn.Module:
    """Apply ``fully_shard`` to every decoder layer, then to ``model`` (the root), in place.

    Args:
        model: an HF causal LM or a peft model around one; its parameters may be on CPU (FSDP2 moves them to the
            mesh's device type).
        mesh: a 1-D ``DeviceMesh`` (data parallel).
        fsdp_kwargs: passed to ``fully_shard`` (``mp_policy``, ``reshard_after_forward``, ...).

    Returns:
        ``model``, now an ``FSDPModule``; ``generate`` and :func:`call_as_root` gather parameters like ``forward``.
    """
    from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

    for layer in decoder_layers(model):
        fully_shard(layer, mesh=mesh, **fsdp_kwargs)
    fully_shard(model, mesh=mesh, **fsdp_kwargs)
    # set on the instance (not through a peft wrapper's __getattr__), then wrapped in FSDP's pre/post forward
    object.__setattr__(model, _ROOT_CALL, types.MethodType(_root_call, model))
    register_fsdp_forward_method(model, _ROOT_CALL)
    if hasattr(model, "generate"):
        register_fsdp_forward_method(model, "generate")
    return model


def data_parallel_mesh(mesh, method: str):
    """The 1-D data-parallel mesh FSDP2 shards over, from the mesh Lightning's ``ModelParallelStrategy`` hands a
    module's ``configure_model`` (``trainer.strategy=fsdp2`` makes every device data-parallel).

    Raises:
        RecipeError: a tensor-parallel dimension larger than 1 (``method`` only shards; it has no TP plan).
    """
    from zoo.core.recipe import RecipeError

    names = mesh.mesh_dim_names or ()
    if "tensor_parallel" in names and mesh["tensor_parallel"].size() != 1:
        raise RecipeError(
            f"trainer.strategy: tensor_parallel_size={mesh['tensor_parallel'].size()} is not supported by {method}; "
            "use trainer.strategy=fsdp2 (every device data-parallel, parameters sharded by FSDP2)"
        )
    return mesh["data_parallel"] if "data_parallel" in names else mesh


def is_sharded(model: nn.Module) -> bool:
    """Whether ``model`` went through :func:`shard_causal_lm`."""
    return _ROOT_CALL in vars(model)


def call_as_root(model: nn.Module, fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` run as if it were ``model.forward``: under FSDP2 the root unit's parameters are
    gathered first and its backward hooks are in place; otherwise a plain call."""
    call = vars(model).get(_ROOT_CALL)
    return call(fn, *args, **kwargs) if call is not None else fn(*args, **kwargs)


def reshard(model: nn.Module) -> None:
    """Free the gathered parameters of a model sharded by :func:`shard_causal_lm` (no-op otherwise).

    FSDP2 keeps the root unit's parameters (embeddings, final norm, head) gathered after its forward, expecting a
    backward to follow; a model that only runs without gradients (a frozen reference) would hold them for good.
    """
    if is_sharded(model):
        model.reshard()
