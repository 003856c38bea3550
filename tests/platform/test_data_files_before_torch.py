"""A user's data file fails in the time the recipe check takes (#42): every ``data:`` argument declared with
``DataFile`` (recorded in its method's table) has its file read by the shared readers before torch is imported, so a
binary file, a ragged row, a line that is not a JSON object or a missing column is refused as ``file:line`` with exit
2, no traceback and no run directory. Registry-driven: every declared argument of every table is exercised, and
each shipped file such an argument names passes the same check (the check is never stricter than the datamodule)."""

import json
import subprocess
import sys

import pytest

from zoo.core.data import DataError, repo_root
from zoo.core.datafiles import SUFFIXES, check_data_files, check_file
from zoo.core.schema import SCHEMA_DIR

ROOT = repo_root()


def _declared() -> list[tuple[str, str, dict]]:
    """``(method, data argument, file spec)`` for every ``DataFile`` argument in zoo/core/schemas/."""
    out = []
    for table in sorted(SCHEMA_DIR.glob("*.json")):
        dm = json.loads(table.read_text()).get("datamodule") if not table.name.startswith("_") else None
        out += [(table.stem, k, spec["file"]) for k, spec in ((dm or {}).get("args") or {}).items() if "file" in spec]
    return out


DECLARED = _declared()


def test_the_methods_reading_user_files_declare_them():
    methods = {m for m, _, _ in DECLARED}
    assert {"praxis", "cond-dp", "survshap-iq", "rlcracker", "shapo", "pulse", "crh", "watchlog"} <= methods, methods


@pytest.mark.parametrize("method,key,spec", DECLARED, ids=[f"{m}:{k}" for m, k, _ in DECLARED])
def test_each_declared_file_refuses_a_binary_file_and_a_missing_column(method, key, spec, tmp_path):
    table = {"datamodule": {"args": {key: {"file": spec}}}}
    suffix = SUFFIXES[spec["kind"]][0]
    binary = tmp_path / f"garbage{suffix}"
    cols = [*spec["columns"], "a"]  # a first line that holds what the spec needs
    head = (",".join(cols) if spec["kind"] == "csv" else json.dumps(dict.fromkeys(cols, "x"))).encode() + b"\n"
    binary.write_bytes(head + bytes(range(128, 256)))
    with pytest.raises(DataError, match=rf"^{binary}:2: not UTF-8 text .*\(recipe key: data\.{key}\)$"):
        check_data_files(table, {key: str(binary)})
    if spec["columns"]:  # a row without the first needed column
        lacking = tmp_path / f"lacking{suffix}"
        rest = spec["columns"][1:] or ["other"]
        if spec["kind"] == "csv":
            lacking.write_text(",".join(rest) + "\n" + ",".join("1" for _ in rest) + "\n")
            want = rf"^{lacking}:1: missing column\(s\) \['{spec['columns'][0]}'\]"
        else:
            lacking.write_text(json.dumps(dict.fromkeys(rest, "x")) + "\n")
            want = rf"^{lacking}:1: missing key '{spec['columns'][0]}'"
        with pytest.raises(DataError, match=want):
            check_data_files(table, {key: [str(lacking)]})


def test_a_column_named_by_another_argument_is_needed(tmp_path):
    table = {"datamodule": {"args": {"path": {"file": {"kind": "csv", "columns": [], "column_args": ["label"]}}}}}
    f = tmp_path / "t.csv"
    f.write_text("a,b\n1,0\n")
    with pytest.raises(DataError, match=r"t\.csv:1: missing column\(s\) \['y'\]"):
        check_data_files(table, {"path": str(f), "label": "y"})
    check_data_files(table, {"path": str(f), "label": "b"})
    check_data_files(table, {"path": str(f), "label": None})


def test_a_large_file_says_it_is_being_checked(tmp_path, capsys, monkeypatch):
    from zoo.core import datafiles

    table = {"datamodule": {"args": {"path": {"file": {"kind": "csv", "columns": ["x"]}}}}}
    f = tmp_path / "big.csv"
    f.write_text("x\n" + "1\n" * 50)
    monkeypatch.setattr(datafiles, "ANNOUNCE_BYTES", 10)
    check_data_files(table, {"path": str(f)})
    assert capsys.readouterr().err == f"checking data.path {f} (0 MB) ...\n"


def test_a_folder_another_suffix_or_a_shipped_file_is_left_to_the_datamodule(tmp_path):
    table = {"datamodule": {"args": {"path": {"file": {"kind": "csv", "columns": ["x"]}}}}}
    other = tmp_path / "t.npz"
    other.write_bytes(b"\x00\x01")
    check_data_files(table, {"path": str(other)})
    check_data_files(table, {"path": str(tmp_path)})
    check_data_files(table, {"path": str(ROOT / "data" / "treefarms-binary" / "compas_example_rows.csv")})


def _shipped() -> list[tuple[str, str, dict, dict]]:
    """``(recipe, data argument, file spec, data block)`` for each shipped file that a CPU recipe gives a declared
    argument (every recipe lists all its datamodule's arguments)."""
    from zoo.core.recipe import compose

    specs = {(m, k): spec for m, k, spec in DECLARED}
    out = []
    for recipe in sorted((ROOT / "recipes").glob("*.yaml")):
        cfg = compose(recipe)
        data = cfg.get("data") or {}
        for (method, key), spec in specs.items():
            value = data.get(key) if cfg.get("method") == method else None
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, str) and v.endswith(SUFFIXES[spec["kind"]]) and (ROOT / v).is_file():
                    out.append((recipe.name, key, spec, data))
    return out


SHIPPED = _shipped()


@pytest.mark.parametrize("recipe,key,spec,data", SHIPPED, ids=[f"{r}:{k}" for r, k, _, _ in SHIPPED])
def test_the_shipped_files_pass_the_same_check(recipe, key, spec, data):
    values = data[key] if isinstance(data[key], list) else [data[key]]
    for v in values:
        check_file(ROOT / v, spec, data)


def test_shipped_files_are_covered():
    assert len({(r, k) for r, k, _, _ in SHIPPED}) >= 5, SHIPPED


@pytest.mark.parametrize(
    "args,text,want",
    [
        (["recipe=praxis.yaml", "data.label=y"], "a,b,y\n1,0,1\n0,1\n", "table.csv:3: 2 fields, header has 3"),
        (
            ["recipe=cond-dp.yaml", "data.label=y", "data.y_min=0", "data.y_max=1"],
            "x1,x2\n1,2\n",
            "table.csv:1: missing column(s) ['y']",
        ),
    ],
)
def test_train_py_refuses_the_file_before_torch(args, text, want, tmp_path):
    """The command a user types: exit 2, ``file:line`` and the recipe key in one line, torch never imported."""
    (tmp_path / "table.csv").write_text(text)
    probe = (
        "import sys; from zoo.cli import main; rc = main(['train', *sys.argv[1:]]); "
        "print('torch imported' if 'torch' in sys.modules else 'torch not imported'); sys.exit(rc)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, *args, "data.path=table.csv", f"out_dir={tmp_path / 'runs'}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    err = out.stderr.strip().splitlines()
    assert err[-1].startswith(f"error: {tmp_path / want}") and "(recipe key" in err[-1], err
    assert "Traceback" not in out.stderr and out.stdout.strip() == "torch not imported", out
    assert not (tmp_path / "runs").exists()
