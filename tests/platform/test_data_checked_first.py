"""Data are checked before the run starts (#13), for every method: a bad row in the user's file fails with exit code 2,
a message naming the file, the line and the recipe key to change, before any run directory is opened.

Each method's case is its ``BAD_ROW`` fact (``zoo/core/facts.py``: the method package's ``__init__.py``); a method
whose data have no rows (image folders) says so there instead. Nothing here names a method."""

from pathlib import Path

import pytest

from zoo.cli import main
from zoo.core import run
from zoo.core.registry import method_fact
from zoo.methods import METHODS

KEYS = {"recipe", "files", "overrides", "error", "key"}


def bad_row(name: str) -> dict | None:
    """Method ``name``'s ``BAD_ROW`` fact, checked for its keys; None when its data have no rows (a string fact).

    Raises:
        FactError: the method's package declares no ``BAD_ROW`` (the message says what to add).
    """
    fact = method_fact(name, "BAD_ROW")
    if isinstance(fact, str):
        assert len(fact) > 20, f"{name}: BAD_ROW as a string must say why the data have no rows: {fact!r}"
        return None
    assert set(fact) == KEYS, f"{name}: BAD_ROW needs exactly {sorted(KEYS)}, has {sorted(fact)}"
    assert fact["error"].split(":")[0] in fact["files"], f"{name}: BAD_ROW's error names none of its files"
    return fact


@pytest.mark.parametrize("method", sorted(METHODS))
def test_bad_user_data_fail_before_the_run_directory(method, tmp_path, monkeypatch, capsys):
    check_bad_row(method, tmp_path, monkeypatch, capsys)


def check_bad_row(method, tmp_path, monkeypatch, capsys):
    """Method ``method``'s bad row fails as its ``BAD_ROW`` says, before a run directory (also run on a throwaway
    method, ``test_new_method.py``)."""
    case = bad_row(method)
    if case is None:
        pytest.skip(f"{method}: {method_fact(method, 'BAD_ROW')}")
    monkeypatch.chdir(tmp_path)
    for name, text in case["files"].items():
        (tmp_path / name).write_text(text)

    def opened(cfg):
        raise AssertionError(f"{method}: a run directory was opened before the data were checked")

    monkeypatch.setattr(run, "open_run_dir", opened)
    recipe = Path(case["recipe"])
    overlay = recipe.parent / "tiny" / recipe.name if recipe.is_absolute() else Path("tiny") / recipe
    code = main(["train", f"recipe={recipe}", f"overlay={overlay}", *case["overrides"], f"out_dir={tmp_path / 'runs'}"])
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    assert case["error"] in err and case["key"] in err, err[-2000:]
    assert "Traceback" not in err and not (tmp_path / "runs").exists()
