"""The locked environment the zoo is tested with: write, compare and check ``constraints*.txt``.

pyproject.toml keeps compatible ranges for people who use the zoo as a library; the lock files pin every package
of one environment (Python 3.11, Linux x86_64, CPU) to the versions CI installs and tests:

- ``constraints.txt``: core and every extra in ``dev`` (all but ``markllm``), what ``pip install -e ".[dev]"
  -c constraints.txt`` installs;
- ``constraints-markllm.txt``: core, the ``markllm`` extra and what rlcracker's MarkLLM check needs beside it
  (``text``, ``test``), kept apart because MarkLLM pins Pillow 9.4 and openai 0.28, which the dev environment
  cannot hold.

Commands (run from the repository root)::

    python tools/lock.py                 # refresh both files: a fresh venv resolves each set as pip would today
    python tools/lock.py constraints-markllm.txt   # refresh one of them
    python tools/lock.py --diff          # what today's unpinned resolution would change (nothing is written)
    python tools/lock.py --check-installed   # this environment holds exactly the locked versions

A refresh resolves with ``pip install --dry-run --ignore-installed --report`` in a throw-away virtual environment
(so nothing on the machine leaks in) and fails if an extra moves a direct requirement of the core: an extra must
never downgrade the core stack. It records the core-alone resolution, and the transitive packages the extras do
move, in the file's header, so the test suite can check that rule (tests/platform/test_lock.py).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import tempfile
import tomllib
import venv
from datetime import date
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "zoo"
#: lock file -> the requirement it resolves (relative to the repository root)
LOCKS = {"constraints.txt": ".[dev]", "constraints-markllm.txt": ".[markllm,text,test]"}
#: what each lock is, for its header
ROLE = {
    "constraints.txt": "the environment CI installs and tests",
    "constraints-markllm.txt": "resolved as one set, not installed by CI",
}
REFRESH = "python tools/lock.py"
CORE_HEADER = "# core alone: "


def canonical(name: str) -> str:
    """PEP 503 normalised project name (``Pillow`` and ``pillow`` are one package)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """``(pins, core_alone)`` of a lock file: ``{canonical name: version}`` of its ``name==version`` lines, and the
    core-alone resolution recorded in its header.

    Raises:
        ValueError: a line that is neither a comment nor ``name==version`` (named ``file:line``).
    """
    pins, core = {}, {}
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith(CORE_HEADER):
            core.update(_pairs(line[len(CORE_HEADER) :].split(), f"{path.name}:{i}"))
        elif line.strip() and not line.startswith("#"):
            pins.update(_pairs([line.strip()], f"{path.name}:{i}"))
    return pins, core


def _pairs(items: list[str], where: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, version = item.partition("==")
        if not sep or not name or not version:
            raise ValueError(f"{where}: {item!r} is not name==version")
        out[canonical(name)] = version
    return out


def resolve(python: Path, requirement: str) -> dict[str, str]:
    """What ``pip install <requirement>`` would install into an empty environment: ``{canonical name: version}``,
    the project itself left out. Uses the machine's pip configuration (its indexes and constraints)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        done = subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--dry-run",
                "--ignore-installed",
                "--quiet",
                "--report",
                str(report),
                requirement,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            noise = re.compile(r"^WARNING: Location '.*' is ignored")  # this machine's local indexes, harmless
            sys.stderr.write("".join(line for line in done.stderr.splitlines(True) if not noise.match(line)))
            raise SystemExit(f"pip could not resolve {requirement!r} (exit {done.returncode})")
        items = json.loads(report.read_text())["install"]
    found = {canonical(i["metadata"]["name"]): i["metadata"]["version"] for i in items}
    found.pop(PROJECT, None)
    return found


def core_stack() -> set[str]:
    """Canonical names of the core's direct requirements (pyproject's ``dependencies``): what no extra may move."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {canonical(re.match(r"[A-Za-z0-9._-]+", d).group()) for d in deps}


def moved_by_extras(core: dict[str, str], full: dict[str, str], only: set[str] | None = None) -> list[str]:
    """The core-alone packages (those in ``only``, if given) whose version differs in the full resolution, as
    ``name a -> b`` lines."""
    return [
        f"{name} {version} -> {full.get(name, 'absent')}"
        for name, version in sorted(core.items())
        if full.get(name) != version and (only is None or name in only)
    ]


