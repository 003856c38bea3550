"""The alignment-critical subspace: MLP down-projection columns of a causal LM (stages A and C of ShaPO).

A transformer MLP writes ``sum_j a_j w_j`` into the residual stream, where ``w_j`` (a vector of size d) is
the value vector of neuron j: column j of an ``nn.Linear`` down-projection weight ``(d, d_ff)`` and
row j of a GPT-2 ``Conv1D`` weight ``(d_ff, d)``. ShaPO selects some of these value vectors (stage A) and
perturbs only them (stage C). Here each down-projection is found once with the axis that indexes neurons,
which fixes the authors' GPT-2 path (it masks the wrong axis of ``c_proj``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from torch import nn

# suffixes of down-projection modules: Llama/Qwen/Mistral, GPT-NeoX/Pythia, GPT-2
_DOWN_PROJ = re.compile(r"(?:^|\.)(?:layers|h)\.(\d+)\.mlp\.(down_proj|dense_4h_to_h|c_proj)$")


@dataclass(frozen=True)
class DownProjection:
    """One layer's MLP down-projection.

    Attributes:
        layer: decoder layer index.
        name: module path inside the model.
        weight: the weight tensor (under peft LoRA, the frozen base weight).
        neuron_axis: the axis of ``weight`` that indexes the d_ff neurons (1 for ``nn.Linear``,
            0 for GPT-2 ``Conv1D``).
    """

    layer: int
    name: str
    weight: nn.Parameter
    neuron_axis: int

    def value_vectors(self) -> torch.Tensor:
        """``(d_ff, d)`` value vectors, one row per neuron (a view; an FSDP2-sharded weight is all-gathered first,
        a collective every rank must call)."""
        w = full_weight(self.weight)
        return w.T if self.neuron_axis == 1 else w


def full_weight(weight: torch.Tensor) -> torch.Tensor:
    """The whole tensor: ``weight`` itself, or for a ``DTensor`` (FSDP2) its all-gathered ``full_tensor()``."""
    from torch.distributed.tensor import DTensor

    return weight.full_tensor() if isinstance(weight, DTensor) else weight


def local_rows(weight: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    """This process's part of a weight and the global rows it holds.

    A plain tensor is all of itself, rows ``[0, n)``. An FSDP2 parameter is a ``DTensor`` with placement
    ``Shard(0)`` on a 1-D mesh: rank r holds rows ``[r c, min((r + 1) c, n))`` with ``c = ceil(n / world)``
    (``torch.chunk``'s split, which FSDP2 uses), every column included.

    Returns:
        ``(local, start, stop)``: ``local`` shares storage with the parameter (in-place edits change it).

    Raises:
        ValueError: a DTensor placed other than ``Shard(0)`` on one mesh dimension.
    """
    from torch.distributed.tensor import DTensor, Shard

    if not isinstance(weight, DTensor):
        return weight, 0, weight.shape[0]
    if len(weight.placements) != 1 or weight.placements[0] != Shard(0):
        raise ValueError(
            f"ShaPO's sharded step expects FSDP2's Shard(0) placement on a 1-D mesh, got {weight.placements}"
        )
    local = weight.to_local()
    n, world, rank = weight.shape[0], weight.device_mesh.size(), weight.device_mesh.get_local_rank()
    chunk = -(-n // world)
    start = min(rank * chunk, n)
    stop = min(start + chunk, n)
    if stop - start != local.shape[0]:
        raise ValueError(f"shard of rank {rank} has {local.shape[0]} rows, expected rows [{start}, {stop}) of {n}")
    return local, start, stop


def down_projections(model: nn.Module) -> list[DownProjection]:
    """Every decoder layer's MLP down-projection, in layer order.

    Works for plain HF models and for peft-wrapped ones (the LoRA layer's ``base_layer`` weight is used).

    Raises:
        ValueError: no down-projection found, or layers missing from the numbering.
    """
    found = {}
    for name, module in model.named_modules():
        m = _DOWN_PROJ.search(name)
        if m is None:
            continue
        base = getattr(module, "base_layer", module)
        weight = base.weight
        neuron_axis = 0 if type(base).__name__ == "Conv1D" else 1
        found[int(m.group(1))] = DownProjection(int(m.group(1)), name, weight, neuron_axis)
    if not found:
        raise ValueError(f"{type(model).__name__}: no MLP down-projection (down_proj, dense_4h_to_h, c_proj) found")
    if sorted(found) != list(range(len(found))):
        raise ValueError(f"down-projections found for layers {sorted(found)}, expected 0..{len(found) - 1}")
    return [found[i] for i in range(len(found))]


SIGNS = ("negative", "positive", "abs")


def rank_neurons(
    projections: list[DownProjection], direction: torch.Tensor, percentage: float, sign: str = "negative"
) -> torch.Tensor:
    """Stage A neuron selection: cosine of every value vector with the probe direction, top p% overall.

    Args:
        projections: from :func:`down_projections` (all layers must have the same d_ff).
        direction: ``(d,)`` probe direction v = W_1 - W_0 (points to the *unsafe* class).
        percentage: p, the share of all L * d_ff neurons kept, in percent; k = floor(L d_ff p / 100).
        sign: ``negative`` keeps the most negative cosines (the authors' released ascending sort: value
            vectors that write *against* the unsafe direction), ``positive`` the most positive, ``abs``
            the largest |cos|.

    Returns:
        ``(L, d_ff)`` bool masks with exactly k entries set.

    Raises:
        ValueError: bad sign or percentage, or k = 0.
    """
    if sign not in SIGNS:
        raise ValueError(f"unknown neuron sign {sign!r}; choose from {SIGNS}")
    if not 0 < percentage <= 100:
        raise ValueError(f"probe percentage must be in (0, 100], got {percentage}")
    with torch.no_grad():
        v = direction.detach().float()
        v = v / v.norm().clamp_min(1e-12)
        cos = torch.stack(
            [torch.nn.functional.cosine_similarity(p.value_vectors().float(), v[None, :], dim=1) for p in projections]
        )  # (L, d_ff)
        score = {"negative": -cos, "positive": cos, "abs": cos.abs()}[sign]
        k = int(cos.numel() * percentage / 100)
        if k == 0:
            raise ValueError(f"probe percentage {percentage}% of {cos.numel()} neurons selects none")
        top = torch.topk(score.flatten(), k).indices
        masks = torch.zeros(cos.numel(), dtype=torch.bool)
        masks[top] = True
    return masks.view_as(cos)


class MaskedPerturbation:
    """Stage C's ascent: add eps to the selected value vectors, then put the old values back bit for bit.

    Only the masked neurons' value vectors change; the saved copies are of those columns only. Works on plain
    weights and on FSDP2-sharded ones (``DTensor``, ``Shard(0)``): each process edits and restores the selected
    columns of its own row shard (:func:`local_rows`), so the ``(d, k)`` masked gradient it is given must be the
    same on every rank. Use as ``pert.apply_masked(sliced, ...)`` then ``pert.restore()``.
    """

    def __init__(self, projections: list[DownProjection], masks: torch.Tensor):
        """Args: projections from :func:`down_projections`; masks ``(L, d_ff)`` bool from :func:`rank_neurons`.

        Raises:
            ValueError: masks of the wrong shape.
        """
        d_ff = projections[0].weight.shape[projections[0].neuron_axis]
        if tuple(masks.shape) != (len(projections), d_ff):
            raise ValueError(f"masks have shape {tuple(masks.shape)}, the model needs ({len(projections)}, {d_ff})")
        self.projections = projections
        self.index = [m.nonzero().flatten().to(p.weight.device) for p, m in zip(projections, masks)]
        self._saved: list[tuple[torch.Tensor, int, torch.Tensor, torch.Tensor]] | None = None

    @torch.no_grad()
    def apply_masked(self, sliced: list[torch.Tensor], mode: str, gamma: float = 0.0, rho: float = 0.0) -> float:
        """Move the selected value vectors uphill.

        ``mode="gamma"``: eps = gamma * g_masked (the authors' un-normalised step; gamma is drawn by the caller).
        ``mode="rho"``: eps = rho * g_masked / ||g_masked||_2 with the norm over all layers (the SAM ascent
        of Foret et al. 2021 with p = 2, restricted to the mask: ours, as an option).

        Args:
            sliced: per layer, the selected neurons' gradient, ``(d, k_l)`` (``neuron_axis`` 1) or ``(k_l, d)``
                (``neuron_axis`` 0), for the whole weight (not a shard): under FSDP2 every rank passes the same.

        Returns:
            ||eps||_2 over all layers, the size of the perturbation applied (the same on every rank).

        Raises:
            RuntimeError: a perturbation is already applied.
            ValueError: unknown mode.
        """
        if self._saved is not None:
            raise RuntimeError("perturbation already applied; call restore() first")
        if mode == "gamma":
            scale = gamma
        elif mode == "rho":
            norm = torch.sqrt(sum((g.float() ** 2).sum() for g in sliced))
            scale = rho / max(norm.item(), 1e-12)
        else:
            raise ValueError(f"unknown perturbation mode {mode!r}; choose gamma or rho")
        saved = []
        size = 0.0
        for p, idx, g in zip(self.projections, self.index, sliced):
            local, start, stop = local_rows(p.weight)
            eps = (scale * g).to(device=local.device, dtype=local.dtype)
            size += float((eps.float() ** 2).sum())
            if p.neuron_axis == 1:  # (d, d_ff) sharded over d: my rows of eps, all selected columns
                lidx, eps = idx, eps[start:stop]
            else:  # (d_ff, d) sharded over neurons: the selected neurons I hold
                keep = (idx >= start) & (idx < stop)
                lidx, eps = idx[keep] - start, eps[keep]
            old = local.index_select(p.neuron_axis, lidx)
            saved.append((local, p.neuron_axis, lidx, old))
            local.index_copy_(p.neuron_axis, lidx, old + eps)
        self._saved = saved
        return size**0.5

    @torch.no_grad()
    def restore(self) -> None:
        """Write the saved columns back (bit-exact, unlike the authors' W - gamma g; per shard under FSDP2).

        Raises:
            RuntimeError: nothing to restore.
        """
        if self._saved is None:
            raise RuntimeError("no perturbation to restore")
        for local, axis, lidx, old in self._saved:
            local.index_copy_(axis, lidx, old)
        self._saved = None
