"""Saliency throughput: our benchmark loop (``saliency.saliency_maps``) against captum called directly.

Same model (the recipe's zero-padded VGG, depth 8, width 16, on 3×64×64 canvases), same batch, same targets, same
attribution settings. Our side includes what the benchmark adds around captum: eval mode, batching, the input
copy with ``requires_grad`` and the channel reduction to a pixel map. The captum side is ``Saliency(model)
.attribute(x, target=t, abs=False)`` (and ``IntegratedGradients(...).attribute(x, baselines=0.0, target=t,
n_steps=...)``) on the whole batch. Repeats are interleaved so background load hits both sides alike; the ratio is of
the median images/s.

    python benchmarks/saliency_bias.py [--batch-size 64] [--repeats 7] [--ig-steps 16]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from zoo.core.results import write_result
from zoo.methods.saliency_bias.experiments import OUR_METRIC
from zoo.methods.saliency_bias.saliency import saliency_maps
from zoo.models.vision import build_vision_model


def _rate(fn, n: int) -> float:
    start = time.perf_counter()
    fn()
    return n / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--ig-steps", type=int, default=16)
    args = ap.parse_args(argv)
    from captum.attr import IntegratedGradients, Saliency

    torch.manual_seed(0)
    model = build_vision_model("vgg", 3, 10, 64, depth=8, width=16, padding_mode="zeros").eval()
    x = torch.randn(args.batch_size, 3, 64, 64)
    t = torch.randint(0, 10, (args.batch_size,))
    sides = {
        "gradient": (
            lambda: saliency_maps(model, x, t, "gradient", batch_size=args.batch_size),
            lambda: Saliency(model).attribute(x.clone().requires_grad_(True), target=t, abs=False),
        ),
        "integrated_gradients": (
            lambda: saliency_maps(
                model, x, t, "integrated_gradients", batch_size=args.batch_size, ig_steps=args.ig_steps
            ),
            lambda: IntegratedGradients(model).attribute(
                x.clone().requires_grad_(True), baselines=0.0, target=t, n_steps=args.ig_steps
            ),
        ),
    }
    rows = []
    for method, (ours, direct) in sides.items():
        ours(), direct()  # warm-up
        r_ours, r_direct = [], []
        for _ in range(args.repeats):
            r_ours.append(_rate(ours, len(x)))
            r_direct.append(_rate(direct, len(x)))
        o, d = statistics.median(r_ours), statistics.median(r_direct)
        rows.append(
            {
                "method": method,
                "batch": len(x),
                "ours_images_per_s": o,
                "captum_images_per_s": d,
                "ratio": o / d,
                "target": 0.9,
            }
        )
        print(rows[-1], flush=True)
    path = write_result(
        "saliency-bias",
        "bench-saliency-loop",
        rows,
        kind="benchmark",
        packages=["captum"],
        notes=OUR_METRIC + "Images/s of zoo's saliency loop vs captum called directly on the same VGG "
        f"(zero padding, depth 8, width 16), batch {len(x)} of 3x64x64, median of "
        f"{args.repeats} interleaved repeats; ratio = ours / captum (target >= 0.9).",
    )
    print(path)


if __name__ == "__main__":
    main()
