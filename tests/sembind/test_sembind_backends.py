"""The SD 2.1-style latent diffusion and DINOv2 backends on tiny random configurations: shapes, DDIM inversion in
latent space with gradients (the imprint attack), loading from diffusers / transformers folders, and one seed of the
evaluation grid run on them."""

import pytest
import torch
from diffusers import AutoencoderKL

from zoo.methods.sembind.backends import Dinov2Encoder, LatentCaptionDiffusion
from zoo.methods.sembind.datamodule import CaptionDataModule
from zoo.methods.sembind.evaluation import evaluate_seed
from zoo.methods.sembind.masker import SemanticMasker
from zoo.methods.sembind.module import load_stage
from zoo.methods.sembind.pipeline import DEMO_KEYS
from zoo.models import stand_ins


def tiny_sd(seed: int) -> LatentCaptionDiffusion:
    """The ``sd`` stand-in (4×8×8 latents, 16×16 images) as a generator, torch seed ``seed``."""
    return LatentCaptionDiffusion(*stand_ins.stable_diffusion_modules(seed), tokens=2).eval().requires_grad_(False)


def tiny_dinov2() -> Dinov2Encoder:
    return Dinov2Encoder(stand_ins.dinov2_model(2), image_size=16).eval().requires_grad_(False)


def test_latent_diffusion_shapes_inversion_gradient_and_folder(tmp_path):
    G = tiny_sd(0)
    assert G.latent_shape == (4, 8, 8) and G.image_size == 16
    z = torch.randn(2, *G.latent_shape)
    e = torch.randn(2, 384)
    x = G.sample(z, e, steps=2, guidance=2.0)
    assert x.shape == (2, 3, 16, 16) and x.abs().max() <= 1
    cover = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(G.invert(cover, steps=2).pow(2).sum(), cover)
    assert G.invert(x, 2).shape == (2, *G.latent_shape) and grad.abs().sum() > 0
    G.vae.save_pretrained(tmp_path / "vae")
    G.unet.save_pretrained(tmp_path / "unet")
    assert isinstance(load_stage(str(tmp_path), "generator"), LatentCaptionDiffusion)
    H = LatentCaptionDiffusion.from_pretrained(tmp_path, tokens=2)
    H.proj.load_state_dict(G.proj.state_dict())
    assert torch.allclose(H.eval().sample(z, e, 2, 2.0), x, atol=1e-5)
    with pytest.raises(ValueError, match="in_channels 4 != VAE latent_channels 3"):
        LatentCaptionDiffusion(AutoencoderKL(latent_channels=3, norm_num_groups=4, block_out_channels=(8,)), G.unet)


def test_dinov2_encoder_features_and_folder(tmp_path):
    enc = tiny_dinov2()
    x = torch.rand(3, 3, 32, 32)  # resized to 16 and normalised
    f = enc.features(x)
    assert f.shape == (3, enc.dim) == (3, 16)
    enc.model.save_pretrained(tmp_path)
    assert torch.allclose(Dinov2Encoder.from_pretrained(tmp_path, image_size=16).eval().features(x), f, atol=1e-6)
    assert load_stage(str(tmp_path), "encoder").dim == 16
    with pytest.raises(ValueError, match="not a multiple of the patch size 4"):
        Dinov2Encoder(enc.model, image_size=18)


def test_evaluation_grid_runs_on_the_paper_backends():
    """One seed of the grid with a tiny SD-style provider and proxy and a tiny DINOv2 encoder: watermarks and
    SemBind modulation act on the 4×8×8 latent, images are 16×16, thresholds come from held-out nulls."""
    dm = CaptionDataModule(dataset="cifar10", n_train=8)
    nets = {"generator": tiny_sd(0), "proxy": tiny_sd(1), "encoder": tiny_dinov2()}
    masker = SemanticMasker(16, hidden=16, proj_dim=8, n_bits=16, n_blocks=1).eval()
    settings = {
        "schemes": ["tree-ring", "gaussian-shading"],
        "ratios": [1.0],
        "attacks": ["reprompt", "imprint"],
        "attackers": ["proxy"],
        "distortions": ["jpeg"],
        "n_images": 3,
        "n_calibration": 4,
        "n_null": 4,
        "fpr": 0.25,
        "steps": 2,
        "imprint": {"eps": 8 / 255, "iters": 1, "inversion_steps": 1},
    }
    rows = evaluate_seed(masker, nets, dm, dict(DEMO_KEYS), settings, seed=0)["rows"]
    assert {(r["scheme"], r["defense"], r["attack"]) for r in rows} >= {
        ("tree-ring", "sembind", "imprint"),
        ("gaussian-shading", "plain", "reprompt"),
    }
    assert all(0 <= r["tpr"] <= 1 and 0 <= r["fpr"] <= 1 and 0 <= r["far"] <= 1 for r in rows)
