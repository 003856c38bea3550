"""Time from start to the error message for a bad recipe, as a ratio to starting Python and importing the two YAML
libraries a recipe needs (``python -c "import yaml, omegaconf"``, the floor any YAML-reading tool pays).

Cases (each a fresh process, as a user runs it): for ``python train.py``, a YAML syntax error in a recipe file, a
nested typo (``+model.optimizer.lrr=1`` on ``zoo-lm.yaml``), an out-of-range trainer value (``trainer.devices=0``),
the method arguments of issue #42 (``model.epsilon=-1``, ``model.conditioning=reparm`` on ``cond-dp.yaml``) and
a user's data file (#42): a CSV with a ragged row for praxis, one without cond-dp's label column, a binary CSV for
survshap-iq, and one bad value in a user's file for each method that reads one through typed columns (``VALUES``:
a text cell in a number column, an id that is not an integer, a negative time, a slip probability above 1, a
latitude of 95, an answer that is not a number, a caption row naming a missing image, a chat turn with an unknown
role); each must exit 2. ``zoo info cond-dp`` must exit 0 (the method's arguments from its table). For ``zoo
eval zoo-lm.chat`` the time is to its first line on stderr ("loading ..."), after which it is stopped. The time is
wall-clock to process exit (or that line). Repeats are interleaved (peer, then each case) so background load hits
every side alike; the ratio is of medians. Target: <= 2x.

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
#: ``case: (recipe and overrides, {file: text})``: one bad value per method reading a user's file through typed
#: columns; ``{dir}`` is the temporary folder the files are written to.
VALUES = {
    "cond-dp data value: text in a number column": (
        ["recipe=cond-dp.yaml", "data.path={dir}/t.csv", "data.label=y", "data.y_min=0", "data.y_max=1"],
        {"t.csv": "x1,y\n1,0\n2,abc\n"},
    ),
    "crh data value: id not an integer": (
        ["recipe=crh.yaml", "data.path={dir}/p.csv"],
        {"p.csv": "qid,cid,question,concept,resp_no_concept,resp_with_concept\nx,5,Q,c,A,B\n"},
    ),
    "desi data value: nan response": (
        ["recipe=desi.yaml", "data.path={dir}/u.csv"],
        {"u.csv": "x,y_0,y_1\n1,0.1,nan\n"},
    ),
    "survshap-iq data value: negative time": (
        ["recipe=survshap-iq.yaml", "data.path={dir}/d.csv"],
        {"d.csv": "time,event,age\n-1,1,60\n"},
    ),
    "sf-consolidation data value: slip_prob 1.5": (
        ["recipe=sf-consolidation.yaml", "data.drift=csv", "data.drift_path={dir}/drift.csv"],
        {"drift.csv": "step,mass_scale,friction_scale,slip_prob\n0,1,1,1.5\n"},
    ),
    "trsp data value: latitude 95": (
        ["recipe=trsp.yaml", "data.format=csv", "data.path={dir}/trips.csv", "data.stops_path={dir}/stops.csv"],
        {"trips.csv": "a_lon,a_lat,b_lon,b_lat\n-122.4,37.7,-122.4,95\n", "stops.csv": "lon,lat\n-122.4,37.7\n"},
    ),
    "st-tgexplainer data value: node id x": (
        ["recipe=st-tgexplainer.yaml", "data.path={dir}/ev.csv"],
        {"ev.csv": "src,dst,timestamp\n1,x,5\n"},
    ),
    "anchor-adapter data value: answer four": (
        ["recipe=anchor-adapter.yaml", "data.path={dir}/p.jsonl"],
        {"p.jsonl": '{"question": "2 + 2", "answer": "four"}\n'},
    ),
    "sembind data value: missing image": (
        ["recipe=sembind.yaml", "data.dataset=folder", "data.path={dir}/imgs"],
        {"imgs/captions.csv": "file,caption\nmissing.png,a red thing\n"},
    ),
    "zoo-lm data value: chat role bot": (
        ["recipe=zoo-lm-chat.yaml", "data.path={dir}/c.jsonl"],
        {"c.jsonl": '{"messages": [{"role": "bot", "content": "x"}]}\n'},
    ),
}


def _time(cmd: list[str], want_rc: int) -> float:
    t = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    dt = time.perf_counter() - t
    if out.returncode != want_rc:
        raise SystemExit(f"{cmd}: exit {out.returncode}, expected {want_rc}\n{out.stderr[-2000:]}")
    return dt


def _time_first_line(cmd: list[str], want: str) -> float:
    """Seconds until ``cmd`` writes its first stderr line (which must start with ``want``); the process is then
    stopped."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    dt = time.perf_counter() - t
    proc.kill()
    proc.wait()
    if not line.startswith(want):
        raise SystemExit(f"{cmd}: first stderr line {line!r}, expected {want!r}...")
    return dt


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "typo.yaml"
        bad.write_text("base: zoo-lm.yaml\nmodel:\n  optimizer: {lr: 1e-3\n")  # unclosed flow mapping
        ragged, unlabelled, binary = Path(tmp) / "ragged.csv", Path(tmp) / "unlabelled.csv", Path(tmp) / "binary.csv"
        ragged.write_text("a,b,y\n1,0,1\n0,1\n")
        unlabelled.write_text("x1,x2\n1,2\n")
        binary.write_bytes(b"time,event,x\n" + bytes(range(128, 256)))
        for _, files in VALUES.values():
            for name, text in files.items():
                (Path(tmp) / name).parent.mkdir(parents=True, exist_ok=True)
                (Path(tmp) / name).write_text(text)
        out = f"out_dir={tmp}/runs"
        train = [sys.executable, "train.py"]
        zoo = [sys.executable, "-m", "zoo.cli"]
        cases = {
            "yaml syntax error": [*train, f"recipe={bad}", out],
            "nested typo (+model.optimizer.lrr=1)": [*train, "recipe=zoo-lm.yaml", "+model.optimizer.lrr=1", out],
            "trainer.devices=0": [*train, "recipe=zoo-lm.yaml", "trainer.devices=0", out],
            "cond-dp model.epsilon=-1": [*train, "recipe=cond-dp.yaml", "model.epsilon=-1", out],
            "cond-dp model.conditioning=reparm": [*train, "recipe=cond-dp.yaml", "model.conditioning=reparm", out],
            "praxis data file: ragged row": [*train, "recipe=praxis.yaml", f"data.path={ragged}", "data.label=y", out],
            "cond-dp data file: no label column": [
                *train,
                "recipe=cond-dp.yaml",
                f"data.path={unlabelled}",
                "data.label=y",
                "data.y_min=0",
                "data.y_max=1",
                out,
            ],
            "survshap-iq data file: binary CSV": [*train, "recipe=survshap-iq.yaml", f"data.path={binary}", out],
            **{case: [*train, *(a.format(dir=tmp) for a in args), out] for case, (args, _) in VALUES.items()},
            "zoo info cond-dp (exit 0)": [*zoo, "info", "cond-dp"],
        }
        first_line = {"zoo eval zoo-lm.chat: first line": ([*zoo, "eval", "zoo-lm.chat"], "zoo eval: loading")}
        peer = [sys.executable, "-c", "import yaml, omegaconf"]
        times: dict[str, list[float]] = {"peer": [], **{c: [] for c in [*cases, *first_line]}}
        loads = []
        for _ in range(a.repeats):
            times["peer"].append(_time(peer, 0))
            for case, cmd in cases.items():
                times[case].append(_time(cmd, 0 if case.startswith("zoo info") else 2))
            for case, (cmd, want) in first_line.items():
                times[case].append(_time_first_line(cmd, want))
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
            notes=f"Wall time from process start to exit with code 2 for each bad recipe or data file (exit 0 "
            "for zoo info; to the first stderr line for zoo eval), "
            f"{a.repeats} interleaved repeats, ratio of medians against "
            '`python -c "import yaml, omegaconf"`. Validation reads only the recipe, the generated tables in '
            "zoo/core/schemas/, the registry names and the user's data files that a datamodule declares "
            "(zoo.core.datafiles, through the shared line-numbered readers and each file's typed columns): torch, "
            "Lightning and method code "
            "are never imported. 'max load' is the machine's 1-minute load average (2 cores shared).",
        )
    )


if __name__ == "__main__":
    main()
