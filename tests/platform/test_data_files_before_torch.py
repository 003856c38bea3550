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


def _valid(cell: dict | None) -> str:
    """A value that the cell spec accepts (``x`` when untyped)."""
    if cell is None or cell["type"] in ("text", "present"):
        return "x"
    if cell["type"] in ("choice", "file"):
        return cell["choices"][0] if cell["type"] == "choice" else "a" + cell["choices"][0]
    return str(cell.get("min", 0) + (1 if cell.get("min_exclusive") else 0))


@pytest.mark.parametrize("method,key,spec", DECLARED, ids=[f"{m}:{k}" for m, k, _ in DECLARED])
def test_each_declared_file_refuses_a_binary_file_and_a_missing_column(method, key, spec, tmp_path):
    table = {"datamodule": {"args": {key: {"file": spec}}}}
    block = dict(spec.get("when") or {})
    lay = spec["layouts"][0] if spec.get("layouts") else spec  # a first line that holds what the spec needs
    folder = tmp_path / "folder" if spec.get("inside") else tmp_path
    folder.mkdir(exist_ok=True)
    name = spec.get("inside") or f"garbage{SUFFIXES[spec['kind']][0]}"
    binary = folder / name
    cols = [*lay["columns"], "a"]
    if spec.get("reader"):  # the shared chat reader (the only one declared)
        head = json.dumps({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})
    elif spec["kind"] == "csv":
        head = ",".join(cols)
    else:
        head = json.dumps({c: _valid((lay.get("types") or {}).get(c)) for c in cols})
    binary.write_bytes(head.encode() + b"\n" + bytes(range(128, 256)))
    with pytest.raises(DataError, match=rf"^{binary}:2: not UTF-8 text .*\(recipe key: data\.{key}\)$"):
        check_data_files(table, {**block, key: str(folder if spec.get("inside") else binary)})
    if lay["columns"] and not spec.get("layouts") and not spec.get("inside"):  # a row without the first column
        lacking = tmp_path / f"lacking{SUFFIXES[spec['kind']][0]}"
        rest = lay["columns"][1:] or ["other"]
        types = lay.get("types") or {}
        if spec["kind"] == "csv":
            lacking.write_text(",".join(rest) + "\n" + ",".join(_valid(types.get(c)) for c in rest) + "\n")
            want = rf"^{lacking}:1: missing column\(s\) \['{lay['columns'][0]}'\]"
        else:
            lacking.write_text(json.dumps({c: _valid(types.get(c)) for c in rest}) + "\n")
            want = rf"^{lacking}:1: missing key '{lay['columns'][0]}'"
        with pytest.raises(DataError, match=want):
            check_data_files(table, {**block, key: [str(lacking)]})


BAD = {"number": "abc", "integer": "1.5", "text": "  ", "present": "NA", "choice": "zzz", "file": "missing.png"}
TYPED = [
    (m, k, lay, c)
    for m, k, spec in DECLARED
    for lay in ([{**x, "kind": spec["kind"]} for x in spec.get("layouts") or []] or [spec])
    for c in (lay.get("types") or {})  # "*": any other column, here one called "extra"
    for c in ["extra" if c == "*" else c]
]


@pytest.mark.parametrize("method,key,spec,col", TYPED, ids=[f"{m}:{k}:{c}" for m, k, _, c in TYPED])
def test_each_typed_column_refuses_a_bad_value_naming_file_line_and_column(method, key, spec, col, tmp_path):
    """From the method's table: a good row, then a row whose ``col`` holds a value of the wrong kind, fails as
    ``file:3: column 'col': ...`` (``key`` for JSONL) before torch; a column argument names a column after itself."""
    outer = next(s for m, k, s in DECLARED if (m, k) == (method, key))
    block = {**(outer.get("when") or {}), **{a: a for a in spec.get("column_args") or []}}
    types = {**spec["types"], **({"extra": spec["types"]["*"]} if col == "extra" else {})}
    cols = list(dict.fromkeys([*spec["columns"], *(spec.get("column_args") or []), col]))
    folder = tmp_path / "folder"
    folder.mkdir()
    for c in cols:  # a good row's files exist
        if (types.get(c) or {}).get("type") == "file":
            (folder / _valid(types[c])).write_bytes(b"x")
    good = {c: _valid(types.get(c)) for c in cols}
    bad = {**good, col: BAD[types[col]["type"]]}
    if types[col].get("increasing"):
        bad[col] = good[col]  # not above the row before
    name = outer.get("inside") or f"t{SUFFIXES[spec['kind']][0]}"
    f = folder / name
    if spec["kind"] == "csv":
        f.write_text("\n".join(",".join(r) for r in (cols, good.values(), bad.values())) + "\n")
    else:
        f.write_text("\n".join(json.dumps(r) for r in (good, bad)) + "\n")
    line = 3 if spec["kind"] == "csv" else 2
    label = "column" if spec["kind"] == "csv" else "key"
    table = {"datamodule": {"args": {key: {"file": outer}}}}
    with pytest.raises(DataError, match=rf"^{f}:{line}: {label} '{col}': "):
        check_data_files(table, {**block, key: str(folder if outer.get("inside") else f)})


def test_a_file_read_another_way_is_not_checked(tmp_path):
    """``when``: trsp's ``data.path`` is a trips CSV only with ``format: csv``; zoo-lm's a chat file only in chat mode."""
    table = {"datamodule": {"args": {"path": {"file": {"kind": "csv", "columns": ["a"], "when": {"format": "csv"}}}}}}
    f = tmp_path / "t.csv"
    f.write_text("b\n1\n")
    check_data_files(table, {"path": str(f), "format": "authors"})
    with pytest.raises(DataError, match="missing column"):
        check_data_files(table, {"path": str(f), "format": "csv"})


def test_typed_columns_others_and_the_unset_column_argument(tmp_path):
    """``rest_of``: an unset ``features`` means every other column (typed like ``features``); set, only those."""
    from zoo.core.constraints import NUMBER, DataFile

    table = {
        "datamodule": {
            "args": {
                "path": DataFile(
                    "csv",
                    column_args=("label", "features"),
                    types={"label": NUMBER, "features": NUMBER},
                    rest_of="features",
                ).spec()
            }
        }
    }
    f = tmp_path / "t.csv"
    f.write_text("y,a,note\n1,2,hello\n")
    with pytest.raises(DataError, match=r"t\.csv:2: column 'note': 'hello' is not a number"):
        check_data_files(table, {"path": str(f), "label": "y", "features": None})
    check_data_files(table, {"path": str(f), "label": "y", "features": ["a"]})


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
