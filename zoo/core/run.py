"""Run directories: ``<out_dir>/<name>/version_N/`` with config.yaml, checkpoints/ and logs/.

Rank 0 picks the directory and exports it as ``ZOO_RUN_DIR``; Lightning's DDP launcher re-executes the
command line with the parent's environment, so every child rank reads the same directory instead of
choosing its own. Under ``torchrun`` or SLURM (every rank started by the launcher) set ``ZOO_RUN_DIR``
yourself, or pass ``resume=auto`` so all ranks pick the latest version.
"""

from __future__ import annotations

import os
import re
import uuid
from contextlib import contextmanager
from pathlib import Path

import yaml

from zoo.core.errors import UserError

RUN_DIR_ENV = "ZOO_RUN_DIR"


class RunError(UserError, ValueError):
    """A run directory or resume target that cannot be used."""


def is_child_rank() -> bool:
    return any(int(os.environ.get(v, "0") or 0) > 0 for v in ("LOCAL_RANK", "RANK", "NODE_RANK"))


def versions(root: Path) -> list[Path]:
    """``version_N`` folders under ``root``, by N."""
    found = [(int(m.group(1)), p) for p in root.glob("version_*") if (m := re.fullmatch(r"version_(\d+)", p.name))]
    return [p for _, p in sorted(found)]


def open_run_dir(cfg: dict) -> tuple[Path, str | None]:
    """Choose (and on rank 0 create) the run directory for ``cfg``.

    Returns:
        ``(run_dir, resume_ckpt)``; ``resume_ckpt`` is the checkpoint to continue from, or None.

    Raises:
        RunError: ``resume=PATH`` to a missing file; a child rank without ``ZOO_RUN_DIR``.
    """
    pinned = os.environ.get(RUN_DIR_ENV)
    resume = cfg.get("resume")
    root = Path(cfg.get("out_dir") or "runs") / cfg["name"]
    if pinned:
        run_dir = Path(pinned)
    elif resume == "auto":
        done = [v for v in versions(root) if _newest_checkpoint(v)]
        run_dir = done[-1] if done else _next_version(root)
    elif resume:
        ckpt = Path(resume)
        if not ckpt.is_file():
            raise RunError(f"resume: no such checkpoint {ckpt}")
        run_dir = ckpt.resolve().parent.parent if ckpt.parent.name == "checkpoints" else _next_version(root)
    elif is_child_rank():
        raise RunError(
            f"this process is rank > 0 but {RUN_DIR_ENV} is not set; set it to the shared run "
            "directory (Lightning's launcher does this for you; torchrun/SLURM do not)"
        )
    else:
        run_dir = _next_version(root)
    resume_ckpt = None
    if resume == "auto":
        newest = _newest_checkpoint(run_dir)
        resume_ckpt = str(newest) if newest else None
    elif resume:
        resume_ckpt = str(resume)
    if not is_child_rank():  # also when pinned: under torchrun / SLURM nobody else creates the exported directory
        (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    return run_dir, resume_ckpt


def find_checkpoint(run_dir: Path, which: str = "best") -> Path:
    """The run's best checkpoint (``which="best"``, falling back to last) or its ``last.ckpt``.

    Raises:
        run.RunError: the run has no checkpoint.
    """
    ckdir = Path(run_dir) / "checkpoints"
    best = sorted(ckdir.glob("best-*.ckpt"), key=lambda p: p.stat().st_mtime)
    if which == "best" and best:
        return best[-1]
    if (ckdir / "last.ckpt").is_file():
        return ckdir / "last.ckpt"
    raise RunError(f"{run_dir}: no checkpoint in {ckdir}")


@contextmanager
def pinned_run_dir(run_dir: Path):
    """Export ``ZOO_RUN_DIR`` while training so re-executed DDP ranks find rank 0's directory; restore after."""
    before = os.environ.get(RUN_DIR_ENV)
    os.environ[RUN_DIR_ENV] = str(Path(run_dir).resolve())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(RUN_DIR_ENV, None)
        else:
            os.environ[RUN_DIR_ENV] = before


def _newest_checkpoint(run_dir: Path) -> Path | None:
    """``last.ckpt``, or the newest best-k checkpoint when a run was killed before its first ``last.ckpt``."""
    ckdir = Path(run_dir) / "checkpoints"
    last = ckdir / "last.ckpt"
    if last.is_file():
        return last
    best = sorted(ckdir.glob("best-*.ckpt"), key=lambda p: p.stat().st_mtime)
    return best[-1] if best else None


def _next_version(root: Path) -> Path:
    vs = versions(root)
    return root / f"version_{int(vs[-1].name[8:]) + 1 if vs else 0}"


def write_config(run_dir: Path, cfg: dict, resuming: bool) -> list[str]:
    """Write the resolved recipe to ``run_dir/config.yaml``; when resuming, list what the resumed recipe changes
    (``trainer.max_steps: 2 -> 4``) and save it, so the file describes the run as it continues and a later resume
    with the same settings reports no change. The ``model:`` block stays as first saved: the checkpoint's hparams
    record the model, and ``resume.own_settings`` compares them with the first recipe.

    Returns:
        The key paths whose values differ from the saved config (empty for a fresh run).
    """
    path = run_dir / "config.yaml"
    if resuming and path.is_file():
        old = yaml.safe_load(path.read_text()) or {}
        changed = _diff(old, cfg, skip={"resume", "_recipe"})
        if changed:
            new = {k: v for k, v in cfg.items() if k != "resume"}
            path.write_text(yaml.safe_dump({**new, "model": old["model"]} if "model" in old else new, sort_keys=False))
        return changed
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return []


def _diff(a: dict, b: dict, prefix: str = "", skip=()) -> list[str]:
    out = []
    for k in sorted(set(a) | set(b)):
        if k in skip:
            continue
        va, vb = a.get(k), b.get(k)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += _diff(va, vb, f"{prefix}{k}.")
        elif va != vb:
            out.append(f"{prefix}{k}: {va!r} -> {vb!r}")
    return out


def wandb_run_id(run_dir: Path) -> str:
    """The run's wandb id, made once and kept in ``run_dir/wandb_id.txt`` so resumes continue one run."""
    path = run_dir / "wandb_id.txt"
    if path.is_file():
        return path.read_text().strip()
    rid = uuid.uuid4().hex[:12]
    if not is_child_rank():
        path.write_text(rid + "\n")
    return rid
