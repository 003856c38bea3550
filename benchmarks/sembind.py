"""SemBind verification throughput against plain Tree-Ring: images per second, same images, one run.

Both sides verify the same batch of generated images with the same provider model: DDIM inversion (10 steps, null
caption) and the Tree-Ring L1 score; SemBind also codes each image (encoder + masker) and demodulates the inverted
latent (r = 0.5) before scoring. Blocks alternate so background load hits both sides alike; the ratio is of median
images/s (target >= 0.85x).

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/sembind.py [--masker sembind.cifar] [--images 64] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from zoo.core.results import write_result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--masker", default="sembind.cifar")
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    import zoo
    from zoo.methods.sembind.modulation import SemanticModulation
    from zoo.methods.sembind.pipeline import DEMO_KEYS, codes
    from zoo.methods.sembind.watermarks import build_scheme

    module = zoo.load(args.masker).eval()
    nets = module.networks()
    G, enc, masker = nets["generator"], nets["encoder"], module.masker
    shape = (3, G.size, G.size)
    g = torch.Generator().manual_seed(0)
    x = G.sample(torch.randn((args.images, *shape), generator=g), G.null.expand(args.images, -1), 10, 1.0)
    scheme = build_scheme("tree-ring", shape, DEMO_KEYS["tree-ring"])
    mod = SemanticModulation(shape, masker.n_bits, 0.5, DEMO_KEYS["sembind"])

    def plain() -> torch.Tensor:
        with torch.no_grad():
            return scheme.score(G.invert(x, 10))

    def sembind() -> torch.Tensor:
        with torch.no_grad():
            return scheme.score(mod(G.invert(x, 10), codes(masker, enc, x)))

    sides = {"plain tree-ring": plain, "sembind + tree-ring": sembind}
    for f in sides.values():
        f()  # warm-up
    rates = {k: [] for k in sides}
    for _ in range(args.repeats):
        for k, f in sides.items():
            t = time.perf_counter()
            f()
            rates[k].append(args.images / (time.perf_counter() - t))
    med = {k: statistics.median(v) for k, v in rates.items()}
    rows = [{"side": k, "images": args.images, "images_per_s": v} for k, v in med.items()]
    rows.append(
        {
            "side": "ratio sembind/plain",
            "images": args.images,
            "images_per_s": med["sembind + tree-ring"] / med["plain tree-ring"],
        }
    )
    write_result(
        "sembind",
        "verification-benchmark",
        rows,
        kind="benchmark",
        notes=f"Verification of {args.images} generated 3x{G.size}x{G.size} images with {args.masker}'s "
        f"provider model: 10-step DDIM inversion + Tree-Ring score, SemBind adding encoder + masker "
        f"codes and demodulation (r = 0.5); one thread, medians of {args.repeats} alternating "
        f"repeats; load at start {os.getloadavg()[0]:.1f}. Target: ratio >= 0.85.",
    )


if __name__ == "__main__":
    main()
