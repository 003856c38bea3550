"""Stage C's ascent gradient g ⊙ M, read from activations instead of from the weights.

For a down-projection y = x W^T (``nn.Linear``, W of shape (d, d_ff)) the loss gradient is
dL/dW = sum_t (dL/dy_t)^T x_t, so the selected columns (neurons ``idx``) need only the selected inputs x_t[idx]:

    (g ⊙ M)[:, idx] = sum_t (dL/dy_t)^T x_t[idx]        (d, k)   [GPT-2 Conv1D, y = x W: its transpose, (k, d)]

This never asks autograd for dL/dW, which under FSDP2 is out of reach (the weight autograd sees is a
transient all-gathered copy, not the sharded parameter) and under LoRA would need the frozen base weight's
``requires_grad`` switched on. It costs one backward from the loss to the L down-projection outputs and keeps
x[..., idx] (k = 1% of d_ff columns) per layer. Under FSDP2 the (d, k) slices of all ranks are averaged
(``all_reduce``) so that every rank perturbs its row shard with the same, global-batch eps.
"""

from __future__ import annotations

from typing import Self

import torch
from torch import nn

from zoo.methods.shapo.subspace import DownProjection


class MaskedGradient:
    """Records, during a forward, each down-projection's selected inputs x[..., idx] and its output y.

    Use ``with MaskedGradient(model, projections, index) as mg: loss = f(model); g = mg.grads(loss)``; one
    ``grads`` call per forward. Only forwards run with gradients enabled are recorded, and only the first pass
    through each layer (a gradient-checkpointing recompute or a no-grad reference pass is ignored).
    """

    def __init__(self, model: nn.Module, projections: list[DownProjection], index: list[torch.Tensor]):
        """Args: model holding the projections (module paths from :func:`down_projections`); index: per layer,
        the selected neuron indices ``(k_l,)`` (``MaskedPerturbation.index``)."""
        self.model, self.projections, self.index = model, projections, index
        self._handles: list = []
        self._record: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def __enter__(self) -> Self:
        for layer, proj in enumerate(self.projections):
            module = self.model.get_submodule(proj.name)
            module = getattr(module, "base_layer", module)  # peft LoRA: the frozen base projection
            self._handles.append(module.register_forward_hook(self._hook(layer)))
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles, self._record = [], {}

    def _hook(self, layer: int):
        idx = self.index[layer]

        def hook(module, args, output):
            if not torch.is_grad_enabled() or layer in self._record:
                return None
            if not output.requires_grad:  # nothing upstream trains (LoRA on down_proj only): make y a leaf
                output = output.detach().requires_grad_(True)
            self._record[layer] = (args[0].detach().index_select(-1, idx.to(args[0].device)), output)
            return output

        return hook

    def grads(self, loss: torch.Tensor) -> list[torch.Tensor]:
        """Per layer, the selected neurons' gradient of ``loss`` (float32), ``(d, k_l)`` (``nn.Linear``) or
        ``(k_l, d)`` (GPT-2 ``Conv1D``); the record is cleared for the next forward.

        Raises:
            RuntimeError: a layer's output was not recorded (no forward with gradients enabled went through it, as
                under reentrant gradient checkpointing, whose forward runs under ``no_grad``), or is not connected
                to ``loss``.
        """
        missing = [i for i in range(len(self.projections)) if i not in self._record]
        if missing:
            raise RuntimeError(
                f"ShaPO ascent: no forward recorded through the down-projections of layers {missing} "
                "(a forward with gradients enabled is needed: reentrant gradient checkpointing runs "
                "its forward under no_grad; use it non-reentrant, use_reentrant=False)"
            )
        xs, ys = zip(*(self._record[i] for i in range(len(self.projections))))
        try:  # a checkpointing recompute inside this backward finds every layer recorded and is ignored
            gys = torch.autograd.grad(loss, ys)
        except RuntimeError as e:
            raise RuntimeError(f"ShaPO ascent: the loss does not reach every down-projection output ({e})") from e
        finally:
            self._record = {}
        out = []
        for proj, x, gy in zip(self.projections, xs, gys):
            n = gy.shape[:-1].numel()
            x2 = x.reshape(n, x.shape[-1]).float()  # (N, k); k may be 0 in a layer
            g2 = gy.reshape(n, gy.shape[-1]).float()  # (N, d)
            with torch.autocast(device_type=x2.device.type, enabled=False):  # fp32 under bf16-mixed too
                out.append(g2.T @ x2 if proj.neuron_axis == 1 else x2.T @ g2)
        return out


def all_reduce_mean(tensors: list[torch.Tensor], group=None) -> list[torch.Tensor]:
    """The element-wise mean of ``tensors`` over the processes of ``group`` (one flat ``all_reduce``).

    Every rank's loss is a mean over its own equal-sized batch, so the mean of the ranks' gradients is the gradient
    of the global batch's mean loss (what FSDP's reduce-scatter gives the descent gradient too).
    """
    import torch.distributed as dist

    flat = torch.cat([t.reshape(-1) for t in tensors])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
    flat /= dist.get_world_size(group)
    out, offset = [], 0
    for t in tensors:
        out.append(flat[offset : offset + t.numel()].view_as(t))
        offset += t.numel()
    return out
