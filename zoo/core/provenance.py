"""Provenance of a number: the command, commit, package versions and machine that produced it.

``provenance()`` is what :func:`zoo.core.results.write_result` stores beside every table. It imports no torch
(package versions are read from installed metadata), so it is cheap to call from any script.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from zoo.core.data import repo_root

#: Packages whose versions every result records (those missing are recorded as ``None``).
CORE_PACKAGES = ("torch", "lightning", "numpy", "scikit-learn", "transformers", "peft", "torchmetrics")

#: 1-minute load average when this module was first imported: the load an experiment started under.
LOAD_AT_START: float | None = os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def _process_age_s() -> float | None:
    """Seconds since this process started (Linux ``/proc``; None elsewhere)."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


#: How long after the process started :data:`LOAD_AT_START` was read (a script that imports the results writer late
#: records a later load; this says how late).
LOAD_READ_AFTER_S: float | None = _process_age_s()


def command_line(argv: list[str] | None = None) -> str:
    """The command that is running, as a user would retype it.

    ``python -m pkg.mod`` is reconstructed from ``__main__.__spec__`` (``sys.argv[0]`` is then the file path);
    a script path inside the repository is made relative to the repository root.
    """
    argv = list(sys.argv if argv is None else argv)
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if argv and spec is not None and spec.name and spec.name != "__main__" and argv[0].endswith(".py"):
        head = ["python", "-m", spec.name.removesuffix(".__main__")]
    elif argv and argv[0].endswith(".py"):
        path = os.path.abspath(argv[0])
        root = str(repo_root())
        head = ["python", os.path.relpath(path, root) if path.startswith(root + os.sep) else argv[0]]
    elif argv and os.path.basename(argv[0]) in ("zoo", "pytest", "py.test"):
        head = [os.path.basename(argv[0])]
    else:
        head = argv[:1]
    return shlex.join(head + argv[1:])


def git_state(root=None) -> dict:
    """``{"git_sha": str | None, "dirty": bool | None}`` of the repository (``None`` outside a git checkout).

    ``dirty`` ignores untracked files under ``results/`` and ``runs/`` (what an experiment writes itself).
    """
    root = str(root or repo_root())
    try:
        sha = subprocess.run(
            ["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {"git_sha": None, "dirty": None}
    changed = [ln[3:] for ln in status.splitlines() if ln.strip()]
    dirty = any(not p.startswith(("results/", "docs/results.md", "docs/benchmarks.md")) for p in changed)
    return {"git_sha": sha, "dirty": dirty}


def package_versions(extra: tuple[str, ...] | list[str] = ()) -> dict[str, str | None]:
    """Installed versions of :data:`CORE_PACKAGES` plus ``extra`` (distribution names), ``None`` if absent."""
    out: dict[str, str | None] = {}
    for name in (*CORE_PACKAGES, *extra):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def machine() -> dict:
    """Cores, 1-minute load at start and now, platform and Python version of this machine."""
    load_now = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    age = LOAD_READ_AFTER_S
    return {
        "cpus": os.cpu_count(),
        "load_at_start": LOAD_AT_START,
        "load_at_start_read_after_s": None if age is None else round(age, 1),
        "load_at_end": load_now,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


_GIT_AT_START: dict | None = None


def git_at_start() -> dict:
    """:func:`git_state` when first asked in this process (this module reads it on import): the code that ran, even if
    the checkout changes while a long experiment runs."""
    global _GIT_AT_START
    if _GIT_AT_START is None:
        _GIT_AT_START = git_state()
    return _GIT_AT_START


def provenance(command: str | None = None, packages: tuple[str, ...] | list[str] = ()) -> dict:
    """Everything needed to trace a number back: command, git SHA and dirty flag (as the process started), versions,
    machine, UTC date."""
    return {
        "command": command or command_line(),
        **git_at_start(),
        "packages": package_versions(packages),
        "machine": machine(),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def cached_runs_provenance(records: list[dict | None], what: str = "runs") -> tuple[dict, str]:
    """Which commits made the cached pieces of a table, and a sentence for its notes.

    An experiment that caches finished runs (or seeds) and aggregates them later writes the table with the SHA of
    the aggregating process, which does not pin the code that made the cached pieces. Each piece stores its
    :func:`git_at_start` when made; ``records`` are those (``None`` for a piece cached before it was kept). A piece
    without a commit or from a dirty tree counts as unpinned.

    Returns:
        ``({"commits": {sha: count}, "unpinned": int, "<what>": int}, note)``.
    """
    commits: dict[str, int] = {}
    unpinned = 0
    for g in records:
        g = g or {}
        if not g.get("git_sha") or g.get("dirty") is not False:
            unpinned += 1
        else:
            commits[g["git_sha"]] = commits.get(g["git_sha"], 0) + 1
    if commits:
        note = f"{what.capitalize()} made at clean commit(s) " + ", ".join(
            f"{c[:10]} ({n})" for c, n in sorted(commits.items())
        )
    else:
        note = f"No {what.rstrip('s')} made at a clean commit"
    if unpinned:
        note += f"; {unpinned} of {len(records)} {what} from a dirty tree or with no commit recorded (not pinned)"
    return {"commits": commits, "unpinned": unpinned, what: len(records)}, note + "."


git_at_start()
