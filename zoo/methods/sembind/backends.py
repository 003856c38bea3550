"""The paper-scale backends of the generator and encoder stages (notes §1.5): Stable Diffusion 2.1-style latent
diffusion and a DINOv2 encoder, behind the same interfaces as :class:`generator.CaptionDiffusion` and
:class:`encoder.SemanticEncoder`, so :func:`evaluate.evaluate_seed` runs on either.

- :class:`LatentCaptionDiffusion`: diffusers ``AutoencoderKL`` + ``UNet2DConditionModel`` with SD's DDIM schedule
  (``scaled_linear`` betas 0.00085..0.012, ``steps_offset`` 1, no sample clipping); the watermark lives in the VAE
  latent ``z_T (C, h, w)`` (4×64×64 for SD 2.1-base at 512 px), images are ``(3, H, W)`` in ``[-1, 1]``. Sampling
  decodes the final latent; inversion encodes the image (posterior mean) and runs DDIM inversion with the null
  caption, as Tree-Ring does with the empty prompt.
- :class:`Dinov2Encoder`: transformers ``Dinov2Model``; images are resized to ``image_size`` (a multiple of the
  patch size, 224 for DINOv2), normalised with ImageNet statistics, and the features are the pooled CLS token
  (``pooler_output``, 1536-d for DINOv2-Giant).

*Ours*: the UNet is conditioned on the zoo's caption embeddings ``e (B, 384)`` (MiniLM) through a learned projection to
``tokens`` cross-attention tokens, not on SD's OpenCLIP text encoder, so a pretrained SD 2.1 UNet would need that
projection fitted (or the pipeline's caption embedding swapped for OpenCLIP's hidden states) before its generations
follow the captions. No SD 2.1 or DINOv2-Giant weights are available here (no hub access): both classes load a local
diffusers / transformers folder (``from_pretrained``) and are exercised on tiny random configurations
(``tests/sembind/test_sembind_backends.py``).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from zoo.methods.sembind.generator import TEXT_DIM

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
SD_SCHEDULE = {
    "beta_schedule": "scaled_linear",
    "beta_start": 0.00085,
    "beta_end": 0.012,
    "steps_offset": 1,
    "clip_sample": False,
    "set_alpha_to_one": False,
}
"""Stable Diffusion 2.1-base's DDIM settings (its ``scheduler_config.json``; epsilon prediction at 512 px)."""


