"""Benna-Fusi synaptic consolidation in parameter space (paper §2.3; ``consolidation_update_fn`` of the authors'
agents, re-written).

Beakers ``u_0 .. u_{K-1}`` are copies of one network's parameters; ``u_0`` is the online network trained by
gradients. Capacities ``C_0 = 1, C_k = 2^k`` (and ``C_K = 2^K`` for the last beaker), flow ``g`` (default
``0.1 / C_1``), storage timescales ``tau_k = ceil(C_k / g)`` learning steps. The recall mask is the authors'
``compute_recall_mask`` (both codebases): ``m = [1, [tau_0 < n], ..., [tau_{K-2} < n]]`` (a 1 prepended, the last
entry dropped), with ``n`` the learning steps done before this one, so recall *into* beaker ``k`` (from ``k+1``,
gated by ``m_{k+1}`` as in their PyTorch agent; their JAX agent gates the middle beakers by ``m_k``) starts once
``n > tau_k``. After every learning step, in this order (each line sees the values
already updated above it, as in the authors' code):

    u_0 <- u_0 + (g/C_1) m_1 (u_1 - u_0)                                  recall from the next-slower beaker
    u_k <- u_k + (g/C_k) (u_{k-1} - u_k)                                  storage from the next-faster beaker
    u_k <- u_k + (g/C_{k+1}) m_{k+1} (u_{k+1} - u_k),    0 < k < K-1     recall
    u_{K-1} <- u_{K-1} + (g/C_K) (0 - u_{K-1})                            leak (``leak=True``)
    u_{K-1} <- u_{K-1} + (g/C_K) (u_{K-2} - u_{K-1})                      storage into the last beaker

The last beaker's leak and inflow both run at ``g/C_K``, in that order, as in the authors' JAX (Miniworld) agent
(their PyTorch TD3 agent feeds it at ``g/C_{K-1}`` before the leak). Each ``a <- a + r (b - a)`` is one step whose
displacement ``r (b - a)`` is rescaled to L2 norm at most ``max_norm`` (10) over the whole beaker, as the authors'
``update_and_accumulate_tree_flat`` does. ``K = 2`` without the leak is an EMA of ``u_0`` at rate ``g/C_2``.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def capacities(num_beakers: int, base: float = 2.0) -> list[float]:
    """``[C_0, ..., C_K]`` = ``[1, base, base^2, ..., base^K]`` (the last entry sets the leak)."""
    return [1.0] + [float(base) ** k for k in range(1, num_beakers + 1)]


def storage_timescales(num_beakers: int, g: float, base: float = 2.0) -> list[int]:
    """``tau_k = ceil(C_k / g)`` in learning steps, ``k = 0..K-1`` (``g = 0`` gives a huge value: no recall)."""
    return [math.ceil(c / g) if g > 0 else 2**62 for c in capacities(num_beakers, base)[:num_beakers]]


def recall_mask(n: int, tau: list[int]) -> list[bool]:
    """The authors' recall mask after ``n`` learning steps: ``[True] + [tau_k < n for k = 0..K-2]`` (length ``K``).

    ``mask[k + 1]`` gates recall into beaker ``k``, which therefore starts once ``n > tau_k``.
    """
    return [True] + [t < n for t in tau[:-1]]


def _flow(dst: torch.Tensor, src: torch.Tensor | None, rate: float, max_norm: float) -> None:
    """``dst <- dst + c r (src - dst)`` in place on flat beakers (``src = None``: towards zero), with
    ``c = min(1, max_norm / (|d| + 1e-6))`` and ``|d|`` the L2 norm of the displacement ``r (src - dst)`` (the
    authors' clip over the whole beaker)."""
    diff = -dst if src is None else src - dst  # the displacement is rate * diff: three passes, not four
    norm = rate * float(torch.linalg.vector_norm(diff))
    dst.add_(diff, alpha=rate * min(1.0, max_norm / (norm + 1e-6)))


@torch.no_grad()
def consolidate_flat(
    u: torch.Tensor, g: float, caps: list[float], mask: list[bool], leak: bool = True, max_norm: float = 10.0
) -> None:
    """One in-place consolidation step on ``u (K, P)``, beaker ``k`` flattened in row ``k``; formula in the module
    docstring. ``caps`` from :func:`capacities`, ``mask`` from :func:`recall_mask`, ``max_norm`` the per-flow clip.

    Each flow is four kernels over one contiguous row (about 1/50 of the time of the same flow as a per-tensor
    ``torch._foreach`` sweep over a 64-64 net's 12 tensors, which is launch-bound on CPU).
    """
    K = u.shape[0]
    if K < 2 or g == 0:
        return
    if mask[1]:
        _flow(u[0], u[1], g / caps[1], max_norm)
    for k in range(1, K - 1):
        _flow(u[k], u[k - 1], g / caps[k], max_norm)
        if mask[k + 1]:
            _flow(u[k], u[k + 1], g / caps[k + 1], max_norm)
    if leak:
        _flow(u[K - 1], None, g / caps[K], max_norm)
    _flow(u[K - 1], u[K - 2], g / caps[K], max_norm)


def _gather(beakers: list[list[torch.Tensor]]) -> torch.Tensor:
    """``(K, P)``: beaker ``k``'s tensors flattened and concatenated in row ``k``."""
    return torch.stack([torch.cat([t.reshape(-1) for t in b]) for b in beakers])


def _scatter(u: torch.Tensor, beakers: list[list[torch.Tensor]]) -> None:
    """Copy row ``k`` of ``u`` back into beaker ``k``'s tensors (inverse of :func:`_gather`)."""
    sizes = [t.numel() for t in beakers[0]]
    for b, row in zip(beakers, u):
        torch._foreach_copy_(b, [x.view_as(t) for x, t in zip(row.split(sizes), b)])


@torch.no_grad()
def consolidate(
    beakers: list[list[torch.Tensor]],
    g: float,
    caps: list[float],
    mask: list[bool],
    leak: bool = True,
    max_norm: float = 10.0,
) -> None:
    """One in-place consolidation step over ``beakers[k][j]`` (beaker ``k``, tensor ``j``; every beaker the same
    shapes): :func:`consolidate_flat` on the beakers flattened, written back into the tensors."""
    if len(beakers) < 2 or g == 0:
        return
    u = _gather(beakers)
    consolidate_flat(u, g, caps, mask, leak, max_norm)
    _scatter(u, beakers)


class BeakerChain(nn.Module):
    """The slower beakers ``u_1 .. u_{K-1}`` of ``net`` as buffers (saved with the module), and the update.

    Args:
        net: the online network (its parameters are ``u_0``; the beakers start as copies).
        num_beakers: ``K`` (``K = 2``: single timescale).
        g: flow ``g``; ``None`` -> ``0.1 / C_1`` (0.05 for capacity base 2).
        base: capacity ratio (``C_k = base^k``).
        leak: leak the last beaker towards zero.
        max_norm: clip on the L2 norm of each flow's displacement (the authors' 10).
    """

    def __init__(
        self,
        net: nn.Module,
        num_beakers: int = 5,
        g: float | None = None,
        base: float = 2.0,
        leak: bool = True,
        max_norm: float = 10.0,
    ):
        super().__init__()
        if num_beakers < 2:
            raise ValueError(f"num_beakers must be >= 2, got {num_beakers}")
        self.K, self.base, self.leak, self.max_norm = int(num_beakers), float(base), bool(leak), float(max_norm)
        self.caps = capacities(self.K, base)
        self.g = 0.1 / self.caps[1] if g is None else float(g)
        self.tau = storage_timescales(self.K, self.g, base)
        self.names = [n for n, _ in net.named_parameters()]
        for k in range(1, self.K):
            for n, p in net.named_parameters():
                self.register_buffer(self._key(k, n), p.detach().clone())
        self.register_buffer("n_updates", torch.zeros((), dtype=torch.long))
        self._u: torch.Tensor | None = None  # (K, P): row 0 a copy of net's parameters, rows 1.. back the buffers
        self._u_ptrs: tuple[int, ...] = ()

    @staticmethod
    def _key(k: int, name: str) -> str:
        return f"u{k}__" + name.replace(".", "__")

    def beaker(self, net: nn.Module, k: int) -> list[torch.Tensor]:
        """Tensors of beaker ``k`` (``k = 0``: ``net``'s live parameters)."""
        if k == 0:
            return [p.data for p in net.parameters()]
        return [getattr(self, self._key(k, n)) for n in self.names]

    def _flat(self, net: nn.Module) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The flat beakers ``u (K, P)`` whose rows ``1..K-1`` the named buffers are views of, and row 0's views
        shaped like ``net``'s parameters. Rebuilt when a buffer is no longer such a view (first use, ``.to()``,
        a buffer replaced); ``load_state_dict`` copies into the views, so it keeps them."""
        bufs = [self._buffers[self._key(k, n)] for k in range(1, self.K) for n in self.names]
        if self._u is None or tuple(b.data_ptr() for b in bufs) != self._u_ptrs:
            params = list(net.parameters())
            sizes = [p.numel() for p in params]
            u = torch.empty(self.K, sum(sizes), dtype=params[0].dtype, device=params[0].device)
            rows = [[x.view_as(p) for x, p in zip(row.split(sizes), params)] for row in u]
            for k in range(1, self.K):
                for n, view in zip(self.names, rows[k]):
                    key = self._key(k, n)
                    view.copy_(self._buffers[key])
                    self._buffers[key] = view
            self._u, self._u0 = u, rows[0]
            self._u_ptrs = tuple(v.data_ptr() for row in rows[1:] for v in row)
        return self._u, self._u0

    @torch.no_grad()
    def step(self, net: nn.Module) -> None:
        """One consolidation step after a learning step of ``net``: :func:`consolidate_flat` on the flat beakers,
        with ``u_0`` copied in from ``net``'s parameters and back (two calls; the slower beakers stay flat)."""
        u, u0 = self._flat(net)
        params = list(net.parameters())
        torch._foreach_copy_(u0, params)
        consolidate_flat(u, self.g, self.caps, recall_mask(int(self.n_updates), self.tau), self.leak, self.max_norm)
        torch._foreach_copy_(params, u0)
        self.n_updates += 1

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """Saved beakers are their own tensors, not views of the flat storage (safetensors refuses shared memory)."""
        super()._save_to_state_dict(destination, prefix, keep_vars)
        for k in range(1, self.K):
            for n in self.names:
                destination[prefix + self._key(k, n)] = destination[prefix + self._key(k, n)].clone()

    @torch.no_grad()
    def distances(self, net: nn.Module) -> list[float]:
        """``||u_k - u_0||_2`` over all parameters, ``k = 1..K-1``."""
        u0 = self.beaker(net, 0)
        return [
            math.sqrt(sum(float((a - b).pow(2).sum()) for a, b in zip(self.beaker(net, k), u0)))
            for k in range(1, self.K)
        ]

    @torch.no_grad()
    def copy_into(self, net: nn.Module, k: int, target: nn.Module) -> nn.Module:
        """Load beaker ``k``'s parameters into ``target`` (same architecture as ``net``); returns ``target``."""
        for p, b in zip(target.parameters(), self.beaker(net, k)):
            p.copy_(b)
        return target
