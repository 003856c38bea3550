"""Install footprint: disk taken by what ``pip install -e .`` and ``pip install -e ".[dev]"`` pull into this
environment, with the CUDA libraries and triton that the default torch wheel brings even to a CPU-only machine.

Sizes are the installed files of each distribution (``importlib.metadata`` RECORD entries), grouped as: the core
requirement closure of ``zoo``, the extra closure that ``dev`` adds on top, and within the core the ``nvidia-*``
CUDA wheels and ``triton`` (both absent with the CPU-only torch wheel). Measured on the environment it runs in.

    python benchmarks/install_footprint.py

Writes ``results/platform/install-footprint.json`` (``kind: benchmark``).
"""

from __future__ import annotations

import re
from importlib import metadata

from packaging.requirements import Requirement

from zoo.core.results import write_result


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _zoo_extras(extras: set[str]) -> set[str]:
    """``extras`` plus the zoo extras they name in turn (``dev = ["zoo[export,graph,...]"]``)."""
    specs = [Requirement(s) for s in metadata.distribution("zoo").requires or []]
    grown = set(extras)
    while True:
        more = {
            e
            for r in specs
            if _norm(r.name) == "zoo" and r.marker is not None and any(r.marker.evaluate({"extra": x}) for x in grown)
            for e in r.extras
        } - grown
        if not more:
            return grown
        grown |= more


def _closure(roots: list[Requirement], extras: set[str]) -> set[str]:
    """Installed distributions reachable from ``roots`` (zoo's markers evaluated with the given extras)."""
    extras = _zoo_extras(extras)
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        req = todo.pop()
        name = _norm(req.name)
        if name in seen:
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        wanted = set(req.extras)
        for spec in dist.requires or []:
            sub = Requirement(spec)
            if _norm(sub.name) == "zoo":
                continue
            env_extras = wanted | (extras if name == "zoo" else set())
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in env_extras or {""}):
                todo.append(sub)
    return seen


def _megabytes(names: set[str]) -> float:
    total = 0
    for name in names:
        for f in metadata.distribution(name).files or []:
            total += f.size or 0
    return total / 2**20


def main() -> None:
    core = _closure([Requirement("zoo")], set()) - {"zoo"}
    dev = _closure([Requirement("zoo")], {"dev"}) - {"zoo"} - core
    cuda = {n for n in core if n.startswith("nvidia-")}
    triton = {n for n in core if n == "triton"}
    rows = [
        {"group": "core (pip install -e .)", "distributions": len(core), "MB": _megabytes(core)},
        {"group": "  of which CUDA wheels (nvidia-*)", "distributions": len(cuda), "MB": _megabytes(cuda)},
        {"group": "  of which triton", "distributions": len(triton), "MB": _megabytes(triton)},
        {
            "group": "added by .[dev] (every extra, test and bench tools)",
            "distributions": len(dev),
            "MB": _megabytes(dev),
        },
    ]
    for r in rows:
        print(f"{r['group']:<55} {r['distributions']:>4} distributions {r['MB']:>8.0f} MB")
    print(
        write_result(
            "platform",
            "install-footprint",
            rows,
            kind="benchmark",
            paper="n/a (what a user downloads and keeps on disk)",
            notes="Installed size of each distribution's files, from its RECORD, in the environment "
            "the script runs in (torch " + metadata.version("torch") + "). The CUDA wheels and "
            "triton come with the default torch wheel on Linux even without a GPU; the CPU-only "
            "wheel (README, Install) leaves them out.",
        )
    )


if __name__ == "__main__":
    main()
