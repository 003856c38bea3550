"""Reference computations shared by the ShaPO tests (not collected: no ``test_`` prefix)."""

import torch

from zoo.methods.shapo.subspace import MaskedPerturbation


def masked_grads(pert: MaskedPerturbation, grads: list) -> list[torch.Tensor]:
    """Test oracle: the selected neurons' slices of whole (unsharded) down-projection weight gradients, ``(d, k_l)``
    or ``(k_l, d)`` per layer, zeros for a missing gradient."""
    out = []
    for p, idx, g in zip(pert.projections, pert.index, grads):
        shape = list(p.weight.shape)
        shape[p.neuron_axis] = idx.numel()
        out.append(g.index_select(p.neuron_axis, idx) if g is not None else torch.zeros(shape, dtype=p.weight.dtype))
    return out
