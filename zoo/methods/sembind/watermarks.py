"""Four latent watermarks on the initial noise ``z_T (B, C, H, W)`` of a diffusion model (own code, notes §1.7).

Each scheme has ``inject(z, generator) -> z_T`` (``z`` fresh N(0, I) noise) and ``score(z_hat) -> (B,)`` (higher =
more watermark-like) on a DDIM-inverted latent; thresholds for a target FPR come from held-out null scores
(:func:`calibrate`, :func:`empirical_threshold`), or for Gaussian Shading from the binomial tail
(:meth:`GaussianShading.threshold`).

- :class:`TreeRing` (Wen et al. 2023): a ring key in the centred 2-D FFT of one channel inside a disc of radius
  ``radius`` (10 at 64×64 in the official code, scaled here to the latent side); score = minus the mean L1
  distance to the key inside the disc. *Ours*: the ring values are real, so the key is Hermitian (symmetric and
  real) and the watermarked latent is real without dropping an imaginary part (the official code takes ``.real``).
- :class:`RingID` (Ci et al. 2024) *ours, simplified*: binary ring values ``±value`` (no DC term) in every channel,
  the same L1 score; RingID's heterogeneous-noise imprint in a separate channel is left out.
- :class:`GaussianShading` (Yang et al. 2024): a message of ``C·(H/hw_copy)·(W/hw_copy)`` bits (``channel_copy``
  1) replicated ``hw_copy²`` times, XOR-encrypted with a ChaCha20 key stream, each entry drawn from the upper (bit 1)
  or lower (bit 0) half of N(0, 1): ``z = Φ⁻¹((u + bit) / 2)``, ``u ~ U(0, 1)``; score = bit accuracy of the
  majority-voted, decrypted signs.
- :class:`WIND` (Arabi et al. 2024) *ours, simplified*: the initial noise is one of ``n_keys`` secret seeded N(0, I)
  patterns; score = the highest cosine similarity of the inverted latent to the patterns (the Fourier group
  identifier of WIND is left out).
"""

from __future__ import annotations

import math

import torch

SCHEMES = ("tree-ring", "gaussian-shading", "ringid", "wind")


def centred_fft(z: torch.Tensor) -> torch.Tensor:
    """2-D FFT over the last two dimensions with the zero frequency moved to the centre (where the rings are
    drawn)."""
    return torch.fft.fftshift(torch.fft.fft2(z), dim=(-2, -1))


def _ifft(f: torch.Tensor) -> torch.Tensor:
    return torch.fft.ifft2(torch.fft.ifftshift(f, dim=(-2, -1)))


def disc(size: int, radius: float) -> torch.Tensor:
    """Distances ``(size, size)`` of the centred FFT grid from its centre ``(size // 2, size // 2)``, and the
    boolean disc ``dist <= radius`` (symmetric under ``k -> -k`` for ``radius < size / 2``)."""
    k = torch.arange(size) - size // 2
    dist = (k[:, None] ** 2 + k[None, :] ** 2).float().sqrt()
    return dist, dist <= radius


def empirical_threshold(null_scores: torch.Tensor, fpr: float) -> float:
    """The smallest threshold ``tau`` with ``mean(null_scores > tau) <= fpr`` (scores ``(N,)``)."""
    s = torch.sort(null_scores.flatten().double(), descending=True).values
    k = math.floor(fpr * len(s))
    return float(s[min(k, len(s) - 1)])


def calibrate(calibration_scores: torch.Tensor, test_scores: torch.Tensor, fpr: float) -> tuple[float, float]:
    """Threshold at a target FPR from held-out null scores, and the FPR it gives on other null scores.

    ``tau = empirical_threshold(calibration_scores, fpr)``; the measured FPR is ``mean(test_scores > tau)``. The two
    sets must be different images: calibrating on the scored nulls makes their FPR ``<= fpr`` by construction.

    Args:
        calibration_scores: ``(N_cal,)`` scores of unmarked images used only to set ``tau``.
        test_scores: ``(N_test,)`` scores of other unmarked images.
        fpr: target false positive rate in ``(0, 1)``.
    Returns:
        ``(tau, measured_fpr)``.
    Raises:
        ValueError: ``floor(fpr * N_cal) < 1``: the threshold would be the calibration maximum, so the target is not
            resolved (with 16 nulls at 1 % FPR, rates move in steps of 1/16); or no test scores.
    """
    n = len(calibration_scores)
    if math.floor(fpr * n) < 1:
        raise ValueError(
            f"{n} calibration null scores cannot resolve an FPR of {fpr}: need at least {math.ceil(1 / fpr)}"
        )
    if len(test_scores) == 0:
        raise ValueError("no test null scores to measure the FPR on")
    tau = empirical_threshold(calibration_scores, fpr)
    return tau, float((test_scores.flatten().double() > tau).double().mean())


