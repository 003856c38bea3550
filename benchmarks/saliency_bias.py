"""Saliency throughput: our benchmark loop (``saliency.saliency_maps``) against captum called directly.

Same model (the recipe's zero-padded VGG, depth 8, width 16, on 3×64×64 canvases), same batch, same targets, same
attribution settings. Our side includes what the benchmark adds around captum: eval mode, batching, the input
copy with ``requires_grad`` and the channel reduction to a pixel map. The captum side is ``Saliency(model)
.attribute(x, target=t, abs=False)`` (and ``IntegratedGradients(...).attribute(x, baselines=0.0, target=t,
n_steps=...)``) on the whole batch. Timed by ``zoo.core.timing.compare``: one untimed warm-up call per side, then
``--repeats`` interleaved repeats in alternating order, one thread, so background load hits both sides alike; the ratio
is of the median images/s.

    python benchmarks/saliency_bias.py [--batch-size 64] [--repeats 7] [--ig-steps 16] [--results-dir DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from zoo.core.results import write_result
from zoo.core.timing import compare, machine_load
from zoo.methods.saliency_bias.experiments import OUR_METRIC
from zoo.methods.saliency_bias.saliency import saliency_maps
from zoo.models.vision import build_vision_model


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--batch-size", type=int, default=64, help="images per call")
    ap.add_argument("--repeats", type=int, default=7, help="timed calls per side (after one warm-up call)")
    ap.add_argument("--ig-steps", type=int, default=16, help="Integrated Gradients path steps")
    ap.add_argument("--results-dir", default=None, help="write the results file under this folder instead")
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
    rows, load_start = [], machine_load()
    for method, (ours, direct) in sides.items():
        timing = compare({"ours": ours, "captum": direct}, repeats=args.repeats, warmup=1, threads=1)
        rows.append(
            {
                "method": method,
                "batch": len(x),
                "ours_images_per_s": len(x) / timing.median("ours"),
                "captum_images_per_s": len(x) / timing.median("captum"),
                "ratio": timing.ratio("captum", "ours"),
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
        f"(zero padding, depth 8, width 16), batch {len(x)} of 3x64x64; zoo.core.timing.compare per method: "
        f"{timing.describe()} ratio = ours / captum images/s (target >= 0.9). Machine: {load_start} before the timed "
        f"calls, {machine_load()} after.",
        results_dir=None if args.results_dir is None else Path(args.results_dir),
    )
    print(path)


if __name__ == "__main__":
    main()
