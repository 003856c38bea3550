"""SemBind's semantic modulation of the initial noise (notes §1.4, reconstructed: *ours*).

A ``B``-bit semantic code ``m`` is tiled to the latent's ``d = C·H·W`` entries, permuted by a keyed permutation
``π`` and restricted to a keyed subset ``Ω`` of ``round(r·d)`` entries (``r`` = mask ratio); the entries of ``Ω``
whose permuted bit is 1 change sign. The sign flip is its own inverse and keeps N(0, I) (a symmetric law), so
``z_T = Mod_m(WM(z))`` is generated and verification applies ``Mod_{m'}`` to the inverted latent with the code
``m'`` of the image under test before the scheme's detector. With ``m'`` differing from ``m`` in a fraction ``h``
of bits, a fraction ``r·h`` of the latent keeps the wrong sign (``r/2`` for codes ``h = 1/2`` apart).
"""

from __future__ import annotations

import torch


class SemanticModulation:
    """Keyed tiling, permutation and subset of ratio ``r`` for codes of ``n_bits`` on latents of ``shape``.

    Args:
        shape: latent ``(C, H, W)``.
        n_bits: code length ``B``.
        r: mask ratio in ``[0, 1]``.
        seed: key of ``π`` and ``Ω``.

    Raises:
        ValueError: ``r`` outside ``[0, 1]``.
    """

    def __init__(self, shape: tuple[int, int, int], n_bits: int, r: float, seed: int):
        if not 0.0 <= r <= 1.0:
            raise ValueError(f"mask ratio r must be in [0, 1], got {r}")
        self.shape, self.n_bits, self.r = tuple(shape), int(n_bits), float(r)
        d = shape[0] * shape[1] * shape[2]
        g = torch.Generator().manual_seed(seed)
        self.perm = torch.randperm(d, generator=g)
        self.omega = torch.zeros(d, dtype=torch.bool)
        self.omega[torch.randperm(d, generator=g)[: round(r * d)]] = True

    def flips(self, code: torch.Tensor) -> torch.Tensor:
        """Boolean ``(B, C, H, W)``: where codes ``code (B, n_bits)`` in {0, 1} flip the sign."""
        d = self.perm.numel()
        tiled = code.bool().repeat(1, -(-d // self.n_bits))[:, :d]
        return (tiled[:, self.perm] & self.omega).view(len(code), *self.shape)

    def __call__(self, z: torch.Tensor, code: torch.Tensor) -> torch.Tensor:
        """``Mod_m(z)``: ``z (B, C, H, W)`` with the signs on the code's flips reversed (self-inverse)."""
        return torch.where(self.flips(code), -z, z)