class RingKey:
    """A ring key in the centred FFT of channels ``channels`` inside a disc; shared by Tree-Ring and RingID.

    Args:
        shape: latent ``(C, H, W)`` with ``H == W``.
        radius: disc radius in frequency bins (< H / 2).
        values: ``(radius + 1,)`` real value of each ring (ring ``i``: distance in ``(i - 1, i]``, ring 0 the DC).
        channels: channels carrying the key.
    """

    def __init__(self, shape: tuple[int, int, int], radius: int, values: torch.Tensor, channels: list[int]):
        _, h, w = shape
        if h != w or radius >= h / 2:
            raise ValueError(f"need a square latent and radius < side/2, got {shape}, radius {radius}")
        self.shape, self.channels = tuple(shape), list(channels)
        dist, self.mask = disc(h, radius)
        ring = torch.ceil(dist).long().clamp(max=radius)
        self.key = torch.where(self.mask, values.double()[ring], torch.zeros(())).to(torch.complex64)

    def inject(self, z: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """``z (B, C, H, W)`` with the key written into the FFT of the key channels inside the disc."""
        f = centred_fft(z)
        for ch in self.channels:
            f[:, ch][:, self.mask] = self.key[self.mask]
        return _ifft(f).real.to(z.dtype)

    def score(self, z_hat: torch.Tensor) -> torch.Tensor:
        """Minus the mean complex L1 distance ``(B,)`` between the inverted latent's FFT and the key in the disc."""
        f = centred_fft(z_hat.double())[:, self.channels][..., self.mask]
        return -(f - self.key[self.mask].to(f.dtype)).abs().flatten(1).mean(1).float()


class TreeRing(RingKey):
    """Tree-Ring "ring" key in the last channel: ring values drawn ``N(0, H·W/2)`` (the spread of a white-noise
    FFT coefficient's real part) from ``seed``."""

    def __init__(self, shape: tuple[int, int, int], radius: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        values = torch.randn(radius + 1, generator=g, dtype=torch.float64) * math.sqrt(shape[1] * shape[2] / 2)
        super().__init__(shape, radius, values, [shape[0] - 1])


class RingID(RingKey):
    """RingID-style key (*ours*): ring values ``±value`` (seeded signs), DC ring 0, in every channel."""

    def __init__(self, shape: tuple[int, int, int], radius: int, seed: int, value: float | None = None):
        g = torch.Generator().manual_seed(seed)
        v = value if value is not None else math.sqrt(shape[1] * shape[2] / 2)
        values = (torch.randint(0, 2, (radius + 1,), generator=g).double() * 2 - 1) * v
        values[0] = 0.0
        super().__init__(shape, radius, values, list(range(shape[0])))


def chacha20_bits(key: bytes, nonce: bytes, n: int) -> torch.Tensor:
    """The first ``n`` bits ``(n,)`` uint8 of the ChaCha20 key stream (``key`` 32 bytes, ``nonce`` 16 bytes)."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    enc = Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor()
    stream = enc.update(bytes((n + 7) // 8))
    bits = torch.frombuffer(bytearray(stream), dtype=torch.uint8)
    return ((bits[:, None] >> torch.arange(7, -1, -1, dtype=torch.uint8)) & 1).flatten()[:n]


class GaussianShading:
    """Gaussian Shading with ``channel_copy = 1`` and ``hw_copy`` spatial replication.

    Args:
        shape: latent ``(C, H, W)``; ``H`` and ``W`` divisible by ``hw_copy``.
        hw_copy: replication factor per spatial axis (votes per bit: ``hw_copy²``).
        seed: seed of the message bits.
        key, nonce: ChaCha20 key (32 bytes) and nonce (16 bytes); default derived from ``seed`` (demo keys).
    """

    def __init__(
        self, shape: tuple[int, int, int], hw_copy: int, seed: int, key: bytes | None = None, nonce: bytes | None = None
    ):
        c, h, w = shape
        if h % hw_copy or w % hw_copy:
            raise ValueError(f"latent side {h}x{w} is not divisible by hw_copy {hw_copy}")
        self.shape, self.hw_copy = tuple(shape), hw_copy
        g = torch.Generator().manual_seed(seed)
        self.message = torch.randint(0, 2, (c, h // hw_copy, w // hw_copy), generator=g, dtype=torch.uint8)
        key = key or torch.randint(0, 256, (32,), generator=g, dtype=torch.uint8).numpy().tobytes()
        nonce = nonce or torch.randint(0, 256, (16,), generator=g, dtype=torch.uint8).numpy().tobytes()
        self.stream = chacha20_bits(key, nonce, c * h * w).view(c, h, w)

    @property
    def n_bits(self) -> int:
        return self.message.numel()

    def encrypted_bits(self) -> torch.Tensor:
        """The replicated message XOR the key stream, ``(C, H, W)`` uint8."""
        rep = self.message.repeat_interleave(self.hw_copy, 1).repeat_interleave(self.hw_copy, 2)
        return rep ^ self.stream

    def inject(self, z: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """A fresh watermarked latent ``(B, C, H, W)`` (``z`` gives batch shape and dtype only; the uniforms come
        from ``generator``): entry ``Φ⁻¹((u + bit) / 2)``, distributed N(0, 1) when the bits are uniform."""
        u = torch.rand(z.shape, generator=generator, dtype=torch.float64).clamp(1e-12, 1 - 1e-12)
        p = (u + self.encrypted_bits().double()) / 2
        return (math.sqrt(2) * torch.special.erfinv(2 * p - 1)).to(z.dtype)

    def extract(self, z_hat: torch.Tensor) -> torch.Tensor:
        """Majority-voted decrypted message ``(B, C, H/hw, W/hw)`` uint8 (ties -> 0) of latents ``(B, C, H, W)``."""
        bits = (z_hat > 0).to(torch.uint8) ^ self.stream
        b, c, h, w = bits.shape
        k = self.hw_copy
        votes = bits.view(b, c, h // k, k, w // k, k).float().mean((3, 5))
        return (votes > 0.5).to(torch.uint8)

    def score(self, z_hat: torch.Tensor) -> torch.Tensor:
        """Bit accuracy ``(B,)`` of the extracted message."""
        return (self.extract(z_hat) == self.message).flatten(1).float().mean(1)

    def threshold(self, fpr: float) -> float:
        """Bit accuracy ``tau / n`` with ``P(Binomial(n, 1/2) >= tau) <= fpr`` (a non-watermarked latent's votes are
        fair coins), ``n`` = message bits."""
        n = self.n_bits
        tail = 0.0
        for tau in range(n, -1, -1):
            tail += math.comb(n, tau) / 2**n
            if tail > fpr:
                return (tau + 1) / n
        return 0.0


class WIND:
    """WIND-style key set (*ours*): ``n_keys`` seeded N(0, I) latents; ``inject`` returns one of them per image."""

    def __init__(self, shape: tuple[int, int, int], n_keys: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.keys = torch.randn((n_keys, *shape), generator=g)

    def inject(self, z: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Key patterns ``(B, C, H, W)`` picked uniformly with ``generator``."""
        idx = torch.randint(0, len(self.keys), (len(z),), generator=generator)
        return self.keys[idx].to(z.dtype)

    def score(self, z_hat: torch.Tensor) -> torch.Tensor:
        """Highest cosine similarity ``(B,)`` to a key pattern."""
        a = torch.nn.functional.normalize(z_hat.flatten(1).float(), dim=1)
        k = torch.nn.functional.normalize(self.keys.flatten(1), dim=1)
        return (a @ k.T).max(1).values


def build_scheme(name: str, shape: tuple[int, int, int], seed: int, settings: dict | None = None):
    """A scheme of :data:`SCHEMES` for latents of ``shape`` with key ``seed``; ``settings``: ``radius`` (ring
    schemes, default ``ceil(10 * H / 64)``, at least 2), ``hw_copy`` (default 2), ``n_keys`` (default 64).

    Raises:
        ValueError: an unknown scheme.
    """
    s = settings or {}
    radius = int(s.get("radius") or max(2, math.ceil(10 * shape[1] / 64)))
    if name == "tree-ring":
        return TreeRing(shape, radius, seed)
    if name == "ringid":
        return RingID(shape, radius, seed)
    if name == "gaussian-shading":
        return GaussianShading(shape, int(s.get("hw_copy", 2)), seed)
    if name == "wind":
        return WIND(shape, int(s.get("n_keys", 64)), seed)
    raise ValueError(f"unknown watermark scheme {name!r}; one of {SCHEMES}")
