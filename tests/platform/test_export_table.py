"""README's table of export formats per method equals what each method declares (``export_formats``), and
``zoo info`` prints the same list (#14 item 5)."""
from zoo.cli import main
from zoo.core.data import repo_root
from zoo.core.registry import get_method
from zoo.methods import METHODS


def _readme_table() -> dict[str, tuple[str, ...]]:
    text = (repo_root() / "README.md").read_text()
    block = text[text.index("| exports | methods |"):]
    rows = {}
    for line in block.splitlines()[2:]:
        if not line.startswith("|"):
            break
        formats, methods = (c.strip() for c in line.strip("|").split("|"))
        for m in methods.split(", "):
            rows[m] = tuple(f.strip() for f in formats.split(","))
    return rows


def test_readme_export_table_matches_the_code(capsys):
    table = _readme_table()
    assert sorted(table) == sorted(METHODS), "README's export table must list every method once"
    for method, formats in table.items():
        assert tuple(get_method(method).module_cls.export_formats) == formats, method
    assert main(["info", "cond-dp"]) == 0
    out = capsys.readouterr().out
    assert "export formats: package, onnx, torch_export" in out, out[-500:]
