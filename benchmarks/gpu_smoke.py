"""GPU smoke run: every paper recipe (``recipes/paper/*.yaml``) on its same-family stand-in (``recipes/paper/tiny/``,
``zoo.models.stand_ins``) for its few steps on one CUDA device, so a lent GPU is used in minutes.

    python benchmarks/gpu_smoke.py                          # all paper recipes, one GPU, writes gpu_smoke.json
    python benchmarks/gpu_smoke.py --only shapo-llama3.2-3b --out /tmp/smoke.json
    python benchmarks/gpu_smoke.py --accelerator cpu        # the same on CPU (what the tests run)

Each recipe runs in this process through ``zoo.core.training.train`` with ``trainer.devices=1
trainer.strategy=auto`` (the sharded strategies are tested on two gloo processes:
``tests/platform/test_paper_strategies.py``) and the recipe's own precision. The JSON holds, per recipe: ok or the
error, wall seconds, each training step's seconds (CUDA synchronised) and their median, peak memory (CUDA: the
allocator's peak for that recipe; CPU: the process's resident high-water mark so far, which only grows), and the
precision facts: the recipe's ``trainer.precision``, the parameter dtypes after fit, whether bf16 is supported, and
``torch.get_float32_matmul_precision()`` with the TF32 switches (``--tf32 on`` sets ``high`` first: fp32 matmuls
on tensor cores; ``keep``, the default, leaves torch's ``highest``). Exit code 1 when any recipe failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from lightning.pytorch.callbacks import Callback  # noqa: E402

from zoo.cli import compose_and_validate  # noqa: E402
from zoo.models import stand_ins  # noqa: E402

PAPER = ROOT / "recipes" / "paper"


class StepTimer(Callback):
    """Seconds of every training batch (forward, backward, optimiser), CUDA synchronised at both ends."""

    def __init__(self):
        self.seconds: list[float] = []
        self._t: float | None = None

    def _sync(self):
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._sync()
        self._t = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._sync()
        if self._t is not None:
            self.seconds.append(time.perf_counter() - self._t)


def precision_facts() -> dict:
    """TF32 and bf16 state of this process: matmul precision, the cuBLAS / cuDNN TF32 switches, bf16 support."""
    cuda = torch.cuda.is_available()
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
        "bf16_supported": bool(torch.cuda.is_bf16_supported()) if cuda else True,  # CPU autocast supports bf16
    }


def peak_memory_mb(cuda: bool) -> float:
    """CUDA: the allocator's peak since the last reset; CPU: the resident high-water mark of the process."""
    if cuda:
        return torch.cuda.max_memory_allocated() / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(recipe: Path, accelerator: str, root: Path, out_dir: Path) -> dict:
    """Build the recipe's stand-ins, train it with :class:`StepTimer`, and return its row of the JSON."""
    from zoo.core.training import train

    overlay = PAPER / "tiny" / recipe.name
    row: dict = {"recipe": f"paper/{recipe.name}", "ok": False}
    cuda = accelerator in ("gpu", "cuda")
    try:
        stand_ins.prepare(overlay, root)
        argv = [
            f"recipe=paper/{recipe.name}",
            f"overlay=paper/tiny/{recipe.name}",
            f"trainer.accelerator={accelerator}",
            "trainer.devices=1",
            "trainer.strategy=auto",
            "trainer.num_nodes=1",
            f"out_dir={out_dir}",
        ]
        cfg = compose_and_validate(argv)
        row["precision"] = cfg["trainer"].get("precision")
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        timer = StepTimer()
        start = time.perf_counter()
        run_dir = train(cfg, callbacks=[timer])
        row["seconds"] = round(time.perf_counter() - start, 3)
        row["run_dir"] = str(run_dir)
        row["steps"] = len(timer.seconds)
        row["step_seconds"] = [round(s, 4) for s in timer.seconds]
        row["median_step_s"] = round(statistics.median(timer.seconds), 4) if timer.seconds else None
        row["peak_memory_mb"] = round(peak_memory_mb(cuda), 1)
        ckpt = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
        row["param_dtypes"] = sorted({str(v.dtype) for v in ckpt["state_dict"].values() if v.is_floating_point()})
        row.update(precision_facts())
        if str(row["precision"]).startswith("bf16") and not row["bf16_supported"]:
            raise RuntimeError(f"trainer.precision={row['precision']} but this device has no bf16")
        row["ok"] = True
    except Exception as e:  # one failed recipe must not hide the others
        row["error"] = f"{type(e).__name__}: {e}"
        row["traceback"] = traceback.format_exc()[-3000:]
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--accelerator", default="gpu", help="gpu (default) or cpu")
    p.add_argument("--only", nargs="*", default=None, help="recipe names (without .yaml); default: all")
    p.add_argument("--out", default="gpu_smoke.json", help="the JSON written")
    p.add_argument("--stand-ins", default=None, help="folder for the stand-ins (default: a temporary one)")
    p.add_argument("--tf32", choices=["keep", "on"], default="keep", help="on: float32 matmul precision 'high'")
    args = p.parse_args(argv)
    if args.accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        print("no CUDA device: run with --accelerator cpu", file=sys.stderr)
        return 2
    if args.tf32 == "on":
        torch.set_float32_matmul_precision("high")
        torch.backends.cudnn.allow_tf32 = True
    recipes = sorted(PAPER.glob("*.yaml"))
    if args.only:
        unknown = set(args.only) - {r.stem for r in recipes}
        if unknown:
            print(f"unknown paper recipes {sorted(unknown)}; known: {[r.stem for r in recipes]}", file=sys.stderr)
            return 2
        recipes = [r for r in recipes if r.stem in args.only]
    with tempfile.TemporaryDirectory(prefix="gpu-smoke-") as tmp:
        root = Path(args.stand_ins) if args.stand_ins else Path(tmp) / "stand-ins"
        rows = []
        for recipe in recipes:
            print(f"gpu_smoke: {recipe.name} ...", file=sys.stderr, flush=True)
            rows.append(run_one(recipe, args.accelerator, root, Path(tmp) / "runs"))
            status = "ok" if rows[-1]["ok"] else rows[-1]["error"]
            print(f"gpu_smoke: {recipe.name}: {status}", file=sys.stderr, flush=True)
    report = {
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() or "cpu",
            "accelerator": args.accelerator,
            "threads": torch.get_num_threads(),
            "load_1min": os.getloadavg()[0],
        },
        "runs": rows,
        "failed": [r["recipe"] for r in rows if not r["ok"]],
    }
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"gpu_smoke: {len(rows) - len(report['failed'])} of {len(rows)} ok; wrote {args.out}", file=sys.stderr)
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
