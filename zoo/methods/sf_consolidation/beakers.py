"""Benna-Fusi synaptic consolidation in parameter space (paper §2.3; ``consolidation_update_fn`` of the authors'
TD3 agent, re-written).

Beakers ``u_0 .. u_{K-1}`` are copies of one network's parameters; ``u_0`` is the online network trained by
gradients. Capacities ``C_0 = 1, C_k = 2^k`` (and ``C_K = 2^K`` for the leak), flow ``g`` (default ``0.1 / C_1``),
recall masks ``m_k = [n >= tau_k]`` with ``tau_k = ceil(C_k / g)`` learning steps. After every learning step, in
this order (each line sees the values already updated above it, as in the authors' code):

    u_0 <- u_0 + (g/C_1) m_1 (u_1 - u_0)                                  recall from the next-slower beaker
    u_k <- u_k + (g/C_k) (u_{k-1} - u_k)                                  storage from the next-faster beaker
    u_k <- u_k + (g/C_{k+1}) m_{k+1} (u_{k+1} - u_k),    0 < k < K-1     recall
    u_{K-1} <- u_{K-1} + (g/C_K) (0 - u_{K-1})                            leak (``leak=True``)

each ``a <- a + r (b - a)`` is one ``torch.lerp``. ``K = 2`` without the leak is an EMA of ``u_0`` at rate ``g/C_1``.
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


@torch.no_grad()
def consolidate(beakers: list[list[torch.Tensor]], g: float, caps: list[float], mask: list[bool],
                leak: bool = True) -> None:
    """One in-place consolidation step over ``beakers[k][j]`` (beaker ``k``, tensor ``j``); formula in the module
    docstring. ``caps`` from :func:`capacities`, ``mask[k]`` the recall mask ``m_k``."""
    K = len(beakers)
    if K < 2 or g == 0:
        return
    if mask[1]:
        torch._foreach_lerp_(beakers[0], beakers[1], g / caps[1])
    for k in range(1, K):
        torch._foreach_lerp_(beakers[k], beakers[k - 1], g / caps[k])
        if k < K - 1 and mask[k + 1]:
            torch._foreach_lerp_(beakers[k], beakers[k + 1], g / caps[k + 1])
        if k == K - 1 and leak:
            torch._foreach_mul_(beakers[k], 1.0 - g / caps[K])


class BeakerChain(nn.Module):
    """The slower beakers ``u_1 .. u_{K-1}`` of ``net`` as buffers (saved with the module), and the update.

    Args:
        net: the online network (its parameters are ``u_0``; the beakers start as copies).
        num_beakers: ``K`` (``K = 2``: single timescale).
        g: flow ``g``; ``None`` -> ``0.1 / C_1`` (0.05 for capacity base 2).
        base: capacity ratio (``C_k = base^k``).
        leak: leak the last beaker towards zero.
    """

    def __init__(self, net: nn.Module, num_beakers: int = 5, g: float | None = None, base: float = 2.0,
                 leak: bool = True):
        super().__init__()
        if num_beakers < 2:
            raise ValueError(f"num_beakers must be >= 2, got {num_beakers}")
        self.K, self.base, self.leak = int(num_beakers), float(base), bool(leak)
        self.caps = capacities(self.K, base)
        self.g = 0.1 / self.caps[1] if g is None else float(g)
        self.tau = storage_timescales(self.K, self.g, base)
        self.names = [n for n, _ in net.named_parameters()]
        for k in range(1, self.K):
            for n, p in net.named_parameters():
                self.register_buffer(self._key(k, n), p.detach().clone())
        self.register_buffer("n_updates", torch.zeros((), dtype=torch.long))

    @staticmethod
    def _key(k: int, name: str) -> str:
        return f"u{k}__" + name.replace(".", "__")

    def beaker(self, net: nn.Module, k: int) -> list[torch.Tensor]:
        """Tensors of beaker ``k`` (``k = 0``: ``net``'s live parameters)."""
        if k == 0:
            return [p.data for p in net.parameters()]
        return [getattr(self, self._key(k, n)) for n in self.names]

    def step(self, net: nn.Module) -> None:
        """One consolidation step after a learning step of ``net``."""
        n = int(self.n_updates)
        mask = [n >= t for t in self.tau]
        consolidate([self.beaker(net, k) for k in range(self.K)], self.g, self.caps, mask, self.leak)
        self.n_updates += 1

    @torch.no_grad()
    def distances(self, net: nn.Module) -> list[float]:
        """``||u_k - u_0||_2`` over all parameters, ``k = 1..K-1``."""
        u0 = self.beaker(net, 0)
        return [math.sqrt(sum(float((a - b).pow(2).sum()) for a, b in zip(self.beaker(net, k), u0)))
                for k in range(1, self.K)]

    @torch.no_grad()
    def copy_into(self, net: nn.Module, k: int, target: nn.Module) -> nn.Module:
        """Load beaker ``k``'s parameters into ``target`` (same architecture as ``net``); returns ``target``."""
        for p, b in zip(target.parameters(), self.beaker(net, k)):
            p.copy_(b)
        return target
