"""Adding a method touches its own folder, its recipes and nothing else (#43 "Done when"): a throwaway method, written
by the fixture below into a tmp folder (a package with its facts in ``__init__.py`` and the template ``module.py`` of
docs/adding-a-method.md; a recipe and its ``tiny/`` overlay) and registered through ``ZOO_PLUGINS``, is picked up by
the registry-driven platform checks with no table to edit: its facts, the whole CLI lifecycle (info, train, resume,
predict, predict --json, eval, export) and its bad-data row. Without a fact, the check fails naming the file and what
to add.

Slow (about 30 s: one tiny train, a resume, eval and export of a 3-parameter model)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from test_data_checked_first import check_bad_row
from test_method_lifecycle import check_lifecycle

from zoo.core.data import repo_root
from zoo.core.facts import FACTS, FactError
from zoo.core.registry import missing_facts

pytestmark = pytest.mark.slow


def template_module() -> str:
    """The template method of docs/adding-a-method.md (the python block after its ``<!-- template: module.py``
    marker): the test runs what the doc shows."""
    doc = (repo_root() / "docs" / "adding-a-method.md").read_text()
    block = re.search(r"<!-- template: module\.py[^\n]*-->\n```python\n(.*?)\n```", doc, re.S)
    assert block, "docs/adding-a-method.md lost its '<!-- template: module.py -->' python block"
    return block.group(1) + "\n"


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    """A new method ``throwaway`` in ``tmp_path/src/throwaway_method/`` with recipes in ``tmp_path/recipes/``;
    returns the package's ``__init__.py`` (its facts)."""
    src, recipes = tmp_path / "src", tmp_path / "recipes"
    (src / "throwaway_method").mkdir(parents=True)
    (recipes / "tiny").mkdir(parents=True)
    data = tmp_path / "line.csv"
    data.write_text("x,y\n" + "".join(f"{i / 10},{2 * i / 10 + 1}\n" for i in range(12)))
    (recipes / "throwaway.yaml").write_text(
        textwrap.dedent(f"""\
        method: throwaway
        model: {{lr: 0.05}}
        data: {{path: {data}, batch_size: 4}}
        trainer: {{max_steps: 6, max_epochs: -1, accelerator: cpu, devices: 1}}
        logger: {{kind: csv}}
        export: {{formats: [package]}}
        """)
    )
    (recipes / "tiny" / "throwaway.yaml").write_text("trainer: {max_steps: 2, enable_progress_bar: false}\n")
    (src / "throwaway_method" / "module.py").write_text(template_module())
    facts = {
        "EXTRA": None,
        "WHAT": "a least-squares line",
        "RECIPES": "`throwaway.yaml`",
        "WEIGHTS": "none",
        "STATUS": "fits a line",
        "EXAMPLE": {"recipe": str(recipes / "throwaway"), "predict": ["0.5", "1.5"]},
        "BAD_ROW": {
            "recipe": str(recipes / "throwaway.yaml"),
            "files": {"bad.csv": "x,y\n1,2\n3,four\n"},
            "overrides": ["data.path=bad.csv"],
            "error": "bad.csv:3",
            "key": "data.path",
        },
    }
    init = src / "throwaway_method" / "__init__.py"
    init.write_text('"""A throwaway method."""\n' + "".join(f"{k} = {v!r}\n" for k, v in facts.items()))
    monkeypatch.syspath_prepend(str(src))
    monkeypatch.setenv("ZOO_PLUGINS", "digits-mlp=toy_digits,throwaway=throwaway_method.module")
    return init


def test_a_new_method_is_picked_up_by_every_registry_driven_check(throwaway, tmp_path, capsys, caplog, monkeypatch):
    assert missing_facts("throwaway") == []
    (tmp_path / "life").mkdir()
    (tmp_path / "bad").mkdir()
    check_lifecycle("throwaway", tmp_path / "life", capsys, caplog, monkeypatch)
    check_bad_row("throwaway", tmp_path / "bad", monkeypatch, capsys)


def test_a_method_without_a_fact_is_told_what_to_add(throwaway, tmp_path, capsys, caplog, monkeypatch):
    for fact, check in (
        ("EXAMPLE", lambda: check_lifecycle("throwaway", tmp_path, capsys, caplog, monkeypatch)),
        ("BAD_ROW", lambda: check_bad_row("throwaway", tmp_path, monkeypatch, capsys)),
    ):
        _drop(throwaway, fact, monkeypatch)
        assert fact in missing_facts("throwaway")
        with pytest.raises(FactError) as e:
            check()
        assert str(throwaway) in str(e.value) and f"{fact} = ..." in str(e.value) and FACTS[fact] in str(e.value)


def _drop(init: Path, fact: str, monkeypatch) -> None:
    """Remove ``fact`` from the throwaway package's ``__init__.py`` (and forget the imported package)."""
    import sys

    init.write_text("\n".join(line for line in init.read_text().splitlines() if not line.startswith(fact)) + "\n")
    monkeypatch.delitem(sys.modules, "throwaway_method", raising=False)
