"""The README quickstart's cost: wall time and peak memory of ``python train.py recipe=shapo.yaml`` as a user runs
it (a fresh process from the project root, zoo weights verified and loaded, the whole recipe, final validation).

The run goes to a temporary ``out_dir`` so no ``runs/`` folder is left behind. Peak resident memory is the child's
``ru_maxrss``; the step count is read from the run's ``metrics.json``. Quote the time only with the load beside it.

    python benchmarks/quickstart.py [--repeats 1] [--recipe shapo.yaml] [--set KEY=VALUE ...] [--keep DIR]

``--recipe`` times another recipe (``shapo-zoo-lm.yaml``), ``--set`` passes overrides to it; the results file is then
``quickstart-<recipe stem>.json``. ``--keep DIR`` writes the runs under ``DIR`` instead of a temporary folder (to
release or inspect the timed run itself). Each row also carries the run's before -> after figures where the recipe
logs them (held-out preference accuracy and harmful rate of the reference and of the trained policy).

Writes ``results/platform/quickstart.json`` (``kind: benchmark``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from zoo.core.results import write_result

ROOT = Path(__file__).resolve().parents[1]
BEFORE_AFTER = (
    "val/logp_accuracy_ref",
    "val/logp_accuracy",
    "val/accuracy",
    "val/harmful_rate_ref",
    "val/harmful_rate",
    "val/refusal_rate_redteam_ref",
    "val/refusal_rate_redteam",
    "val/kl_ref",
)
"""Metrics copied into each row when the run logs them (``*_ref``: the reference, i.e. before training)."""


def run_once(tmp: str, recipe: str = "shapo.yaml", overrides: tuple[str, ...] = ()) -> dict:
    """One quickstart run in a fresh process: ``{"wall s", "peak resident memory GB", "steps", "exit status"}``."""
    load = os.getloadavg()[0]
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "train.py", f"recipe={recipe}", *overrides, f"out_dir={tmp}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise SystemExit(f"quickstart failed with exit {out.returncode}:\n{out.stderr[-3000:]}")
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest child so far (Linux: KiB)
    metrics = json.loads(sorted(Path(tmp).glob("*/version_*/metrics.json"))[-1].read_text())["metrics"]
    figures = {k.split("/", 1)[1]: round(metrics[k], 4) for k in BEFORE_AFTER if k in metrics}
    return {
        "wall s": round(wall, 1),
        "peak resident memory GB": round(peak_kb / 2**20, 3),
        "steps": int(metrics["global_step"]),
        "exit status": out.returncode,
        "load at start (1 min)": round(load, 2),
        **figures,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--recipe", default="shapo.yaml", help="the main job's recipe")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="recipe overrides")
    p.add_argument("--keep", default=None, metavar="DIR", help="write the runs under DIR and keep them")
    a = p.parse_args(argv)
    rows = []
    for _ in range(a.repeats):
        if a.keep:
            Path(a.keep).mkdir(parents=True, exist_ok=True)
            rows.append(run_once(str(Path(a.keep).resolve()), a.recipe, tuple(a.set)))
        else:
            with tempfile.TemporaryDirectory() as tmp:
                rows.append(run_once(tmp, a.recipe, tuple(a.set)))
        print(rows[-1])
    name = "quickstart" if a.recipe == "shapo.yaml" else f"quickstart-{Path(a.recipe).stem}"
    print(
        write_result(
            "platform",
            name,
            rows,
            kind="benchmark",
            paper="n/a (the README quotes this time)",
            notes=f"`python train.py {' '.join([f'recipe={a.recipe}', *a.set])}` from the project root in a fresh process: "
            "the starting weights (the cached SmolLM2 base, or zoo-lm.chat) and the recipe's judge (a cost model "
            "and/or the keyword refusal judge) loaded, stage A probe and masks, the recipe's steps (every 5th a "
            "ShaPO step), final validation with the before -> after figures. Wall clock of the process; peak "
            "resident memory of the child (ru_maxrss). "
            "'load at start' is the machine's 1-minute load average (2 cores).",
        )
    )


if __name__ == "__main__":
    main()
