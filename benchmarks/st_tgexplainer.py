"""Training throughput: ST-TGExplainer vs torch_geometric's TGN example model on the same CollegeMsg events.

All train on the same training events (batches of 200, collision-checked negatives, K = 10 neighbours) in this one
process; ST-TGExplainer runs its full Lightning training step (three Mixer passes, KL, discriminator step, main step),
the plain GraphMixer (``explainer=False``: one Mixer pass, BCE, one optimiser) the same Lightning loop, TGN the
example's loop (memory, LastNeighborLoader 10, TransformerConv embedding, predictor; sizes 100). ST-TGExplainer
also runs unchunked (one Mixer call per pass, as before ``STTGExplainerNet.mix_chunk``): the before/after of that change.

Timing goes through the shared helper :func:`zoo.core.timing.compare` (interleaved sides, order alternating every
repeat, warm-up calls untimed, the same thread count for all). A side is a fresh run of k batches; each model has
an ``n``-batch and a ``w``-batch side, and throughput = (n - w) · B / (median T(n) - median T(w)), so set-up (model,
Trainer, first batches) cancels.

``--profile`` adds a per-stage breakdown of ``n`` batches of ST-TGExplainer and of TGN (torch.profiler; every
operator's own CPU time is credited to the innermost stage that called it): batch assembly / neighbour sampling,
TGN's memory read and update, token embedding, Mixer passes, explainer heads, predictor, losses, backward,
optimiser steps, and the rest (Lightning, Python).

    python benchmarks/st_tgexplainer.py [--repeats 5] [--batches 12] [--warmup-batches 2] [--profile]

Writes ``results/st-tgexplainer/train-throughput.json`` (``kind: benchmark``, docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import contextlib
import time

import lightning as L
import torch

from zoo.core.results import write_result
from zoo.core.timing import compare
from zoo.methods.st_tgexplainer import module as st_module
from zoo.methods.st_tgexplainer import tgn
from zoo.methods.st_tgexplainer.datamodule import TemporalLinkDataModule
from zoo.methods.st_tgexplainer.module import STTGExplainer

SIZES = {
    "cpu recipe (H=32, K=10)": {"hidden": 32, "time_dim": 32, "num_neighbors": 10, "dropout": 0.0},
    "paper (H=172, K=20)": {"hidden": 172, "time_dim": 100, "num_neighbors": 20, "dropout": 0.2},
}
B = 200
UNCHUNKED = 10**9  # mix_chunk for one Mixer call per pass (the code before chunking)


def st_run(
    dm: TemporalLinkDataModule, size: dict, batches: int, explainer: bool = True, mix_chunk: int | None = None
) -> STTGExplainer:
    """``batches`` training batches of ST-TGExplainer (or the plain GraphMixer) from a fresh module; ``mix_chunk``
    overrides :attr:`STTGExplainerNet.mix_chunk` (a huge value = one Mixer call per pass, the code before chunking).

    Batches are counted with ``limit_train_batches``: with manual optimisation every optimiser step counts as a
    global step, so ``max_steps=n`` would stop ST-TGExplainer (two optimisers) after n/2 batches.
    """
    torch.manual_seed(0)
    model = STTGExplainer(num_nodes=dm.num_nodes, optimizer={"name": "adam", "lr": 1e-4}, explainer=explainer, **size)
    if mix_chunk is not None:
        model.net.mix_chunk = mix_chunk
    tr = L.Trainer(
        accelerator="cpu",
        max_epochs=1,
        limit_train_batches=batches,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    tr.fit(model, dm)
    assert tr.fit_loop.epoch_loop.batch_progress.total.completed == batches
    return model


def tgn_run(dm: TemporalLinkDataModule, batches: int) -> tgn.TGN:
    """``batches`` TGN training steps from a fresh model (the example's loop)."""
    torch.manual_seed(0)
    model = tgn.build_tgn(dm)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    tgn.train_epoch(model, dm, opt, torch.Generator().manual_seed(0), batch_size=B, max_batches=batches)
    return model


# ------------------------------------------------------------------------------------------------ stage profile
@contextlib.contextmanager
def _patched(targets: list[tuple[object, str, str]]):
    """Wrap ``getattr(obj, attr)`` in ``torch.profiler.record_function(stage)`` for every ``(obj, attr, stage)``;
    restore on exit. ``obj`` may be a Python module, an instance or a class."""
    saved = []
    for obj, attr, stage in targets:
        fn = getattr(obj, attr)

        def wrapped(*a, _fn=fn, _stage=stage, **k):
            with torch.profiler.record_function(_stage):
                return _fn(*a, **k)

        saved.append((obj, attr, attr in vars(obj), fn))
        setattr(obj, attr, wrapped)
    try:
        yield
    finally:
        for obj, attr, own, fn in reversed(saved):
            if own:
                setattr(obj, attr, fn)
            else:  # an inherited attribute: remove the wrapper so the base's applies again
                delattr(obj, attr)


BUILTIN = {"Optimizer.step": "optimiser steps (Adam)", "Optimizer.zero_grad": "optimiser steps (Adam)"}


def stage_profile(fn, targets: list[tuple[object, str, str]]) -> tuple[dict[str, float], float]:
    """Run ``fn()`` under torch.profiler with the ``targets`` stages; returns ({stage: own CPU s}, wall s).

    Every operator's own (self) CPU time goes to the innermost enclosing stage (its ``cpu_parent`` chain);
    ``Optimizer.step``/``zero_grad`` are stages of their own; operators outside every stage count as ``other``, and
    ``rest`` = wall minus all operator time (Python, Lightning, the profiler's own cost).
    """
    names = {stage for _, _, stage in targets}
    with _patched(targets), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        fn()
        wall = time.perf_counter() - t0
    out: dict[str, float] = {}
    for ev in prof.events():
        if ev.name in names or ev.name.split("#")[0] in BUILTIN or ev.self_cpu_time_total <= 0:
            continue
        stage, p = "other operators", ev.cpu_parent
        while p is not None:
            if p.name in names:
                stage = p.name
                break
            if p.name.split("#")[0] in BUILTIN:
                stage = BUILTIN[p.name.split("#")[0]]
                break
            p = p.cpu_parent
        out[stage] = out.get(stage, 0.0) + ev.self_cpu_time_total / 1e6
    return out, wall


def backward_target() -> tuple[object, str, str]:
    return (torch.Tensor, "backward", "backward")


def profile_st(dm: TemporalLinkDataModule, size: dict, batches: int) -> tuple[dict[str, float], float]:
    """Per-stage profile of ``batches`` ST-TGExplainer training batches (:func:`stage_profile`)."""
    from zoo.methods.st_tgexplainer.networks import MergeLayer, MixerBlock, STTGExplainerNet

    targets = [
        (dm, "_train_collate", "batch assembly (neighbour sampling, negatives)"),
        (STTGExplainerNet, "tokens", "tokens (node embedding, time encoding)"),
        (MixerBlock, "forward", "Mixer passes (3 per step)"),
        (STTGExplainerNet, "discriminate", "discriminator (both updates)"),
        (MergeLayer, "forward", "predictor"),
        (st_module, "bernoulli_kl", "losses (BCE, KL, redundancy)"),
        (st_module, "redundancy_loss", "losses (BCE, KL, redundancy)"),
        (st_module, "discriminator_loss", "losses (BCE, KL, redundancy)"),
        (st_module.F, "binary_cross_entropy_with_logits", "losses (BCE, KL, redundancy)"),
        (
            STTGExplainerNet,
            "forward",
            "explainer heads in forward (mask scorer, stability prior, Gumbel, pass assembly)",
        ),
        backward_target(),
    ]
    return stage_profile(lambda: st_run(dm, size, batches), targets)


def profile_tgn(dm: TemporalLinkDataModule, batches: int) -> tuple[dict[str, float], float]:
    """Per-stage profile of ``batches`` TGN training steps (:func:`stage_profile`)."""
    from torch_geometric.nn.models.tgn import LastNeighborLoader, TGNMemory

    targets = [
        (dm.train_negatives, "sample", "batch assembly (neighbour sampling, negatives)"),
        (LastNeighborLoader, "__call__", "batch assembly (neighbour sampling, negatives)"),
        (LastNeighborLoader, "insert", "batch assembly (neighbour sampling, negatives)"),
        (TGNMemory, "forward", "memory read (GRU over pending messages)"),
        (TGNMemory, "update_state", "memory update"),
        (tgn.GraphAttentionEmbedding, "forward", "embedding (TransformerConv attention)"),
        (tgn.LinkPredictor, "forward", "predictor"),
        (torch.nn.functional, "binary_cross_entropy_with_logits", "losses (BCE, KL, redundancy)"),
        backward_target(),
    ]
    return stage_profile(lambda: tgn_run(dm, batches), targets)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1, help="untimed calls per side before the timed ones")
    ap.add_argument("--batches", type=int, default=12, help="n: batches of the long side")
    ap.add_argument("--warmup-batches", type=int, default=2, help="w: batches of the short side (cancels set-up)")
    ap.add_argument("--sizes", nargs="*", default=["cpu recipe (H=32, K=10)"])
    ap.add_argument("--threads", type=int, default=1, help="torch threads for every side")
    ap.add_argument("--profile", action="store_true", help="add per-stage profiles of ST-TGExplainer and TGN")
    args = ap.parse_args()
    n, w = args.batches, args.warmup_batches
    rows = []
    for label in args.sizes:
        size = SIZES[label]
        dm = TemporalLinkDataModule(batch_size=B, num_neighbors=size["num_neighbors"], shuffle=True)
        dm.setup("fit")
        sides = {
            "ST n": lambda dm=dm, size=size: st_run(dm, size, n),
            "ST w": lambda dm=dm, size=size: st_run(dm, size, w),
            "ST1 n": lambda dm=dm, size=size: st_run(dm, size, n, mix_chunk=UNCHUNKED),
            "ST1 w": lambda dm=dm, size=size: st_run(dm, size, w, mix_chunk=UNCHUNKED),
            "GM n": lambda dm=dm, size=size: st_run(dm, size, n, False),
            "GM w": lambda dm=dm, size=size: st_run(dm, size, w, False),
            "TGN n": lambda dm=dm: tgn_run(dm, n),
            "TGN w": lambda dm=dm: tgn_run(dm, w),
        }
        t = compare(sides, repeats=args.repeats, warmup=args.warmup, threads=args.threads)
        rate = {m: (n - w) * B / (t.median(f"{m} n") - t.median(f"{m} w")) for m in ("ST", "ST1", "GM", "TGN")}
        row = {
            "size": label,
            "round": "median",
            "ST-TGExplainer events/s": rate["ST"],
            "ST-TGExplainer unchunked events/s": rate["ST1"],
            "GraphMixer events/s": rate["GM"],
            "TGN events/s": rate["TGN"],
            "ST / TGN": rate["ST"] / rate["TGN"],
            "ST unchunked / TGN": rate["ST1"] / rate["TGN"],
            "GraphMixer / TGN": rate["GM"] / rate["TGN"],
            "ST ms/batch": 1e3 * B / rate["ST"],
            "TGN ms/batch": 1e3 * B / rate["TGN"],
            "repeats": args.repeats,
            "warmup": args.warmup,
            "threads": args.threads,
        }
        print(
            f"{label}: ST-TGExplainer {rate['ST']:.0f} events/s (unchunked {rate['ST1']:.0f}), GraphMixer {rate['GM']:.0f}, TGN {rate['TGN']:.0f}; "
            f"ST/TGN = {row['ST / TGN']:.3f}x, GM/TGN = {row['GraphMixer / TGN']:.3f}x",
            flush=True,
        )
        rows.append(row)
        if args.profile:
            for model, (stages, wall) in (("ST-TGExplainer", profile_st(dm, size, n)), ("TGN", profile_tgn(dm, n))):
                ops = sum(stages.values())
                stages["rest (Python, Lightning, profiler)"] = max(0.0, wall - ops)
                for stage, sec in sorted(stages.items(), key=lambda kv: -kv[1]):
                    rows.append(
                        {
                            "size": label,
                            "round": f"profile {model}",
                            "stage": stage,
                            "ms per batch": 1e3 * sec / n,
                            "share": sec / wall,
                        }
                    )
                    print(f"  {model:15s} {stage:60s} {1e3 * sec / n:7.1f} ms/batch {100 * sec / wall:5.1f}%")
    print(
        write_result(
            "st-tgexplainer",
            "train-throughput",
            rows,
            kind="benchmark",
            packages=["torch-geometric"],
            paper="n/a (zoo target: ST / TGN >= 1.0x)",
            notes=f"Training events/s on CollegeMsg training events, batch {B}, K = 10 neighbours for every model; "
            f"throughput = (n - w) B / (median T(n) - median T(w)), n = {n}, w = {w} batches of fresh runs "
            "(counted with limit_train_batches), so set-up cancels. " + t.describe() + " Sides: "
            "ST-TGExplainer's full Lightning manual-optimisation step (CPU recipe sizes, lr 1e-4; 'unchunked': "
            "one Mixer call per pass instead of chunks of mix_chunk = 200 events, the code before), the plain "
            "GraphMixer (explainer=false, same loop) and torch_geometric's examples/tgn.py model (TGNMemory, "
            "LastNeighborLoader 10, TransformerConv, sizes 100, lr 1e-4) on the same events and negatives. "
            "'profile' rows (with --profile): torch.profiler of n batches of one fresh run, each operator's own "
            "CPU time credited to the innermost stage that called it, per batch and as a share of the profiled "
            "wall time (the profiler's own cost lands in 'rest'). Machine load in the record.",
        )
    )


if __name__ == "__main__":
    main()
