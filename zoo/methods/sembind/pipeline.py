"""SemBind's generation, verification and forgery pipeline (notes §1.4; the protocol is reconstructed: *ours*).

Generation (provider ``G``, caption embedding ``e``): ``z_w = WM(z)``; plain: ``x = G(e, z_w)``; SemBind: pilot
``x_p = G(e, z_w)``, code ``m = f(x_p)``, ``x = G(e, Mod_m(z_w))``. Verification of ``x'``: ``ẑ = G⁻¹(x')`` (DDIM
inversion, null caption); plain: ``score(ẑ)``; SemBind: ``score(Mod_{f(x')}(ẑ))``. The threshold at ``fpr``
comes from ``n_calibration`` held-out unmarked generations; TPR, the measured FPR and AUC are on other images.

Forgery by an attacker ``A`` (the proxy, or the provider's own model as the worst case; Müller et al. 2024):
``reprompt``: ``x_f = A(e_f, A⁻¹(x))`` with another test caption ``e_f``; ``imprint``: a real cover image ``x_c``
of the forging caption moved by PGD (L∞ ``eps``) until its ``k``-step inversion ``A⁻¹_k(x_c + δ)`` matches
``A⁻¹_k(x)``. FAR = share of forgeries scoring above the threshold.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from zoo.core.data import DataError
from zoo.methods.sembind.masker import train_masker
from zoo.methods.sembind.modulation import SemanticModulation
from zoo.methods.sembind.watermarks import SCHEMES, build_scheme

DEMO_KEYS = {"tree-ring": 101, "gaussian-shading": 202, "ringid": 303, "wind": 404, "sembind": 505}
"""Public demo keys (seeds): anyone can forge images marked with them. ``model.key_file`` takes your own."""
EVAL_DEFAULTS = {
    "schemes": list(SCHEMES),
    "ratios": [0.25, 0.5, 1.0],
    "attacks": ["reprompt", "imprint"],
    "attackers": ["proxy", "provider"],
    "distortions": ["jpeg", "blur", "noise", "crop"],
    "n_images": 16,
    "n_calibration": 512,
    "n_null": 512,
    "n_captions": 48,
    "n_per_caption": 4,
    "steps": 10,
    "guidance": 2.0,
    "seeds": [0, 1, 2],
    "fpr": 0.01,
    "predict_r": 0.5,
    "watermark": {},
    "imprint": {"eps": 8 / 255, "iters": 5, "inversion_steps": 5},
}


def eval_settings(overrides: dict | None) -> dict:
    """:data:`EVAL_DEFAULTS` updated with ``overrides``.

    Raises:
        ValueError: an unknown key, scheme, attack or attacker.
    """
    o = dict(overrides or {})
    unknown = sorted(set(o) - set(EVAL_DEFAULTS))
    if unknown:
        raise ValueError(f"model.evaluation: unknown keys {unknown}; choose from {sorted(EVAL_DEFAULTS)}")
    cfg = {**EVAL_DEFAULTS, **o, "imprint": {**EVAL_DEFAULTS["imprint"], **(o.get("imprint") or {})}}
    for key, allowed in (
        ("schemes", SCHEMES),
        ("attacks", ("reprompt", "imprint")),
        ("attackers", ("proxy", "provider")),
        ("distortions", DISTORTIONS),
    ):
        bad = sorted(set(cfg[key]) - set(allowed))
        if bad:
            raise ValueError(f"model.evaluation.{key}: unknown {bad}; choose from {list(allowed)}")
    return cfg


def load_keys(key_file: str | None) -> dict[str, int]:
    """Watermark keys: :data:`DEMO_KEYS`, or a JSON file mapping every scheme and ``sembind`` to an integer seed.

    Raises:
        DataError: unreadable JSON, a missing scheme or a non-integer key (naming the file and key).
    """
    if key_file is None:
        return dict(DEMO_KEYS)
    try:
        doc = json.loads(Path(key_file).read_text())
    except (OSError, ValueError) as e:
        raise DataError(f"{key_file}: not a readable JSON key file ({e})") from None
    for k in DEMO_KEYS:
        if not isinstance(doc.get(k), int):
            raise DataError(f"{key_file}: key {k!r} must be an integer seed (keys: {sorted(DEMO_KEYS)})")
    return {k: doc[k] for k in DEMO_KEYS}


def to_unit(x: torch.Tensor) -> torch.Tensor:
    """Images from ``[-1, 1]`` to ``[0, 1]``."""
    return (x.clamp(-1, 1) + 1) / 2


@torch.no_grad()
def codes(masker, encoder, x: torch.Tensor) -> torch.Tensor:
    """Semantic codes ``(B, n_bits)`` of generator-space images ``x (B, 3, S, S)`` in ``[-1, 1]``."""
    return masker.code(encoder.features(to_unit(x)))


# ---- distortions (robustness) ----------------------------------------------------------------------------------
def _jpeg(x: torch.Tensor, quality: int = 50) -> torch.Tensor:
    from PIL import Image

    out = []
    for img in (to_unit(x) * 255).round().byte().permute(0, 2, 3, 1).numpy():
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format="JPEG", quality=quality)
        out.append(torch.from_numpy(np.array(Image.open(buf).convert("RGB"))).permute(2, 0, 1))
    return torch.stack(out).float() / 127.5 - 1


def _blur(x: torch.Tensor) -> torch.Tensor:
    k = torch.tensor([1.0, 2.0, 1.0])
    k = (k[:, None] * k[None, :] / 16).expand(3, 1, 3, 3)
    return F.conv2d(F.pad(x, (1, 1, 1, 1), mode="replicate"), k, groups=3)


def _crop(x: torch.Tensor) -> torch.Tensor:
    s = x.shape[-1]
    c = max(1, s // 8)
    return F.interpolate(x[..., c : s - c, c : s - c], size=(s, s), mode="bilinear", align_corners=False)


DISTORTIONS = {
    "jpeg": _jpeg,
    "blur": _blur,
    "crop": _crop,
    "noise": lambda x: (x + 0.1 * torch.randn(x.shape, generator=torch.Generator().manual_seed(0))).clamp(-1, 1),
}
"""JPEG quality 50; 3×3 binomial blur; Gaussian noise σ 0.05 in [0, 1] units; centre crop of 3/4 resized back."""


# ---- masker training -------------------------------------------------------------------------------------------
def pick(n: int, total: int, seed: int) -> torch.Tensor:
    """``n`` distinct indices of ``range(total)`` drawn with ``seed`` (all when ``n >= total``)."""
    return torch.randperm(total, generator=torch.Generator().manual_seed(seed))[:n]


def test_halves(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed seeded split of ``range(n)`` test indices: ``(masker half, evaluation half)`` (the test split is
    class-sorted, so a plain cut would split classes)."""
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(12_345))
    return perm[: n // 2], perm[n // 2 :]


def train_masker_on_generations(
    masker, generator, encoder, dm, masker_cfg: dict | None, settings: dict | None
) -> dict[str, float]:
    """Generate ``n_per_caption`` images for each of ``n_captions`` captions of the masker half of the test split
    (:func:`test_halves`; evaluation draws from the other half), train the masker on their encoder features grouped
    by caption, and return its statistics (losses, intra/inter Hamming on the training codes)."""
    from zoo.methods.sembind.datamodule import embed_captions

    cfg = eval_settings(settings)
    dm.setup()
    idx = test_halves(len(dm.test_set.captions))[0][pick(cfg["n_captions"], len(dm.test_set.captions) // 2, 10_000)]
    caps = [dm.test_set.captions[i] for i in idx.tolist()]
    e = embed_captions(caps, dm.text_model).repeat_interleave(cfg["n_per_caption"], 0)
    labels = torch.arange(len(caps)).repeat_interleave(cfg["n_per_caption"])
    g = torch.Generator().manual_seed(10_001)
    z = torch.randn((len(e), *generator.latent_shape), generator=g)
    x = generator.sample(z, e, cfg["steps"], cfg["guidance"])
    with torch.no_grad():
        feats = encoder.features(to_unit(x))
    return train_masker(masker, feats, labels, masker_cfg)


# ---- verification and attacks ----------------------------------------------------------------------------------
def verify_scores(
    scheme, z_hat: torch.Tensor, mod: SemanticModulation | None = None, code: torch.Tensor | None = None
) -> torch.Tensor:
    """Detector scores ``(B,)`` of inverted latents ``z_hat (B, C, H, W)``: plain, or demodulated by ``code``."""
    return scheme.score(z_hat if mod is None else mod(z_hat, code))


def imprint(attacker, cover: torch.Tensor, target: torch.Tensor, eps: float, iters: int, steps: int) -> torch.Tensor:
    """Imprint forgery: PGD with signed gradients on ``cover (B, 3, S, S)`` in ``[-1, 1]`` within L∞ ``eps`` (in
    ``[0, 1]`` units) so that ``attacker.invert(cover + δ, steps)`` approaches ``target (B, 3, S, S)`` (MSE)."""
    eps2 = 2 * eps  # [0, 1] units -> [-1, 1]
    delta = torch.zeros_like(cover, requires_grad=True)
    step = eps2 / max(1, iters) * 2.5
    for _ in range(iters):
        with torch.enable_grad():
            loss = (attacker.invert((cover + delta).clamp(-1, 1), steps) - target).pow(2).mean()
            (grad,) = torch.autograd.grad(loss, delta)
        with torch.no_grad():
            delta -= step * grad.sign()
            delta.clamp_(-eps2, eps2)
    return (cover + delta.detach()).clamp(-1, 1)


# ---- zoo predict -----------------------------------------------------------------------------------------------
def _read_image(path: str, size: int) -> torch.Tensor:
    from PIL import Image

    try:
        with Image.open(path) as im:
            arr = np.asarray(im.convert("RGB").resize((size, size), Image.BILINEAR), dtype=np.float32)
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: not a readable image ({e}); nothing written") from None
    return torch.from_numpy(arr).permute(2, 0, 1)[None] / 127.5 - 1


def predict(module, inputs: list[str], out_dir: str | None) -> dict:
    """Captions -> one SemBind-marked PNG per scheme (``r = predict_r``) in ``out_dir`` (``generated``: caption,
    scheme, file, size, r); image files -> each scheme's SemBind score, threshold (the package's, at the evaluation's
    FPR; ``None`` when it has none) and whether the score passes it (``verified``: image, scheme, score, threshold,
    watermarked). Inputs are checked first: an existing file that is not a readable image, or a missing path with an
    image suffix, fails before anything is written.

    Raises:
        DataError: see above.
    """
    from zoo.data.images import IMAGE_SUFFIXES
    from zoo.methods.sembind.datamodule import embed_captions

    nets = module.networks()
    G, enc, masker = nets["generator"], nets["encoder"], module.masker
    cfg, keys = eval_settings(module.hparams.evaluation), load_keys(module.hparams.key_file)
    shape = G.latent_shape  # (3, S, S) for the pixel generator, (4, S/8, S/8) for a Stable Diffusion backend
    mod = SemanticModulation(shape, masker.n_bits, cfg["predict_r"], keys["sembind"])
    loaded = {}
    for inp in inputs:
        p = Path(inp)
        if p.is_dir():
            raise DataError(f"{inp}: a folder, not an image file or a caption; nothing written")
        if p.is_file() or p.suffix.lower() in IMAGE_SUFFIXES:
            if not p.is_file():
                raise DataError(f"{inp}: no such image file; nothing written")
            loaded[inp] = _read_image(inp, G.image_size)
    verified, generated = [], []
    for inp, x in loaded.items():
        with torch.no_grad():
            z_hat = G.invert(x, cfg["steps"])
        code = codes(masker, enc, x)
        for _k, name in enumerate(cfg["schemes"]):
            scheme = build_scheme(name, shape, keys[name], cfg["watermark"])
            s = float(scheme.score(mod(z_hat, code)))
            tau = float(module.thresholds[list(SCHEMES).index(name)])
            verified.append(
                {
                    "image": Path(inp).name,
                    "scheme": name,
                    "score": s,
                    "threshold": None if math.isnan(tau) else tau,
                    "watermarked": None if math.isnan(tau) else bool(s > tau),
                }
            )
    captions = [c for c in inputs if c not in loaded]
    if captions:
        from PIL import Image

        out = Path(out_dir or ".")
        out.mkdir(parents=True, exist_ok=True)
        e = embed_captions(captions)
        z = torch.randn((len(captions), *shape), generator=torch.Generator().manual_seed(0))
        for name in cfg["schemes"]:
            z_w = build_scheme(name, shape, keys[name], cfg["watermark"]).inject(z, torch.Generator().manual_seed(1))
            m = codes(masker, enc, G.sample(z_w, e, cfg["steps"], cfg["guidance"]))
            x = to_unit(G.sample(mod(z_w, m), e, cfg["steps"], cfg["guidance"]))
            for i, c in enumerate(captions):
                slug = "".join(ch if ch.isalnum() else "-" for ch in c.lower()).strip("-")[:40]
                png = out / f"sembind-{slug}-{name}.png"
                Image.fromarray((x[i].permute(1, 2, 0) * 255).round().byte().numpy()).save(png)
                generated.append(
                    {"caption": c, "scheme": name, "wrote": str(png), "size": G.image_size, "r": cfg["predict_r"]}
                )
    return {"verified": verified, "generated": generated}


def predict_text(prediction: dict) -> str:
    """:func:`predict`'s records as the lines ``zoo predict`` prints (tab-separated, one per image or PNG and
    scheme)."""
    verdict = {None: "n/a (no threshold)", True: "watermarked", False: "not watermarked"}
    lines = [
        f"{v['image']}\t{v['scheme']}\tscore {v['score']:.4f}\tthreshold "
        f"{float('nan') if v['threshold'] is None else v['threshold']:.4f}\t{verdict[v['watermarked']]}"
        for v in prediction["verified"]
    ]
    return "\n".join(
        lines
        + [
            f"{g['caption']}\t{g['scheme']}\twrote {g['wrote']} ({g['size']}x{g['size']}, SemBind r={g['r']})"
            for g in prediction["generated"]
        ]
    )
