"""docs/results.md is generated from results/*.json and matches them."""

import json

import pytest

from zoo.core.data import repo_root
from zoo.core.results import render


def test_render_table_and_paper_line(tmp_path):
    d = tmp_path / "results" / "m"
    d.mkdir(parents=True)
    (d / "exp.json").write_text(
        json.dumps(
            {
                "method": "m",
                "experiment": "exp",
                "command": "python x.py",
                "rows": [{"setting": "a", "acc": 0.91234}, {"setting": "b", "f1": 1}, {"setting": "two\nlines | pipe"}],
                "paper": {"acc": "0.90 (Table 1)"},
            }
        )
    )
    text = render(tmp_path / "results")
    assert "## m" in text and "### exp" in text
    assert "| setting | acc | f1 |" in text and "| a | 0.9123 |  |" in text and "| b |  | 1 |" in text
    assert "| two<br>lines \\| pipe |  |  |" in text
    assert "Paper: acc: 0.90 (Table 1)" in text and "Command: `python x.py`" in text


def test_render_table_keeps_the_given_columns_in_their_order():
    from zoo.core.results import render_table

    rows = [{"a": 1, "b": 0.5, "c": "x"}, {"b": 2.0}]
    assert render_table(rows, ["c", "b"]).splitlines() == ["| c | b |", "|---|---|", "| x | 0.5 |", "|  | 2 |"]


