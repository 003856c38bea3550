"""SemBind verification throughput against plain Tree-Ring: images per second, same images, one run.

Both sides verify the same batch of generated images with the same provider model: DDIM inversion (10 steps, null
caption) and the Tree-Ring L1 score; SemBind also codes each image (encoder + masker) and demodulates the inverted
latent (r = 0.5) before scoring. Timed by ``zoo.core.timing.compare``: one untimed warm-up call per side, then
``--repeats`` interleaved repeats in alternating order, one thread, so background load hits both sides alike; the ratio
is of median images/s (target >= 0.85x).

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/sembind.py [--masker sembind.cifar] [--images 64] [--repeats 5]
        [--results-dir DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from zoo.core.results import write_result
from zoo.core.timing import compare, machine_load


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--masker", default="sembind.cifar", help="zoo id of the SemBind model")
    ap.add_argument("--images", type=int, default=64, help="images verified per call")
    ap.add_argument("--repeats", type=int, default=5, help="timed calls per side (after one warm-up call)")
    ap.add_argument("--results-dir", default=None, help="write the results file under this folder instead")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # the generation below runs on the thread count the timing uses
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

    load_start = machine_load()
    t = compare({"plain tree-ring": plain, "sembind + tree-ring": sembind}, repeats=args.repeats, warmup=1, threads=1)
    med = {k: args.images / t.median(k) for k in t.wall}
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
        f"codes and demodulation (r = 0.5); zoo.core.timing.compare: {t.describe()} Machine: {load_start} before "
        f"the timed calls, {machine_load()} after. Target: ratio >= 0.85.",
        results_dir=None if args.results_dir is None else Path(args.results_dir),
    )


if __name__ == "__main__":
    main()
