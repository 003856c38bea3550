"""README's per-method parts (the methods table, the export table, the sentence of extras) are generated from each
method's facts and table (no torch import) by ``python -m zoo.core.readme`` (#43), as docs/results.md is by
``zoo.core.results``: this fails when README drifts from them, and ``zoo info`` prints the same export formats."""

from zoo.cli import main
from zoo.core import readme
from zoo.core.data import repo_root
from zoo.core.schema import method_schema
from zoo.methods import METHODS


def test_committed_readme_is_up_to_date(capsys):
    assert readme.main(["--check"]) == 0, capsys.readouterr().err + " (python -m zoo.core.readme)"


def test_generated_blocks_name_every_method_from_its_facts():
    blocks = readme.blocks(repo_root())
    for name in METHODS:
        assert (
            f"| `{name}` |" in blocks["methods"]
            and f"[card]({readme.package_folder(name)}/README.md)" in blocks["methods"]
        ), name
        row = next(r for r in blocks["exports"].splitlines()[2:] if name in r.split("|")[2].replace(" ", "").split(","))
        # the table records the class's export_formats (tests/platform/test_schema.py keeps it equal to the code)
        assert row.split("|")[1].strip() == ", ".join(method_schema(name)["export_formats"]), name


def test_a_block_without_its_markers_is_named():
    import pytest

    with pytest.raises(SystemExit, match="generated: methods"):
        readme.render("no markers here\n", {"methods": "| x |"})


def test_zoo_info_prints_the_export_formats(capsys):
    assert main(["info", "cond-dp"]) == 0
    assert "export formats: package, onnx, torch_export" in capsys.readouterr().out
