"""Training throughput: ST-TGExplainer vs torch_geometric's TGN example model on the same CollegeMsg events.

Both train on the same training events (batches of 200, collision-checked negatives) in this one process;
ST-TGExplainer runs its full Lightning training step (three Mixer passes, KL, discriminator step, main step),
TGN the example's loop (memory, LastNeighborLoader, TransformerConv embedding, predictor; sizes 100).
Throughput = (n - w) · B / (T(n) - T(w)) where T(k) is the wall time of a fresh run of k batches, so set-up and
the first ``w`` batches cancel. Rounds alternate the two models; the best round of each is reported (the
machine is shared, the best round is the least disturbed).

    python benchmarks/st_tgexplainer.py [--rounds 2] [--batches 8] [--warmup 2]

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

SIZES = {"cpu recipe (H=32, K=10)": {"hidden": 32, "time_dim": 32, "num_neighbors": 10, "dropout": 0.0},
         "paper (H=172, K=20)": {"hidden": 172, "time_dim": 100, "num_neighbors": 20, "dropout": 0.2}}


def st_time(dm: TemporalLinkDataModule, size: dict, batches: int) -> float:
    """Wall seconds of ``batches`` ST-TGExplainer training steps from a fresh module (set-up included)."""
    torch.manual_seed(0)
    model = STTGExplainer(num_nodes=dm.num_nodes, optimizer={"name": "adam", "lr": 1e-4}, **size)
    tr = L.Trainer(accelerator="cpu", max_steps=batches, limit_val_batches=0, logger=False,
                   enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    t0 = time.perf_counter()
    tr.fit(model, dm)
    return time.perf_counter() - t0


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
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    n, w, b = args.batches, args.warmup, 200
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CollegeMsg training events, batch {b}, "
          f"{n} vs {w} batches, {args.rounds} rounds")
    rows = []
    for label in args.sizes:
        size = SIZES[label]
        dm = TemporalLinkDataModule(batch_size=b, num_neighbors=size["num_neighbors"], shuffle=True)
        dm.setup("fit")
        st_rates, tgn_rates = [], []
        for _ in range(args.rounds):
            st_rates.append((n - w) * b / (st_time(dm, size, n) - st_time(dm, size, w)))
            tgn_rates.append((n - w) * b / (tgn_time(dm, n) - tgn_time(dm, w)))
        st_best, tgn_best = max(st_rates), max(tgn_rates)
        print(f"{label}: ST-TGExplainer {st_best:.0f} events/s, TGN example {tgn_best:.0f} events/s, "
              f"ratio ST/TGN = {st_best / tgn_best:.2f}x  (rounds ST {[round(r) for r in st_rates]}, "
              f"TGN {[round(r) for r in tgn_rates]})")
        rows += [{"size": label, "round": i, "ST-TGExplainer events/s": s_, "TGN events/s": t_}
                 for i, (s_, t_) in enumerate(zip(st_rates, tgn_rates))]
        rows.append({"size": label, "round": "best", "ST-TGExplainer events/s": st_best, "TGN events/s": tgn_best,
                     "ST / TGN": st_best / tgn_best})
    print(write_result("st-tgexplainer", "train-throughput", rows, kind="benchmark", packages=["torch-geometric"],
                       paper="n/a (zoo target: ST / TGN >= 1.0x)",
                       notes=f"Training events/s on CollegeMsg training events, batch {b}, throughput = (n - w) B / "
                             f"(T(n) - T(w)) with n = {n}, w = {w} batches so set-up cancels; {args.rounds} rounds "
                             "alternating the two models, best round reported; ST-TGExplainer's full Lightning "
                             "manual-optimisation step vs torch_geometric's examples/tgn.py model (TGNMemory, "
                             f"LastNeighborLoader 10, TransformerConv, sizes 100); torch threads {args.threads}."))


if __name__ == "__main__":
    main()
