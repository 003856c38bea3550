"""What state each run is in, and the ``zoo runs [NAME]`` listing; read from plain files, without torch.

A training process writes ``status.json`` into its run directory (rank 0): ``running`` with its process id and host
when the fit starts, the step of each checkpoint it writes, and ``finished`` (or ``failed``) when the fit ends. A
``running`` record whose process is gone from this host is a run that was killed. Runs written before this file
existed read as ``finished`` when they have ``metrics.json`` (written at the end of a fit), else ``killed``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import socket
import time
from pathlib import Path

import yaml

STATUS_FILE = "status.json"


def mark(run_dir: Path, status: str | None = None, step: int | None = None) -> None:
    """Record ``status`` (``running`` | ``finished`` | ``failed``) and/or the ``step`` of the newest checkpoint in
    ``run_dir/status.json``, keeping what is not given; written atomically (a kill leaves the previous record)."""
    path = Path(run_dir) / STATUS_FILE
    rec = _read(path)
    if status is not None:
        rec.update(status=status, pid=os.getpid(), host=socket.gethostname())
    if step is not None:
        rec["step"] = int(step)
    rec["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    part = path.with_suffix(".json.part")
    part.write_text(json.dumps(rec))
    os.replace(part, path)


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def run_state(run_dir: Path) -> dict:
    """``{"run", "status", "step", "best"}`` of one run directory: ``status`` is ``finished`` | ``killed`` |
    ``running`` | ``failed``; ``step`` the global step of its newest checkpoint (or of its end), None when unknown;
    ``best`` the best value of its ``checkpoint.monitor`` (see :func:`best_metric`), None without one."""
    run_dir = Path(run_dir)
    rec = _read(run_dir / STATUS_FILE)
    done = _read(run_dir / "metrics.json").get("metrics") or {}
    status = rec.get("status") or ("finished" if done else "killed")
    if status == "running" and rec.get("host") == socket.gethostname() and not _alive(int(rec.get("pid", -1))):
        status = "killed"
    step = rec.get("step")
    if step is None and "global_step" in done:
        step = int(done["global_step"])
    return {"run": str(run_dir), "status": status, "step": step, "best": best_metric(run_dir, done)}


def run_config(run_dir: Path) -> dict:
    """The run's resolved recipe (``<run_dir>/config.yaml``); ``{}`` when the file is absent or empty."""
    path = Path(run_dir) / "config.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def best_metric(run_dir: Path, final: dict | None = None) -> str | None:
    """``"val/loss 0.4123 (min)"``: the best logged value of the run's ``checkpoint.monitor`` in ``logs/metrics.csv``,
    else its end-of-fit value in ``metrics.json`` (``"... (at end)"``); None when the recipe sets no monitor or the
    metric was never logged."""
    ck = run_config(run_dir).get("checkpoint") or {}
    key, mode = ck.get("monitor"), ck.get("mode", "min")
    if not key:
        return None
    values = [v for v in metric_columns(Path(run_dir)).get(key, ([], []))[1] if math.isfinite(v)]
    if values:
        return f"{key} {(min if mode == 'min' else max)(values):.4g} ({mode})"
    if final and key in final:
        return f"{key} {final[key]:.4g} (at end)"
    return None


def metric_columns(run_dir: Path) -> dict[str, tuple[list[int], list[float]]]:
    """``{column: (steps, values)}`` of the run's ``logs/metrics.csv`` (the CSV logger's file; ``{}`` without one),
    blank cells skipped."""
    path = Path(run_dir) / "logs" / "metrics.csv"
    if not path.is_file():
        return {}
    out: dict[str, tuple[list[int], list[float]]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("step") in (None, ""):
                continue
            step = int(float(row["step"]))
            for k, v in row.items():
                if k in ("step", "epoch") or v in (None, ""):
                    continue
                try:
                    value = float(v)
                except ValueError:
                    continue
                steps, values = out.setdefault(k, ([], []))
                steps.append(step)
                values.append(value)
    return out


def list_runs(out_dir: Path, name: str | None = None) -> list[dict]:
    """:func:`run_state` of every ``<out_dir>/<name>/version_N`` (every name when ``name`` is None), by name and N."""
    from zoo.core.run import versions

    roots = [Path(out_dir) / name] if name else sorted(p for p in Path(out_dir).glob("*") if p.is_dir())
    return [run_state(v) for root in roots for v in versions(root)]


def render(rows: list[dict]) -> str:
    """The ``zoo runs`` table: run, status, step, best metric, one run a line."""
    table = [("run", "status", "step", "best")] + [
        (r["run"], r["status"], "?" if r["step"] is None else str(r["step"]), r["best"] or "-") for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row[:3], widths)) + "  " + row[3] for row in table)
