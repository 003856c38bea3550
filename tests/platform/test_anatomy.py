"""One anatomy for every method, and the layering of zoo/core (GUIDE.md "Every method also means", DESIGN.md).

Each registered method's package has the same files in the same places; its card ends with a verdict and maps
equations to files; no file in zoo/ is over 400 lines without saying why; zoo/core depends on nothing above it;
no module of zoo/ (core, models, data, methods) is in an import cycle, and none imports another's private names
(imports parsed with ``ast``, function-level ones included).
"""

from __future__ import annotations

import ast
import io
import itertools
import re
import tokenize
from pathlib import Path

import pytest

from zoo.core.data import repo_root
from zoo.methods import METHODS

ROOT = repo_root()
REQUIRED = ("__init__.py", "module.py", "datamodule.py", "experiments.py", "README.md")
VERDICTS = ("Verdict: reproduced", "Verdict: partly", "Verdict: not at this scale")
MAX_LINES = 400
# methods with baselines: their baselines live in baselines.py (not as flags or inside experiments.py)
WITH_BASELINES = {"watchlog"}
# the imports of zoo.methods that core may make: the registry's name table (a dict of strings found by listing the
# folders, no method code)
CORE_MAY_IMPORT = {("zoo/core/registry.py", "zoo.methods"), ("zoo/core/registry.py", "zoo.methods.METHODS")}


def package_dir(name: str) -> Path:
    """``zoo/methods/<pkg>/`` of a registry name, from the module path its METHODS line names."""
    module = METHODS[name]
    assert module.startswith("zoo.methods."), f"{name}: {module} is not under zoo.methods"
    return ROOT.joinpath(*module.split(".")[:3])


def imports(path: Path, root: Path = ROOT) -> list[tuple[str, int]]:
    """Every module ``path`` imports, at any depth (functions, ``if`` blocks), with its line; relative imports are
    resolved against the file's package (dotted path of its folder under ``root``)."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            out.append((base, node.lineno))
            out += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]  # `from zoo.core import hub`
    return out


def table_headers(text: str) -> list[str]:
    """Header rows of the markdown tables in ``text`` (a row followed by a ``|---|`` separator row)."""
    lines = text.splitlines()
    return [
        a for a, b in itertools.pairwise(lines) if a.lstrip().startswith("|") and re.fullmatch(r"\s*\|[\s:|-]+\|\s*", b)
    ]


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_package_has_the_anatomy(name):
    pkg = package_dir(name)
    missing = [f for f in REQUIRED if not (pkg / f).is_file()]
    assert not missing, f"{name}: {pkg.relative_to(ROOT)} lacks {missing} (docs/adding-a-method.md)"
    if name in WITH_BASELINES:
        assert (pkg / "baselines.py").is_file(), f"{name}: its baselines belong in baselines.py"


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_package_declares_its_facts(name):
    """The package's ``__init__.py`` holds the method's facts (zoo/core/facts.py) and imports nothing, so the registry,
    the README generator and the platform tests read them without importing torch or the method's extra."""
    from zoo.core.facts import FACTS
    from zoo.core.registry import missing_facts

    init = package_dir(name) / "__init__.py"
    assert not [m for m, _ in imports(init)], f"{name}: {init.relative_to(ROOT)} must import nothing"
    missing = missing_facts(name)
    assert not missing, f"{name}: {init.relative_to(ROOT)} lacks " + "; ".join(
        f"{f} = ... ({FACTS[f]})" for f in missing
    )


# one file vocabulary (issue 43): the name a file of a method must not have -> the name it has instead
OLD_NAMES = {
    "render.py": "plots.py (figures)",
    "artifacts.py": "plots.py (figures)",
    "evaluate.py": "evaluation.py",
    "nets.py": "networks.py",
    "model.py": "networks.py",
    "sim.py": "synthetic.py (generated data)",
    "simulation.py": "synthetic.py (generated data)",
    "world.py": "synthetic.py (generated data)",
    "build_data.py": "a name for the data it builds, or synthetic.py where it is generated",
}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_files_use_the_one_vocabulary(name):
    pkg = package_dir(name)
    wrong = {f.name: OLD_NAMES[f.name] for f in pkg.glob("*.py") if f.name in OLD_NAMES}
    assert not wrong, f"{name}: rename in {pkg.relative_to(ROOT)}: " + "; ".join(
        f"{a} -> {b}" for a, b in wrong.items()
    )


