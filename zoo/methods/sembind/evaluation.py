"""The evaluation grid: watermark schemes × {plain, SemBind r} × attacks × attackers for one seed (see
:mod:`pipeline` for the protocol). Rows per (scheme, defense, r, attack, attacker) with ``tpr`` (clean), ``fpr``
(unmarked images above the threshold), ``far`` (forgeries accepted; for ``attack = none`` equal to ``fpr``),
``auc``, ``tpr_<distortion>``, the mean forging-caption similarity (MiniLM cosine) and, for forgeries, the FAR of the
half with the more similar forging captions (``far_similar``) and of the other half (``far_dissimilar``).

Calibration: the threshold at the target FPR comes from ``n_calibration`` unmarked generations that are never
scored (:func:`watermarks.calibrate`); ``fpr`` and ``auc`` are measured on other unmarked images: the ``n_images``
clean generations of the scored captions plus ``n_null`` further ones. Both null sets use captions of the
evaluation half other than the scored ones and noise of their own seed stream (:func:`null_latents`).
"""

from __future__ import annotations

import torch
from torchmetrics.functional.classification import binary_auroc

from zoo.methods.sembind.datamodule import embed_captions
from zoo.methods.sembind.modulation import SemanticModulation
from zoo.methods.sembind.pipeline import (
    DISTORTIONS,
    codes,
    eval_settings,
    imprint,
    pick,
    test_halves,
    to_unit,
    verify_scores,
)
from zoo.methods.sembind.watermarks import GaussianShading, build_scheme, calibrate


def _share(flags: torch.Tensor) -> float | None:
    return float(flags.mean()) if len(flags) else None


def forging_partners(y: torch.Tensor, idx: torch.Tensor, seed: int) -> torch.Tensor:
    """For each test index in ``idx (n,)`` another test index whose class differs (when labels are known)."""
    g = torch.Generator().manual_seed(seed + 777)
    out = []
    for i in idx.tolist():
        while True:
            j = int(torch.randint(0, len(y), (1,), generator=g))
            if j != i and (y[i] < 0 or y[j] != y[i]):
                out.append(j)
                break
    return torch.tensor(out)