def render(lock_name: str, requirement: str, pins: dict[str, str], core: dict[str, str]) -> str:
    """The text of a lock file: a header (what, for which platform, how to refresh), the core-alone resolution,
    then one ``name==version`` per line, sorted."""
    header = [
        f'# {lock_name}: pinned versions for `pip install -e "{requirement}"`, {ROLE[lock_name]}.',
        f"# Python {platform.python_version()} on {sys.platform} {platform.machine()}; resolved {date.today()}.",
        f"# Generated by `{REFRESH}`: do not edit by hand (pyproject.toml keeps the compatible ranges).",
        "# The core alone (`pip install -e .`) resolves to the versions below. No extra may move a direct",
        "# requirement of the core; transitive ones an extra moves are listed here:",
        *(f"#   moved by the extras: {m}" for m in moved_by_extras(core, pins)),
    ]
    core_lines, line = [], CORE_HEADER
    for item in (f"{n}=={v}" for n, v in sorted(core.items())):
        if len(line) + len(item) > 118:
            core_lines.append(line.rstrip())
            line = CORE_HEADER
        line += item + " "
    core_lines.append(line.rstrip())
    return "\n".join([*header, *core_lines, *(f"{n}=={v}" for n, v in sorted(pins.items()))]) + "\n"


def fresh_python(tmp: Path) -> Path:
    """A new virtual environment's interpreter (no system site-packages), made with this Python."""
    venv.EnvBuilder(with_pip=True).create(tmp / "venv")
    return tmp / "venv" / "bin" / "python"


def refresh(write: bool, names: list[str]) -> int:
    """Resolve the locks ``names`` afresh; write the files (``write``) or print how today's resolution differs."""
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        python = fresh_python(Path(tmp))
        core = resolve(python, ".")
        for lock_name in names:
            requirement = LOCKS[lock_name]
            full = resolve(python, requirement)
            moved = moved_by_extras(core, full, core_stack())
            if moved:
                print(f"{lock_name}: {requirement} moves the core stack:\n  " + "\n  ".join(moved))
                status = 1
                continue
            path = ROOT / lock_name
            if write:
                path.write_text(render(lock_name, requirement, full, core))
                print(f"wrote {lock_name}: {len(full)} packages")
            elif path.exists():
                old, _ = read_lock(path)
                changes = diff(old, full)
                print(
                    f"{lock_name}: "
                    + (
                        "matches today's resolution"
                        if not changes
                        else f"{len(changes)} changes today:\n  " + "\n  ".join(changes)
                    )
                )
    return status


def diff(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """``name old -> new`` for every package added, removed or moved between two resolutions, sorted."""
    return [
        f"{n} {old.get(n, 'absent')} -> {new.get(n, 'absent')}"
        for n in sorted(old.keys() | new.keys())
        if old.get(n) != new.get(n)
    ]


def installed() -> dict[str, str]:
    """``{canonical name: version}`` of this environment's distributions, the project itself left out."""
    found = {canonical(d.metadata["Name"]): d.version for d in metadata.distributions()}
    found.pop(PROJECT, None)
    return found


def check_installed(lock_name: str) -> int:
    """0 if this environment holds exactly the lock: every pin at its version (a local label such as ``+cpu``
    aside) and nothing unlocked but pip itself; else print the differences and return 1."""
    pins, _ = read_lock(ROOT / lock_name)
    have = installed()
    wrong = [
        f"{n}: locked {v}, installed {have.get(n, 'nothing')}"
        for n, v in sorted(pins.items())
        if have.get(n, "").split("+")[0] != v.split("+")[0]
    ]
    wrong += [f"{n}: installed {v}, not in the lock" for n, v in sorted(have.items()) if n not in pins and n != "pip"]
    print(f"{lock_name}: " + ("every pin installed" if not wrong else "\n  ".join(["differs:", *wrong])))
    return 1 if wrong else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "locks", nargs="*", metavar="LOCK", help=f"the lock files to refresh (default all: {', '.join(LOCKS)})"
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--diff", action="store_true", help="print what today's resolution changes; write nothing")
    group.add_argument(
        "--check-installed",
        metavar="LOCK",
        nargs="?",
        const="constraints.txt",
        help="check that this environment holds LOCK's versions (default constraints.txt)",
    )
    args = parser.parse_args(argv)
    unknown = [name for name in args.locks if name not in LOCKS]
    if unknown:
        parser.error(f"no lock named {', '.join(unknown)} (the locks: {', '.join(LOCKS)})")
    if args.check_installed:
        return check_installed(args.check_installed)
    return refresh(write=not args.diff, names=args.locks or list(LOCKS))


if __name__ == "__main__":
    sys.exit(main())
