"""README's per-method parts, generated from each method's facts (:mod:`zoo.core.facts`) and its table
(``zoo/core/schemas/``), as ``python -m zoo.core.results`` generates docs/results.md: the methods table, the export
table and the sentence listing each method's extra. Nothing here imports torch or a method.

``python -m zoo.core.readme`` rewrites the blocks between ``<!-- BEGIN generated: NAME -->`` and
``<!-- END generated: NAME -->`` in README.md; ``--check`` exits 1 when one is stale (a test runs it).
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

from zoo.core.data import repo_root
from zoo.core.registry import list_methods, method_fact
from zoo.core.results import render_table
from zoo.core.schema import method_schema


def package_folder(name: str) -> str:
    """``zoo/methods/<pkg>`` of a built-in method (``-`` -> ``_``)."""
    return f"zoo/methods/{name.replace('-', '_')}"


def methods_table(names: list[str]) -> str:
    """The methods table: one row per method from its ``WHAT``, ``RECIPES``, ``WEIGHTS`` and ``STATUS`` facts."""
    rows = [
        {
            "method": f"`{n}`",
            "what": method_fact(n, "WHAT"),
            "recipes": method_fact(n, "RECIPES"),
            "zoo weights": method_fact(n, "WEIGHTS"),
            "card": f"[card]({package_folder(n)}/README.md)",
            "status at this scale": method_fact(n, "STATUS"),
        }
        for n in names
    ]
    return render_table(rows)


def export_table(names: list[str]) -> str:
    """Methods grouped by the export formats their tables record (``export_formats`` of the module class), the
    groups with most formats first."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for n in names:
        table = method_schema(n)
        if table is None:
            raise SystemExit(f"{n}: no table in zoo/core/schemas/; run python -m zoo.core.schema --write {n}")
        groups.setdefault(tuple(table["export_formats"]), []).append(n)
    order = sorted(groups, key=lambda f: (-len(f), f))
    return render_table([{"exports": ", ".join(f), "methods": ", ".join(sorted(groups[f]))} for f in order])


def extra_requirements(extra: str, root: Path) -> tuple[list[str], list[str]]:
    """``(distributions, zoo extras it includes)`` of pyproject's optional-dependency ``extra``."""
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"][extra]
    own = [e for d in deps if (m := re.fullmatch(r"zoo\[([\w,-]+)\]", d)) for e in m.group(1).split(",")]
    dists = [re.split(r"[\s\[<>=!~;(]", d, maxsplit=1)[0] for d in deps if not d.startswith("zoo[")]
    return dists, own


def extras_sentence(names: list[str], root: Path) -> str:
    """``The extras: `st-tgexplainer` needs `.[graph]` (torch-geometric), ...`` for every method with an extra."""
    parts = []
    for n in names:
        extra = method_fact(n, "EXTRA")
        if extra:
            dists, own = extra_requirements(extra, root)
            what = ", ".join(dists) + "".join(f", with `.[{e}]`" for e in own)
            parts.append(f"`{n}` needs `.[{extra}]` ({what})")
    return "The extras: " + ", ".join(parts) + "."


def blocks(root: Path) -> dict[str, str]:
    """Every generated block of README.md by name."""
    names = [n for n in list_methods() if (root / package_folder(n)).is_dir()]  # built-ins, not plug-ins
    return {"methods": methods_table(names), "exports": export_table(names), "extras": extras_sentence(names, root)}


def render(text: str, generated: dict[str, str]) -> str:
    """``text`` with each ``BEGIN``/``END generated: NAME`` block replaced by ``generated[NAME]``.

    Raises:
        SystemExit: a block's markers are missing.
    """
    for name, body in generated.items():
        pattern = re.compile(rf"(<!-- BEGIN generated: {name} [^>]*-->\n).*?(\n<!-- END generated: {name} -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(
                f"README.md has no '<!-- BEGIN generated: {name} ... -->' ... '<!-- END generated: {name} -->' block"
            )
        text = pattern.sub(lambda m, body=body: m.group(1) + body + m.group(2), text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo.core.readme", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md is stale, write nothing")
    args = parser.parse_args(argv)
    root = repo_root()
    path = root / "README.md"
    old = path.read_text()
    new = render(old, blocks(root))
    if args.check:
        if new != old:
            print("README.md is stale: run python -m zoo.core.readme", file=sys.stderr)
            return 1
        return 0
    if new != old:
        path.write_text(new)
    print(f"README.md: {'rewritten' if new != old else 'up to date'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
