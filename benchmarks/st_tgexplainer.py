"""Training throughput: ST-TGExplainer vs torch_geometric's TGN example model on the same CollegeMsg events.

All train on the same training events (batches of 200, collision-checked negatives) in this one process;
ST-TGExplainer runs its full Lightning training step (three Mixer passes, KL, discriminator step, main step), the
plain GraphMixer (``explainer=False``: one Mixer pass, BCE, one optimiser) the same Lightning loop, TGN the
example's loop (memory, LastNeighborLoader, TransformerConv embedding, predictor; sizes 100).
Throughput = (n - w) · B / (T(n) - T(w)) where T(k) is the wall time of a fresh run of k batches, so set-up and
the first ``w`` batches cancel. Rounds alternate the models; the best round of each is reported (the machine is
shared, the best round is the least disturbed). ``--profile`` adds a cProfile of ``n`` ST-TGExplainer batches,
split into forward, backward, optimiser steps, logging and batch assembly (share of the step's wall time).

    python benchmarks/st_tgexplainer.py [--rounds 2] [--batches 8] [--warmup 2] [--profile]

Writes ``results/st-tgexplainer/train-throughput.json`` (``kind: benchmark``, docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import time

import lightning as L
import torch

from zoo.core.results import write_result
from zoo.methods.st_tgexplainer import tgn
from zoo.methods.st_tgexplainer.datamodule import TemporalLinkDataModule
from zoo.methods.st_tgexplainer.module import STTGExplainer

SIZES = {
    "cpu recipe (H=32, K=10)": {"hidden": 32, "time_dim": 32, "num_neighbors": 10, "dropout": 0.0},
    "paper (H=172, K=20)": {"hidden": 172, "time_dim": 100, "num_neighbors": 20, "dropout": 0.2},
}


def st_time(dm: TemporalLinkDataModule, size: dict, batches: int, explainer: bool = True) -> float:
    """Wall seconds of ``batches`` training batches of ST-TGExplainer (or the plain GraphMixer) from a fresh module.

    Batches are counted with ``limit_train_batches``: with manual optimisation every optimiser step counts as a
    global step, so ``max_steps=n`` would stop ST-TGExplainer (two optimisers) after n/2 batches (the earlier
    version of this benchmark did that and over-stated its throughput twofold).
    """
    torch.manual_seed(0)
    model = STTGExplainer(num_nodes=dm.num_nodes, optimizer={"name": "adam", "lr": 1e-4}, explainer=explainer, **size)
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
    t0 = time.perf_counter()
    tr.fit(model, dm)
    assert tr.fit_loop.epoch_loop.batch_progress.total.completed == batches
    return time.perf_counter() - t0


#: profile categories: (label, cProfile function keys whose cumulative time it sums)
PROFILE = (
    ("forward (3 Mixer passes, scorer, prior)", ("model.py", "forward", "STTGExplainerNet")),
    ("backward (discriminator + main)", ("_tensor.py", "backward", None)),
    ("optimiser steps (Adam x2)", ("optimizer.py", "step", None)),
    ("logging (self.log_dict)", ("module.py", "log_dict", None)),
    ("batch assembly (neighbours, negatives)", ("datamodule.py", "_train_collate", None)),
)


def profile_st(dm: TemporalLinkDataModule, size: dict, batches: int) -> list[dict]:
    """cProfile ``batches`` ST-TGExplainer training batches: seconds per :data:`PROFILE` part and its share of the
    per-batch work (``training_step`` + batch assembly)."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    st_time(dm, size, batches)
    prof.disable()
    wall = time.perf_counter() - t0
    stats = pstats.Stats(prof).stats  # {(file, line, name): (cc, nc, tt, ct, callers)}

    def cumulative(file: str, name: str, ours: bool) -> float:
        return max(
            (
                v[3]
                for (f, _, n), v in stats.items()
                if f.endswith(file) and n == name and (not ours or "st_tgexplainer" in f)
            ),
            default=0.0,
        )

    parts = [(label, cumulative(file, name, cls is not None)) for label, (file, name, cls) in PROFILE]
    step = cumulative("module.py", "training_step", True) + parts[-1][1]  # the step plus its batch assembly
    rows = [{"part": label, "seconds": ct, "share of step": ct / step} for label, ct in parts]
    rows.append({"part": "per-batch work (training_step + batch assembly)", "seconds": step, "share of step": 1.0})
    rows.append({"part": "wall incl. Trainer set-up", "seconds": wall, "share of step": wall / step})
    return rows


