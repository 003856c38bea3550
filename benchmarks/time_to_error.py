"""Time from start to the error message for a bad recipe, as a ratio to starting Python and importing the two YAML
libraries a recipe needs (``python -c "import yaml, omegaconf"``, the floor any YAML-reading tool pays).

Cases (each a fresh ``python train.py`` process, as a user runs it): a YAML syntax error in a recipe file, a nested
typo (``+model.optimizer.lrr=1`` on ``zoo-lm.yaml``) and an out-of-range trainer value (``trainer.devices=0``). Each
must exit 2; the time is wall-clock to process exit. Repeats are interleaved (peer, then each case) so background
load hits every side alike; the ratio is of medians. Target: <= 2x.

    nice -n 10 python benchmarks/time_to_error.py [--repeats 5]

Writes ``results/platform/time-to-error.json`` (``kind: benchmark``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from zoo.core.results import write_result

ROOT = Path(__file__).resolve().parents[1]


def _time(cmd: list[str], want_rc: int) -> float:
    t = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    dt = time.perf_counter() - t
    if out.returncode != want_rc:
        raise SystemExit(f"{cmd}: exit {out.returncode}, expected {want_rc}\n{out.stderr[-2000:]}")
    return dt


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "typo.yaml"
        bad.write_text("base: zoo-lm.yaml\nmodel:\n  optimizer: {lr: 1e-3\n")  # unclosed flow mapping
        out = f"out_dir={tmp}/runs"
        cases = {
            "yaml syntax error": [sys.executable, "train.py", f"recipe={bad}", out],
            "nested typo (+model.optimizer.lrr=1)": [
                sys.executable,
                "train.py",
                "recipe=zoo-lm.yaml",
                "+model.optimizer.lrr=1",
                out,
            ],
            "trainer.devices=0": [sys.executable, "train.py", "recipe=zoo-lm.yaml", "trainer.devices=0", out],
        }
        peer = [sys.executable, "-c", "import yaml, omegaconf"]
        times: dict[str, list[float]] = {"peer": [], **{c: [] for c in cases}}
        loads = []
        for _ in range(a.repeats):
            times["peer"].append(_time(peer, 0))
            for case, cmd in cases.items():
                times[case].append(_time(cmd, 2))
            loads.append(os.getloadavg()[0])
    base = statistics.median(times["peer"])
    rows = [
        {
            "case": case,
            "median s": round(statistics.median(ts), 3),
            "peer median s": round(base, 3),
            "ratio": round(statistics.median(ts) / base, 2),
            "repeats": len(ts),
            "max load (1 min)": round(max(loads), 2),
        }
        for case, ts in times.items()
        if case != "peer"
    ]
    for r in rows:
        print(r)
    print(
        write_result(
            "platform",
            "time-to-error",
            rows,
            kind="benchmark",
            paper='n/a (zoo target: ratio <= 2x `python -c "import yaml, omegaconf"`)',
            notes=f"Wall time from process start to exit with code 2 for each bad recipe, {a.repeats} "
            'interleaved repeats, ratio of medians against `python -c "import yaml, omegaconf"`. '
            "Validation reads only the recipe, the generated tables in zoo/core/schemas/ and the "
            "registry names: torch, Lightning and method code are never imported. 'max load' is "
            "the machine's 1-minute load average (2 cores shared).",
        )
    )


if __name__ == "__main__":
    main()