def null_latents(
    G, masker, enc, dm, captions: torch.Tensor, n: int, seed: int, steps: int, guidance: float, batch: int = 256
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` unmarked generations from captions drawn (with replacement) from the test indices ``captions``, with
    noise from ``torch.Generator(seed)``: their DDIM inversions ``(n, *G.latent_shape)`` and semantic codes
    ``(n, n_bits)``
    (``batch`` images at a time)."""
    g = torch.Generator().manual_seed(seed)
    chosen = captions[torch.randint(0, len(captions), (n,), generator=g)]
    z = torch.randn((n, *G.latent_shape), generator=g)
    inv, code = [], []
    for start in range(0, n, batch):
        part = chosen[start : start + batch].tolist()
        x = G.sample(
            z[start : start + batch],
            embed_captions([dm.test_set.captions[i] for i in part], dm.text_model),
            steps,
            guidance,
        )
        with torch.no_grad():
            inv.append(G.invert(x, steps))
        code.append(codes(masker, enc, x))
    return torch.cat(inv), torch.cat(code)


def evaluate_seed(
    masker, nets: dict, dm, keys: dict, settings: dict | None, seed: int, keep_images: bool = False
) -> dict:
    """One seed of the grid. Returns ``{"rows": [...], "scores": {...}, "images": {...}}`` (images only when
    ``keep_images``: clean, marked and forged ``(n, 3, S, S)`` in ``[0, 1]`` per scheme, for the PNG grids)."""
    cfg = eval_settings(settings)
    G, enc = nets["generator"], nets["encoder"]
    dm.setup()
    ts = dm.test_set
    pool = test_halves(len(ts.captions))[1]  # the masker trained on captions of the other half
    idx = pool[pick(cfg["n_images"], len(pool), seed)]
    fidx = forging_partners(ts.y, idx, seed)
    e = embed_captions([ts.captions[i] for i in idx.tolist()], dm.text_model)
    e_f = embed_captions([ts.captions[i] for i in fidx.tolist()], dm.text_model)
    sims = (e * e_f).sum(1)  # cosine of the forging caption to the original (unit-norm MiniLM)
    similar = sims >= sims.median()
    shape, side = G.latent_shape, G.image_size
    cover = torch.nn.functional.interpolate(ts.x[fidx], size=(side, side), mode="bilinear", antialias=True) * 2 - 1
    g = torch.Generator().manual_seed(seed)
    z = torch.randn((len(idx), *shape), generator=g)
    steps, fpr, imp = cfg["steps"], cfg["fpr"], cfg["imprint"]
    x_clean = G.sample(z, e, steps, cfg["guidance"])
    with torch.no_grad():
        inv_clean = G.invert(x_clean, steps)
    code_clean = codes(masker, enc, x_clean)
    others = pool[~torch.isin(pool, idx)]
    if len(others) == 0:
        raise ValueError(
            f"evaluation.n_images={cfg['n_images']} takes every caption of the test pool ({len(pool)}): none is left "
            "to condition the calibration and null generations; use more test images or fewer n_images"
        )
    inv_cal, code_cal = null_latents(
        G, masker, enc, dm, others, cfg["n_calibration"], seed + 10_000, steps, cfg["guidance"]
    )
    inv_null, code_null = null_latents(G, masker, enc, dm, others, cfg["n_null"], seed + 20_000, steps, cfg["guidance"])
    inv_null, code_null = torch.cat([inv_clean, inv_null]), torch.cat([code_clean, code_null])
    rows, scores, images = [], {}, {"clean": to_unit(x_clean)} if keep_images else {}
    for name in cfg["schemes"]:
        scheme = build_scheme(name, shape, keys[name], cfg["watermark"])
        z_w = scheme.inject(z, g)
        x_pilot = G.sample(z_w, e, steps, cfg["guidance"])
        m = codes(masker, enc, x_pilot)
        defenses = [("plain", 0.0, None, x_pilot)]
        for r in cfg["ratios"]:
            mod = SemanticModulation(shape, masker.n_bits, float(r), keys["sembind"])
            defenses.append(("sembind", float(r), mod, G.sample(mod(z_w, m), e, steps, cfg["guidance"])))
        for defense, r, mod, x in defenses:

            def verify(images_: torch.Tensor, mod=mod, scheme=scheme) -> torch.Tensor:
                with torch.no_grad():
                    z_hat = G.invert(images_, steps)
                return verify_scores(scheme, z_hat, mod, None if mod is None else codes(masker, enc, images_))

            null = verify_scores(scheme, inv_null, mod, None if mod is None else code_null)
            tau, fpr_measured = calibrate(
                verify_scores(scheme, inv_cal, mod, None if mod is None else code_cal), null, fpr
            )
            pos = verify(x)
            labels = torch.cat([torch.ones(len(pos)), torch.zeros(len(null))]).long()
            base = {
                "seed": seed,
                "scheme": name,
                "defense": defense,
                "r": r,
                "tpr": float((pos > tau).float().mean()),
                "fpr": fpr_measured,
                "auc": float(binary_auroc(torch.cat([pos, null]), labels)),
                "threshold": tau,
                "similarity": float(sims.mean()),
            }
            if isinstance(scheme, GaussianShading):
                base["binomial_threshold"] = scheme.threshold(fpr)
            if mod is not None:
                base["pilot_final_hamming"] = float((m != codes(masker, enc, x)).float().mean())
            for d in cfg["distortions"]:
                base[f"tpr_{d}"] = float((verify(DISTORTIONS[d](x)) > tau).float().mean())
            rows.append({**base, "attack": "none", "attacker": "none", "far": fpr_measured})
            tag = f"{name}/{defense}{'' if mod is None else r}"
            scores[tag] = {"marked": pos.tolist(), "unmarked": null.tolist(), "threshold": tau}
            for who in cfg["attackers"]:
                A = nets["proxy"] if who == "proxy" else G
                with torch.no_grad():
                    z_a = A.invert(x, steps)
                for attack in cfg["attacks"]:
                    if attack == "reprompt":
                        x_f = A.sample(z_a, e_f, steps, cfg["guidance"])
                    else:
                        with torch.no_grad():
                            target = A.invert(x, imp["inversion_steps"])
                        x_f = imprint(A, cover, target, imp["eps"], imp["iters"], imp["inversion_steps"])
                    forged = verify(x_f)
                    scores[f"{tag}/{attack}/{who}"] = forged.tolist()
                    acc = (forged > tau).float()
                    rows.append(
                        {
                            **base,
                            "attack": attack,
                            "attacker": who,
                            "far": float(acc.mean()),
                            "far_similar": _share(acc[similar]),
                            "far_dissimilar": _share(acc[~similar]),
                        }
                    )
                    if keep_images and who == cfg["attackers"][0]:
                        images[f"{tag}/{attack}"] = to_unit(x_f)
            if keep_images:
                images[tag] = to_unit(x)
    return {"rows": rows, "scores": scores, "images": images}


def evaluate(masker, nets: dict, dm, keys: dict, settings: dict | None, out=None) -> dict:
    """Every seed of ``settings["seeds"]``; writes PNGs into ``out`` when given (:mod:`render`) and returns
    ``{"rows", "seeds", "settings", "thresholds"}`` (``thresholds``: per scheme, the first seed's SemBind threshold
    at ``predict_r``, the one ``zoo predict`` uses)."""
    cfg = eval_settings(settings)
    rows, first = [], None
    for k, seed in enumerate(cfg["seeds"]):
        res = evaluate_seed(masker, nets, dm, keys, cfg, int(seed), keep_images=k == 0 and out is not None)
        rows += res["rows"]
        first = first or res
    if out is not None:
        from zoo.methods.sembind.plots import write_pngs

        write_pngs(out, first, rows, nets["generator"], keys, cfg)
    thresholds = {}
    for name in cfg["schemes"]:
        match = [
            r
            for r in rows
            if r["scheme"] == name
            and r["attack"] == "none"
            and r["defense"] == "sembind"
            and abs(r["r"] - cfg["predict_r"]) < 1e-9
        ]
        if match:
            thresholds[name] = match[0]["threshold"]
    return {"rows": rows, "seeds": list(cfg["seeds"]), "settings": cfg, "thresholds": thresholds}