class LatentCaptionDiffusion(nn.Module):
    """``eps_theta(z_t, t, e)`` on VAE latents: ``UNet2DConditionModel`` with caption embeddings projected to
    cross-attention tokens.

    Args:
        vae: diffusers ``AutoencoderKL`` (its ``scaling_factor`` scales latents, 0.18215 for SD).
        unet: diffusers ``UNet2DConditionModel`` with ``in_channels`` = the VAE's ``latent_channels``.
        tokens: cross-attention tokens made from one caption embedding.
        train_steps: DDPM timesteps of the UNet's schedule (1000 for SD).
        prediction_type: ``"epsilon"`` (SD 2.1-base) or ``"v_prediction"`` (SD 2.1 at 768 px).
    Raises:
        ValueError: the UNet's input channels differ from the VAE's latent channels.
    """

    def __init__(self, vae, unet, tokens: int = 1, train_steps: int = 1000, prediction_type: str = "epsilon"):
        super().__init__()
        if unet.config.in_channels != vae.config.latent_channels:
            raise ValueError(
                f"UNet in_channels {unet.config.in_channels} != VAE latent_channels {vae.config.latent_channels}"
            )
        self.vae, self.unet = vae, unet
        self.tokens, self.train_steps, self.prediction_type = int(tokens), int(train_steps), prediction_type
        side = int(unet.config.sample_size)
        self.latent_shape = (int(unet.config.in_channels), side, side)
        self.image_size = side * 2 ** (len(vae.config.block_out_channels) - 1)
        self.scaling = float(vae.config.scaling_factor)
        width = int(unet.config.cross_attention_dim)
        self.proj = nn.Linear(TEXT_DIM, self.tokens * width)
        self.null = nn.Parameter(torch.zeros(TEXT_DIM))

    @classmethod
    def from_pretrained(cls, folder: str | Path, **kwargs) -> LatentCaptionDiffusion:
        """A diffusers Stable Diffusion folder's ``vae/`` and ``unet/`` subfolders (e.g. a local copy of
        ``stabilityai/stable-diffusion-2-1-base``); ``kwargs`` go to the constructor."""
        from diffusers import AutoencoderKL, UNet2DConditionModel

        folder = Path(folder)
        return cls(
            AutoencoderKL.from_pretrained(folder / "vae"),
            UNet2DConditionModel.from_pretrained(folder / "unet"),
            **kwargs,
        )

    def forward(self, z: torch.Tensor, t: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """The UNet's prediction ``(B, C, h, w)`` at latents ``z`` and timesteps ``t (B,)`` given ``e (B, 384)``."""
        cond = self.proj(e).view(len(e), self.tokens, -1)
        return self.unet(z, t, encoder_hidden_states=cond).sample

    def null_like(self, e: torch.Tensor) -> torch.Tensor:
        """The null caption embedding repeated to ``e``'s batch."""
        return self.null.expand(len(e), -1)

    def schedulers(self, steps: int):
        """``(DDIMScheduler, DDIMInverseScheduler)`` with :data:`SD_SCHEDULE`, set to ``steps`` inference steps."""
        from diffusers import DDIMInverseScheduler, DDIMScheduler

        kw = {"num_train_timesteps": self.train_steps, "prediction_type": self.prediction_type, **SD_SCHEDULE}
        fwd, inv = DDIMScheduler(**kw), DDIMInverseScheduler(**kw)
        fwd.set_timesteps(steps)
        inv.set_timesteps(steps)
        return fwd, inv

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Images ``(B, 3, H, W)`` in ``[-1, 1]`` of latents ``z (B, C, h, w)``."""
        return self.vae.decode(z / self.scaling).sample.clamp(-1, 1)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Scaled posterior-mean latents ``(B, C, h, w)`` of images ``x (B, 3, H, W)`` in ``[-1, 1]``."""
        return self.vae.encode(x).latent_dist.mean * self.scaling

    @torch.no_grad()
    def sample(self, z_T: torch.Tensor, e: torch.Tensor, steps: int = 50, guidance: float = 7.5) -> torch.Tensor:
        """DDIM (eta 0) from ``z_T (B, C, h, w)`` with CFG scale ``guidance``; returns decoded images."""
        fwd, _ = self.schedulers(steps)
        z = z_T
        for t in fwd.timesteps:
            tt = t.expand(len(z)).to(z.device)
            eps = self(z, tt, e)
            if guidance != 1.0:
                eps_null = self(z, tt, self.null_like(e))
                eps = eps_null + guidance * (eps - eps_null)
            z = fwd.step(eps, t, z).prev_sample
        return self.decode(z)

    def invert(self, x0: torch.Tensor, steps: int = 50) -> torch.Tensor:
        """``z_T (B, C, h, w)`` of images ``x0`` by VAE encoding and DDIM inversion with the null caption; keeps the
        graph when gradients are enabled (the imprint attack differentiates through it)."""
        _, inv = self.schedulers(steps)
        z = self.encode(x0)
        null = self.null.expand(len(z), -1)
        for t in inv.timesteps:
            z = inv.step(self(z, t.expand(len(z)).to(z.device), null), t, z).prev_sample
        return z


class Dinov2Encoder(nn.Module):
    """Frozen DINOv2 features of images in ``[0, 1]``.

    Args:
        model: transformers ``Dinov2Model``.
        image_size: side the images are resized to (a multiple of the patch size; 224 as in DINOv2's evaluation).
    Raises:
        ValueError: ``image_size`` is not a multiple of the patch size.
    """

    def __init__(self, model, image_size: int = 224):
        super().__init__()
        patch = int(model.config.patch_size)
        if image_size % patch:
            raise ValueError(f"image_size {image_size} is not a multiple of the patch size {patch}")
        self.model, self.image_size, self.dim = model, int(image_size), int(model.config.hidden_size)
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

    @classmethod
    def from_pretrained(cls, folder: str | Path, image_size: int = 224) -> Dinov2Encoder:
        """A local transformers folder of a DINOv2 model (e.g. a copy of ``facebook/dinov2-giant``)."""
        from transformers import Dinov2Model

        return cls(Dinov2Model.from_pretrained(folder), image_size)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Pooled CLS features ``(B, dim)`` of images ``x (B, 3, S, S)`` in ``[0, 1]``."""
        if x.shape[-1] != self.image_size:
            x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bicubic", antialias=True)
        return self.model(pixel_values=(x - self.mean) / self.std).pooler_output
