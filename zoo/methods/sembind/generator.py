"""The caption-conditioned pixel diffusion model of the CPU reproduction (*ours*; the paper uses Stable Diffusion
2.1): a diffusers ``UNet2DModel`` whose class embedding is a projected MiniLM caption embedding (a learned null
embedding replaces 10 % of captions in training, for classifier-free guidance), DDIM sampling and DDIM inversion
(``DDIMScheduler`` / ``DDIMInverseScheduler``, eta = 0, predicted ``x_0`` clipped to ``[-1, 1]``, inversion with the null caption as Tree-Ring does with
the empty prompt). Images live in ``[-1, 1]``; the initial noise ``z_T`` has the image's shape ``(3, S, S)``.
"""

from __future__ import annotations

import torch
from torch import nn

TEXT_DIM = 384


class CaptionDiffusion(nn.Module):
    """``eps_theta(x_t, t, e)``: UNet2DModel + projection of caption embeddings ``e (B, 384)`` to its time width.

    Args:
        size: image side ``S``.
        widths: ``block_out_channels`` (one down/up block per entry, no attention).
        layers_per_block: residual blocks per level.
        norm_groups: GroupNorm groups (must divide every width).
        train_steps: DDPM timesteps (linear betas 1e-4..0.02).
    """

    def __init__(
        self,
        size: int = 16,
        widths: tuple[int, ...] = (32, 64, 64),
        layers_per_block: int = 1,
        norm_groups: int = 8,
        train_steps: int = 1000,
    ):
        super().__init__()
        from diffusers import UNet2DModel

        widths = tuple(int(w) for w in widths)
        self.size, self.train_steps = int(size), int(train_steps)
        self.latent_shape, self.image_size = (3, self.size, self.size), self.size  # pixel space: z_T is image-shaped
        self.unet = UNet2DModel(
            sample_size=self.size,
            in_channels=3,
            out_channels=3,
            block_out_channels=widths,
            layers_per_block=layers_per_block,
            down_block_types=("DownBlock2D",) * len(widths),
            up_block_types=("UpBlock2D",) * len(widths),
            class_embed_type="identity",
            norm_num_groups=norm_groups,
        )
        self.proj = nn.Sequential(
            nn.Linear(TEXT_DIM, 4 * widths[0]), nn.SiLU(), nn.Linear(4 * widths[0], 4 * widths[0])
        )
        self.null = nn.Parameter(torch.zeros(TEXT_DIM))

    def forward(self, x: torch.Tensor, t: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """Predicted noise ``(B, 3, S, S)`` of ``x_t (B, 3, S, S)`` at timesteps ``t (B,)`` given ``e (B, 384)``."""
        return self.unet(x, t, class_labels=self.proj(e)).sample

    def null_like(self, e: torch.Tensor) -> torch.Tensor:
        """The learned null caption embedding repeated to ``e``'s batch."""
        return self.null.expand(len(e), -1)

    def schedulers(self, steps: int):
        """``(DDIMScheduler, DDIMInverseScheduler)`` set to ``steps`` inference steps."""
        from diffusers import DDIMInverseScheduler, DDIMScheduler

        # clip_sample: the predicted x_0 is clipped to [-1, 1] at every step (diffusers' pixel-space default); without
        # it an under-trained model's samples leave [-1, 1] by an order of magnitude and clamping the final image
        # loses more of z_T than the clipped trajectory does
        kw = {"num_train_timesteps": self.train_steps, "clip_sample": True, "set_alpha_to_one": False}
        fwd, inv = DDIMScheduler(**kw), DDIMInverseScheduler(**kw)
        fwd.set_timesteps(steps)
        inv.set_timesteps(steps)
        return fwd, inv

    def training_loss(self, x0: torch.Tensor, e: torch.Tensor, p_null: float = 0.1) -> torch.Tensor:
        """DDPM epsilon-prediction MSE on ``x0 (B, 3, S, S)`` in ``[-1, 1]``, a fraction ``p_null`` of captions
        replaced by the null embedding."""
        from diffusers import DDPMScheduler

        sched = DDPMScheduler(num_train_timesteps=self.train_steps)
        noise = torch.randn_like(x0)
        t = torch.randint(0, self.train_steps, (len(x0),), device=x0.device)
        drop = torch.rand(len(x0), device=x0.device) < p_null
        e = torch.where(drop[:, None], self.null_like(e), e)
        return (self(sched.add_noise(x0, noise, t), t, e) - noise).pow(2).mean()

    @torch.no_grad()
    def sample(self, z_T: torch.Tensor, e: torch.Tensor, steps: int = 10, guidance: float = 2.0) -> torch.Tensor:
        """DDIM (eta 0) from ``z_T (B, 3, S, S)`` with caption embeddings ``e (B, 384)`` and CFG scale ``guidance``;
        returns images ``(B, 3, S, S)`` clamped to ``[-1, 1]``."""
        fwd, _ = self.schedulers(steps)
        x = z_T
        for t in fwd.timesteps:
            tt = t.expand(len(x)).to(x.device)
            eps = self(x, tt, e)
            if guidance != 1.0:
                eps_null = self(x, tt, self.null_like(e))
                eps = eps_null + guidance * (eps - eps_null)
            x = fwd.step(eps, t, x).prev_sample
        return x.clamp(-1, 1)

    def invert(self, x0: torch.Tensor, steps: int = 10) -> torch.Tensor:
        """DDIM inversion of images ``x0 (B, 3, S, S)`` in ``[-1, 1]`` to ``z_T`` with the null caption; keeps the
        graph when gradients are enabled (the imprint attack differentiates through it)."""
        _, inv = self.schedulers(steps)
        x = x0
        null = self.null.expand(len(x), -1)
        for t in inv.timesteps:
            x = inv.step(self(x, t.expand(len(x)).to(x.device), null), t, x).prev_sample
        return x
