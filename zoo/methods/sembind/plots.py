"""SemBind's pictures: image grids, inverted Tree-Ring spectra, score histograms and the r curve (PNG)."""

from __future__ import annotations

from pathlib import Path

import torch

from zoo.methods.sembind.watermarks import build_scheme, centred_fft


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def image_grid(path: Path, rows: dict[str, torch.Tensor], n: int = 8) -> Path:
    """A grid PNG: one labelled row per entry of ``rows`` (images ``(N, 3, S, S)`` in ``[0, 1]``), ``n`` columns."""
    plt = _plt()
    fig, axes = plt.subplots(len(rows), n, figsize=(n * 0.9, len(rows) * 0.95), squeeze=False)
    for i, (label, x) in enumerate(rows.items()):
        for j in range(n):
            ax = axes[i][j]
            ax.axis("off")
            if j < len(x):
                ax.imshow(x[j].permute(1, 2, 0).clamp(0, 1).numpy(), interpolation="nearest")
        axes[i][0].set_title(label, fontsize=6, loc="left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_pngs(out: Path, first: dict, rows: list[dict], G, keys: dict, cfg: dict) -> list[Path]:
    """``grid.png`` (clean, marked, SemBind and forged images of the first seed), ``spectra.png`` (|FFT| of the
    Tree-Ring channel: key, un-inverted and inverted), ``histograms.png`` (scores: unmarked, marked, reprompted) and
    ``r_curve.png`` (TPR and FAR against r, mean over seeds; r = 0 is plain)."""
    plt = _plt()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    imgs = first["images"]
    r_top = max(cfg["ratios"]) if cfg["ratios"] else None
    pick = {"clean": imgs["clean"]}
    for name in cfg["schemes"]:
        for tag in (f"{name}/plain", f"{name}/sembind{r_top}"):
            for suffix in ("", "/reprompt", "/imprint"):
                if tag + suffix in imgs:
                    pick[tag + suffix] = imgs[tag + suffix]
    written = [image_grid(out / "grid.png", dict(list(pick.items())[:13]))]
    if "tree-ring" in cfg["schemes"] and "tree-ring/plain" in imgs:
        shape = G.latent_shape  # pixel generator (3, S, S) or Stable Diffusion latent (4, S/8, S/8)
        scheme = build_scheme("tree-ring", shape, keys["tree-ring"], cfg["watermark"])
        z_w = scheme.inject(torch.randn(1, *shape, generator=torch.Generator().manual_seed(0)))
        with torch.no_grad():
            inv = G.invert(imgs["tree-ring/plain"][:1] * 2 - 1, cfg["steps"])
        ch = scheme.channels[0]
        panels = {
            "key (disc)": scheme.key.abs(),
            "z_T marked": centred_fft(z_w)[0, ch].abs(),
            "inverted marked image": centred_fft(inv)[0, ch].abs(),
        }
        fig, axes = plt.subplots(1, 3, figsize=(7, 2.4))
        for ax, (label, f) in zip(axes, panels.items()):
            ax.imshow(f.log1p().numpy(), cmap="viridis")
            ax.set_title(label, fontsize=8)
            ax.axis("off")
        fig.tight_layout()
        fig.savefig(out / "spectra.png", dpi=120)
        plt.close(fig)
        written.append(out / "spectra.png")
    sc = first["scores"]
    fig, axes = plt.subplots(2, len(cfg["schemes"]), figsize=(3 * len(cfg["schemes"]), 4.5), squeeze=False)
    attacker = cfg["attackers"][0] if cfg["attackers"] else None
    for j, name in enumerate(cfg["schemes"]):
        for i, tag in enumerate((f"{name}/plain", f"{name}/sembind{r_top}")):
            if tag not in sc:
                continue
            ax = axes[i][j]
            ax.hist(sc[tag]["unmarked"], bins=12, alpha=0.6, label="unmarked")
            ax.hist(sc[tag]["marked"], bins=12, alpha=0.6, label="marked")
            if attacker and f"{tag}/reprompt/{attacker}" in sc:
                ax.hist(sc[f"{tag}/reprompt/{attacker}"], bins=12, alpha=0.6, label=f"reprompt ({attacker})")
            ax.axvline(sc[tag]["threshold"], color="k", lw=0.8)
            ax.set_title(tag, fontsize=8)
            ax.tick_params(labelsize=6)
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "histograms.png", dpi=120)
    plt.close(fig)
    written.append(out / "histograms.png")
    written.append(r_curve(out / "r_curve.png", rows, cfg["schemes"], cfg["ratios"], attacker))
    return written


def r_curve(path: Path, rows: list[dict], schemes: list[str], ratios: list[float], attacker: str | None) -> Path:
    """TPR (clean) and FAR (reprompt, imprint by ``attacker``) against the mask ratio r, mean over the rows' seeds;
    r = 0 is the plain scheme. One panel per scheme."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(schemes), figsize=(3 * len(schemes), 2.6), squeeze=False)
    for j, name in enumerate(schemes):
        ax = axes[0][j]
        for attack, style in (("none", "-o"), ("reprompt", "--s"), ("imprint", ":^")):
            xs, ys = [], []
            for r in [0.0, *ratios]:
                sel = [
                    row
                    for row in rows
                    if row["scheme"] == name
                    and row["attack"] == attack
                    and abs(row["r"] - r) < 1e-9
                    and (attack == "none" or row["attacker"] == attacker)
                ]
                if sel:
                    key = "tpr" if attack == "none" else "far"
                    xs.append(r)
                    ys.append(sum(row[key] for row in sel) / len(sel))
            if xs:
                ax.plot(xs, ys, style, label="TPR" if attack == "none" else f"FAR {attack} ({attacker})")
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("mask ratio r (0 = plain)", fontsize=7)
        ax.set_ylim(-0.05, 1.05)
        ax.tick_params(labelsize=6)
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