def test_the_vocabulary_check_refuses_an_old_name(tmp_path, monkeypatch):
    (tmp_path / "render.py").write_text("")
    monkeypatch.setattr(f"{__name__}.package_dir", lambda name: tmp_path)
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path.parent)
    with pytest.raises(AssertionError, match=r"render.py -> plots.py"):
        test_method_files_use_the_one_vocabulary("any")


@pytest.mark.parametrize("name", sorted(METHODS))
def test_registered_datamodule_is_reached_from_datamodule_py(name):
    """``datamodule.py`` defines the method's datamodule or re-exports the shared one it registers."""
    import importlib

    from zoo.core.registry import get_method

    entry = get_method(name)
    mod = importlib.import_module(METHODS[name].rsplit(".", 1)[0] + ".datamodule")
    assert entry.datamodule_cls is not None, f"{name}: register_method names no datamodule"
    assert getattr(mod, entry.datamodule_cls.__name__, None) is entry.datamodule_cls, (
        f"{name}: {mod.__name__} neither defines nor re-exports {entry.datamodule_cls.__name__}"
    )


@pytest.mark.parametrize("name", sorted(METHODS))
def test_module_follows_the_template(name):
    """The registered class is a ``ZooModule`` (its hooks have defaults there, none found by ``hasattr``), and each
    export format it lists has the hook behind it: ``hf`` an ``export_hf``, ``onnx``/``torch_export`` a graph."""
    from zoo.core.module import ZooModule
    from zoo.core.registry import get_method

    cls = get_method(name).module_cls
    assert issubclass(cls, ZooModule), f"{name}: {cls.__name__} must subclass zoo.core.module.ZooModule"
    if "hf" in cls.export_formats:
        assert cls.export_hf is not ZooModule.export_hf, f"{name}: lists 'hf' but does not override export_hf"
    if {"onnx", "torch_export"} & set(cls.export_formats):
        assert (
            cls.example_input is not ZooModule.example_input
            or cls.export_graph is not ZooModule.export_graph
            or cls.export_graphs is not ZooModule.export_graphs
        ), f"{name}: lists a graph format but no graph"
    assert cls.predict_cli is not ZooModule.predict_cli or cls.predict_record is not ZooModule.predict_record, (
        f"{name}: defines neither predict_record nor predict_cli (zoo predict)"
    )


@pytest.mark.parametrize("name", sorted(METHODS))
def test_card_has_equation_table_and_ends_with_a_verdict(name):
    card = (package_dir(name) / "README.md").read_text()
    headers = [h.lower() for h in table_headers(card)]
    assert any(("equation" in h or "eq." in h) and "file" in h for h in headers), (
        f"{name}: README.md needs an equation-to-file table (a header naming 'equation' and 'file'); headers: {headers}"
    )
    last = [line for line in card.splitlines() if line.strip()][-1].strip()
    assert last.startswith(VERDICTS), f"{name}: README.md's last line must start with one of {VERDICTS}: {last!r}"
    verdict = next(v for v in VERDICTS if last.startswith(v))
    assert len(last) > len(verdict) + 20, f"{name}: the verdict needs its reason: {last!r}"


def source_lines(text: str) -> int:
    """Lines of a module as if every bracketed expression were written on one line: a line counts when a token or a
    comment starts on it outside brackets (every line of a docstring or other multi-line string counts). So the
    formatter exploding a call or a list one item per line does not move a file across the guide."""
    counted: set[int] = set()
    depth = 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        if depth == 0:
            counted.update(range(tok.start[0], tok.end[0] + 1) if tok.type == tokenize.STRING else [tok.start[0]])
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
    return len(counted)


