"""LTC's decomposed forward against one plain ``encode_image``: same tiny open_clip CLIP, same batch.

Peer: ``CLIP.encode_image(x)`` (open_clip's forward, fused ``nn.MultiheadAttention``). Ours:
:func:`zoo.methods.ltc.decompose.decompose` (per-head CLS terms, MLP and embedding terms, ``ln_post`` folded), which
yields the same embedding plus every head's direct effect. Timed by ``zoo.core.timing.compare`` in blocks of
``--iters`` forwards: one untimed warm-up block per side, then ``--repeats`` interleaved blocks in alternating order,
one thread, no_grad; the ratio is of the median blocks. Target (issue 19): ≤ 1.5×.

    nice -n 10 python benchmarks/ltc.py [--batch 128] [--iters 5] [--repeats 5] [--results-dir DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from zoo.core.results import write_result
from zoo.core.timing import compare, machine_load
from zoo.methods.ltc.decompose import decompose
from zoo.models.clip import build_clip


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=128, help="images per forward")
    p.add_argument("--iters", type=int, default=5, help="forwards per timed block")
    p.add_argument("--repeats", type=int, default=5, help="timed blocks per side (after one warm-up block)")
    p.add_argument("--results-dir", default=None, help="write the results file under this folder instead")
    a = p.parse_args(argv)
    torch.manual_seed(0)
    model = build_clip(vocab_size=64).eval()
    x = torch.randn(a.batch, 3, 48, 48)
    with torch.no_grad():
        err = float((decompose(model.visual, x).embedding() - model.encode_image(x)).abs().max())
    sides = {
        "open_clip encode_image": lambda: model.encode_image(x),
        "ltc decompose": lambda: decompose(model.visual, x),
    }
    load_start = machine_load()
    with torch.no_grad():
        t = compare(
            {name: lambda fn=fn: [fn() for _ in range(a.iters)] for name, fn in sides.items()},
            repeats=a.repeats,
            warmup=1,
            threads=1,
        )
    rows = []
    for name in sides:
        rows.append(
            {
                "side": name,
                "ms_per_batch": 1000 * t.median(name) / a.iters,
                "ratio_to_encode_image": t.ratio(name, "open_clip encode_image"),
                "batch": a.batch,
                "max_abs_diff_embedding": err,
            }
        )
        print(f"{name:24s} {rows[-1]['ms_per_batch']:8.1f} ms/batch  ratio {rows[-1]['ratio_to_encode_image']:.3f}")
    write_result(
        "ltc",
        "bench-decompose",
        rows,
        kind="benchmark",
        packages=["open-clip-torch"],
        paper="target (issue 19): decomposed forward <= 1.5x one plain encode_image on the same batch",
        notes=(
            f"tiny CLIP (ViT 6 layers x 4 heads, width 128, patch 8, 48x48 images), batch {a.batch}, no_grad, "
            f"blocks of {a.iters} forwards; zoo.core.timing.compare: {t.describe()} ms_per_batch = median block / "
            f"{a.iters}. Machine: {load_start} before the timed blocks, {machine_load()} after. "
            f"The decomposition's embedding differs from encode_image by at most {err:.1e}."
        ),
        results_dir=None if a.results_dir is None else Path(a.results_dir),
    )


if __name__ == "__main__":
    main()