def test_bad_results_file_is_named(tmp_path):
    d = tmp_path / "results" / "m"
    d.mkdir(parents=True)
    (d / "bad.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(ValueError, match="bad.json: missing key 'command'"):
        render(tmp_path / "results")


def test_committed_results_md_is_up_to_date():
    root = repo_root()
    if not any((root / "results").glob("*/*.json")):
        pytest.skip("no results yet")
    assert (root / "docs" / "results.md").read_text() == render(root / "results"), (
        "docs/results.md is stale: run python -m zoo.core.results"
    )


def test_summarise_hand_values():
    from zoo.core.results import summarise

    rows = [
        {"model": "a", "seed": 0, "f1": 0.8},
        {"model": "a", "seed": 1, "f1": 0.9},
        {"model": "a", "seed": 2, "f1": 1.0},
        {"model": "b", "seed": 0, "f1": 0.5, "auc": None},
    ]
    a, b = summarise(rows, ["f1", "auc"], by=["model"])
    assert a["model"] == "a" and a["seeds"] == 3
    assert a["f1"]["mean"] == pytest.approx(0.9) and a["f1"]["sd"] == pytest.approx(0.1) and a["f1"]["n"] == 3
    assert a["auc"] == {"mean": None, "sd": None, "n": 0}
    assert b["f1"] == {"mean": 0.5, "sd": None, "n": 1}
    with pytest.raises(ValueError, match="repeats a seed"):
        summarise(rows + [{"model": "b", "seed": 0, "f1": 0.1}], ["f1"], by=["model"])
    with pytest.raises(ValueError, match="non-number"):
        summarise([{"seed": 0, "f1": "0.9"}], ["f1"])


def test_write_result_records_provenance_and_numbers(tmp_path):
    from zoo.core.results import render, summarise, write_result

    rows = [{"seed": s, "acc": 0.5 + s / 10} for s in range(3)]
    path = write_result(
        "m",
        "exp",
        rows,
        summary=summarise(rows, ["acc"]),
        paper={"acc": "0.7 (Table 2)"},
        command="python -m m.experiments exp",
        results_dir=tmp_path / "results",
        packages=["pytest"],
    )
    doc = json.loads(path.read_text())
    prov = doc["provenance"]
    assert doc["command"] == prov["command"] == "python -m m.experiments exp" and doc["kind"] == "result"
    assert set(prov) >= {"git_sha", "dirty", "packages", "machine", "date"}
    assert prov["packages"]["pytest"] == pytest.__version__ and prov["packages"]["numpy"]
    assert prov["machine"]["cpus"] >= 1 and "load_at_start" in prov["machine"]
    assert doc["rows"][2]["acc"] == pytest.approx(0.7) and doc["summary"][0]["acc"]["mean"] == pytest.approx(0.6)
    text = render(tmp_path / "results")
    assert "| 0.6 ± 0.1 |" in text and "Paper: acc: 0.7 (Table 2)" in text
    assert render(tmp_path / "results", kind="benchmark").count("###") == 0


def test_write_result_refuses_strings_for_numbers_and_nan(tmp_path):
    import numpy as np

    from zoo.core.results import write_result

    with pytest.raises(ValueError, match=r"rows\[0\].f1.*mean ± sd string"):
        write_result("m", "x", [{"f1": "0.878 ± 0.008"}], results_dir=tmp_path)
    with pytest.raises(ValueError, match="not a finite number"):
        write_result("m", "x", [{"f1": float("nan")}], results_dir=tmp_path)
    with pytest.raises(ValueError, match="kind"):
        write_result("m", "x", [{"f1": 1.0}], kind="table", results_dir=tmp_path)
    path = write_result("m", "x", [{"f1": np.float32(0.5), "n": np.int64(3)}], kind="benchmark", results_dir=tmp_path)
    assert json.loads(path.read_text())["rows"] == [{"f1": 0.5, "n": 3}]


def test_command_line_reconstructs_module_invocation():
    from zoo.core.provenance import command_line

    assert command_line(["zoo", "eval", "a b"]) == "zoo eval 'a b'"


def test_committed_benchmarks_md_is_up_to_date():
    root = repo_root()
    assert (root / "docs" / "benchmarks.md").read_text() == render(root / "results", kind="benchmark"), (
        "docs/benchmarks.md is stale: run python -m zoo.core.results"
    )


def test_every_results_file_has_provenance_and_numbers():
    """Each results/<method>/*.json went through write_result: provenance, kind, and no mean ± sd strings."""
    import re

    root = repo_root()
    files = sorted((root / "results").glob("*/*.json"))
    assert files
    for f in files:
        doc = json.loads(f.read_text())
        prov = doc.get("provenance") or {}
        assert doc.get("kind") in ("result", "benchmark"), f"{f}: no kind"
        assert {"command", "git_sha", "packages", "machine", "date"} <= set(prov), f"{f}: provenance incomplete: {prov}"
        if "converted_from_commit" in prov:
            assert prov["rerun"] is False and re.fullmatch(r"[0-9a-f]{40}", prov["converted_from_commit"]), f
        text = json.dumps({k: doc.get(k) for k in ("rows", "summary")}, ensure_ascii=False)
        assert "±" not in text, f"{f}: a mean ± sd string among the rows (store numbers, use summarise)"


def test_converted_table_says_so(tmp_path):
    from zoo.core.results import write_result

    path = write_result(
        "m", "old", [{"f1": 0.5}], command="python old.py", converted_from="a" * 40, results_dir=tmp_path / "results"
    )
    prov = json.loads(path.read_text())["provenance"]
    assert prov["converted_from_commit"] == "a" * 40 and prov["rerun"] is False and prov["command"] == "python old.py"
    assert "numbers from commit aaaaaaaaaa, converted to this format" in render(tmp_path / "results")


def test_dirty_tree_tables_are_marked_each(tmp_path):
    """Each table from a ``dirty: true`` file carries the Dirty tree line above it; a clean one does not."""
    d = tmp_path / "results" / "m"
    d.mkdir(parents=True)
    for name, dirty, extra in (
        ("a-clean", False, {}),
        ("b-dirty", True, {}),
        ("c-converted", True, {"converted_from_commit": "c" * 40, "rerun": False}),
    ):
        prov = {"git_sha": name[0] * 40, "dirty": dirty, "date": "2026-12-01", "machine": {}} | extra
        (d / f"{name}.json").write_text(json.dumps({"command": "python x.py", "rows": [{"v": 1}], "provenance": prov}))
    text = render(tmp_path / "results")
    sections = {s.split("\n", 1)[0]: s for s in text.split("\n### ")[1:]}
    assert "Dirty tree" not in sections["a-clean"] and "(dirty)" not in sections["a-clean"]
    assert (
        "> **Dirty tree:** made from a working tree with uncommitted changes on top of commit bbbbbbbbbb"
        in sections["b-dirty"]
    )
    assert sections["b-dirty"].index("Dirty tree") < sections["b-dirty"].index("| v |")
    assert "**Dirty tree (conversion):**" in sections["c-converted"] and "commit cccccccccc" in sections["c-converted"]


def test_committed_pages_mark_every_dirty_file():
    """docs/results.md and docs/benchmarks.md carry one Dirty tree line per dirty results file of their kind."""
    root = repo_root()
    for kind, page in (("result", "results.md"), ("benchmark", "benchmarks.md")):
        dirty = [
            f
            for f in (root / "results").glob("*/*.json")
            if (doc := json.loads(f.read_text())).get("kind") == kind and doc["provenance"].get("dirty")
        ]
        assert (root / "docs" / page).read_text().count("> **Dirty tree") == len(dirty), page