def tgn_time(dm: TemporalLinkDataModule, batches: int) -> float:
    """Wall seconds of ``batches`` TGN training steps from a fresh model (set-up included)."""
    torch.manual_seed(0)
    t0 = time.perf_counter()
    model = tgn.build_tgn(dm)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    tgn.train_epoch(model, dm, opt, torch.Generator().manual_seed(0), batch_size=200, max_batches=batches)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--sizes", nargs="*", default=list(SIZES))
    ap.add_argument("--threads", type=int, default=1, help="torch threads for both models")
    ap.add_argument("--profile", action="store_true", help="add a cProfile breakdown of the ST-TGExplainer step")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    n, w, b = args.batches, args.warmup, 200
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, CollegeMsg training events, batch {b}, "
        f"{n} vs {w} batches, {args.rounds} rounds"
    )
    rows = []
    for label in args.sizes:
        size = SIZES[label]
        dm = TemporalLinkDataModule(batch_size=b, num_neighbors=size["num_neighbors"], shuffle=True)
        dm.setup("fit")
        st_rates, gm_rates, tgn_rates = [], [], []
        for _ in range(args.rounds):
            st_rates.append((n - w) * b / (st_time(dm, size, n) - st_time(dm, size, w)))
            gm_rates.append((n - w) * b / (st_time(dm, size, n, False) - st_time(dm, size, w, False)))
            tgn_rates.append((n - w) * b / (tgn_time(dm, n) - tgn_time(dm, w)))
        st_best, gm_best, tgn_best = max(st_rates), max(gm_rates), max(tgn_rates)
        print(
            f"{label}: ST-TGExplainer {st_best:.0f} events/s, GraphMixer {gm_best:.0f}, TGN example {tgn_best:.0f}, "
            f"ratio ST/TGN = {st_best / tgn_best:.2f}x, GraphMixer/TGN = {gm_best / tgn_best:.2f}x "
            f"(rounds ST {[round(r) for r in st_rates]}, GM {[round(r) for r in gm_rates]}, "
            f"TGN {[round(r) for r in tgn_rates]})"
        )
        rows += [
            {"size": label, "round": i, "ST-TGExplainer events/s": s_, "GraphMixer events/s": g_, "TGN events/s": t_}
            for i, (s_, g_, t_) in enumerate(zip(st_rates, gm_rates, tgn_rates))
        ]
        rows.append(
            {
                "size": label,
                "round": "best",
                "ST-TGExplainer events/s": st_best,
                "GraphMixer events/s": gm_best,
                "TGN events/s": tgn_best,
                "ST / TGN": st_best / tgn_best,
                "GraphMixer / TGN": gm_best / tgn_best,
            }
        )
        if args.profile:
            prof = profile_st(dm, size, n)
            print("\n".join(f"  {r['part']}: {r['seconds']:.2f} s ({100 * r['share of step']:.0f}%)" for r in prof))
            rows += [{"size": label, "round": "profile", **r} for r in prof]
    print(
        write_result(
            "st-tgexplainer",
            "train-throughput",
            rows,
            kind="benchmark",
            packages=["torch-geometric"],
            paper="n/a (zoo target: ST / TGN >= 1.0x)",
            notes=f"Training events/s on CollegeMsg training events, batch {b}, throughput = (n - w) B / "
            f"(T(n) - T(w)) with n = {n}, w = {w} batches (counted with limit_train_batches) so "
            f"set-up cancels; {args.rounds} rounds alternating the models, best round reported; "
            "ST-TGExplainer's full Lightning manual-optimisation step and the plain GraphMixer "
            "(explainer=false, same Lightning loop) vs torch_geometric's examples/tgn.py model "
            "(TGNMemory, LastNeighborLoader 10, TransformerConv, sizes 100); torch threads "
            f"{args.threads}. 'profile' rows: cProfile cumulative seconds of n ST batches by part "
            "as a share of the per-batch work (training_step + batch assembly). Machine load in the record.",
        )
    )


if __name__ == "__main__":
    main()