def test_source_lines_by_hand():
    text = 'x = f(\n    1,\n    2,\n)\n# note\n"""a\nb"""\ny = [1,\n     2]\n'
    assert source_lines(text) == 5  # x = f(...), the comment, the docstring's two lines, y = [...]


def test_no_file_over_the_line_limit_without_a_reason():
    too_long = []
    for path in sorted((ROOT / "zoo").rglob("*.py")):
        n = source_lines(path.read_text())
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if n > MAX_LINES and not re.search(rf"over {MAX_LINES} lines", doc):
            too_long.append(f"{path.relative_to(ROOT)} ({n} lines, brackets joined: ``source_lines``)")
    assert not too_long, (
        f"over {MAX_LINES} lines without 'over {MAX_LINES} lines because ...' in the module docstring: {too_long}"
    )


def test_core_imports_nothing_above_it():
    bad = []
    for path in sorted((ROOT / "zoo" / "core").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        for module, line in imports(path):
            top = ".".join(module.split(".")[:2])
            if top in ("zoo.models", "zoo.data", "zoo.methods") and (rel, module) not in CORE_MAY_IMPORT:
                bad.append(f"{rel}:{line} imports {module}")
    assert not bad, bad


def module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """``{module: modules of zoo/ it imports}`` over every ``.py`` under ``root/zoo`` (a package is its
    ``__init__``), at any depth: a function-level import is an edge like any other."""
    files = {}
    for path in (root / "zoo").rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return {name: {m for m, _ in imports(path, root) if m in files and m != name} for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as ``[a, b, ..., a]`` (depth-first search in sorted order), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state and (found := visit(m)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_zoo_imports_without_a_cycle():
    """The whole of zoo/ (core, models, data and every method's package): a cycle hidden by a function-level
    import is still a cycle; break it by moving the shared part below both modules."""
    cycle = find_cycle(module_graph())
    assert cycle is None, f"import cycle in zoo/: {' -> '.join(cycle)}"


def test_no_private_name_is_imported_across_modules():
    """``from zoo.x import _name`` (or ``module._name`` after ``from zoo.core import module``) reaches into another
    module's internals: make the name public where it is defined, or move the code that needs it there."""
    bad = []
    for path in sorted((ROOT / "zoo").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("zoo"):
                bad += [
                    f"{path.relative_to(ROOT)}:{node.lineno} imports {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
                aliases |= {a.asname or a.name for a in node.names}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not bad, bad


def test_the_cycle_finder_sees_a_cycle_through_a_function_level_import(tmp_path):
    """The cycle test is only as good as :func:`module_graph` and :func:`find_cycle`: a hand case."""
    pkg = tmp_path / "zoo" / "methods" / "probe"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from zoo.methods.probe.b import g\n")
    (pkg / "b.py").write_text("def g():\n    from zoo.methods.probe import a\n")
    cycle = find_cycle(module_graph(tmp_path))
    assert cycle is not None and set(cycle) == {"zoo.methods.probe.a", "zoo.methods.probe.b"}
    (pkg / "b.py").write_text("def g():\n    import os\n")
    assert find_cycle(module_graph(tmp_path)) is None


def test_the_import_parser_sees_function_level_and_relative_imports(tmp_path):
    """The checks above are only as good as :func:`imports`: a hand case with both kinds."""
    path = tmp_path / "zoo" / "core" / "probe.py"
    path.parent.mkdir(parents=True)
    path.write_text(
        "import os\n\ndef f():\n    from zoo.models.causal_lm import empty_weights\n"
        "    if True:\n        from . import hub\n"
    )
    assert imports(path, tmp_path) == [
        ("os", 1),
        ("zoo.models.causal_lm", 4),
        ("zoo.models.causal_lm.empty_weights", 4),
        ("zoo.core", 6),
        ("zoo.core.hub", 6),
    ]
