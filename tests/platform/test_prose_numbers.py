"""Every number quoted in README.md's method status and quickstart text, and in the hand-written docs/ prose, has a
source in a results JSON (issue 11). A number without one fails, named with its file and line.

What counts as a quoted result: in README's methods table, every number of the last column ("status at this
scale"); elsewhere (README prose, docs/*.md that are not generated) numbers with a decimal point or followed by
``x``/``×``/``%``/`` s`` (ratios, rates, timings), outside code blocks. A number has a source when some number stored
in ``results/*/*.json`` (rows, summary, paper text, extra keys; not provenance) rounds to it at the quoted precision,
also as a percentage or in millions (``5.3M``).
"""

import json
import re

import pytest

from zoo.core.data import repo_root

GENERATED = {"results.md", "benchmarks.md"}
NUMBER = re.compile(r"(?<![\w.\-/#])(\d+(?:\.\d+)?)(?:\s*[-–]\s*(\d+(?:\.\d+)?))?(M\b|x\b|×|%| s\b)?")


def _numbers(value, out: list[float]) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        out.append(float(value))
    elif isinstance(value, str):
        out += [float(x) for x in re.findall(r"\d+(?:\.\d+)?", value)]
    elif isinstance(value, dict):
        for v in value.values():
            _numbers(v, out)
    elif isinstance(value, list):
        for v in value:
            _numbers(v, out)


def source_numbers(results_dir) -> list[float]:
    """Every number stored in the results JSON (provenance and notes excepted)."""
    out: list[float] = []
    for f in sorted(results_dir.glob("*/*.json")):
        doc = json.loads(f.read_text())
        _numbers({k: v for k, v in doc.items() if k not in ("provenance", "notes", "command")}, out)
    return out


def has_source(text: str, unit: str | None, sources: list[float]) -> bool:
    """Whether some source rounds to ``text`` (at its number of decimals), directly, as a % or in millions."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    target = float(text)
    scales = {"%": (100.0, 1.0), "M": (1e-6, 1.0)}.get(unit or "", (1.0, 100.0))
    tol = 0.5 * 10**-decimals + 1e-9
    return any(abs(v * s - target) <= tol for v in sources for s in scales)


def quoted_numbers(path, table_column_only: bool = False) -> list[tuple[int, str, str | None]]:
    """``(line, number, unit)`` of the result numbers quoted in a markdown file's prose (see the module doc)."""
    found, fenced = [], False
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if not cells or set(cells[0]) <= set("-: ") or cells[0] in ("method", "setting"):
                continue
            for m in NUMBER.finditer(re.sub(r"`[^`]*`", "", cells[-1])):
                found += [(i, n, m[3]) for n in (m[1], m[2]) if n]
            continue
        if table_column_only:
            continue
        prose = re.sub(r"Python \d+(?:\.\d+)*|`[^`]*`|\[[^\]]*\]\([^)]*\)|https?://\S+", "", line)
        for m in NUMBER.finditer(prose):
            if "." in m[1] or (m[2] and "." in m[2]) or m[3] in ("x", "×", "%", " s"):
                found += [(i, n, m[3]) for n in (m[1], m[2]) if n]
    return found


def _check(path, table_column_only: bool = False) -> list[str]:
    sources = source_numbers(repo_root() / "results")
    return [
        f"{path.name}:{line}: {num}{unit or ''} has no source in results/*/*.json"
        for line, num, unit in quoted_numbers(path, table_column_only)
        if not has_source(num, unit, sources)
    ]


def test_readme_status_numbers_have_a_source():
    missing = _check(repo_root() / "README.md")
    assert not missing, "\n".join(missing)


def test_docs_prose_numbers_have_a_source():
    docs = [p for p in sorted((repo_root() / "docs").glob("*.md")) if p.name not in GENERATED]
    missing = [m for p in docs for m in _check(p)]
    assert not missing, "\n".join(missing)


def test_checker_catches_an_unsourced_number(tmp_path):
    (tmp_path / "results" / "m").mkdir(parents=True)
    (tmp_path / "results" / "m" / "t.json").write_text(
        json.dumps({"rows": [{"f1": 0.8781, "n": 5261568, "ratio": 9.13}]})
    )
    page = tmp_path / "README.md"
    page.write_text("| method | status |\n|---|---|\n| `m` | F1 0.878, 5.3M parameters, 9.1x faster, F1 0.906 |\n")
    sources = source_numbers(tmp_path / "results")
    bad = [n for _, n, u in quoted_numbers(page) if not has_source(n, u, sources)]
    assert bad == ["0.906"]


@pytest.mark.parametrize(
    ("text", "unit", "ok"),
    [("0.88", None, True), ("87.8", "%", True), ("0.9", None, True), ("0.87", None, False), ("5.26", "M", True)],
)
def test_rounding_rule(text, unit, ok):
    assert has_source(text, unit, [0.8781, 5261568]) is ok
