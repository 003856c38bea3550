"""docs/results.md is generated from results/*.json and matches them."""
import json

import pytest

from zoo.core.data import repo_root
from zoo.core.results import render


def test_render_table_and_paper_line(tmp_path):
    d = tmp_path / "results" / "m"
    d.mkdir(parents=True)
    (d / "exp.json").write_text(json.dumps({"method": "m", "experiment": "exp", "command": "python x.py",
                                            "rows": [{"setting": "a", "acc": 0.91234}, {"setting": "b", "f1": 1},
                                                     {"setting": "two\nlines | pipe"}],
                                            "paper": {"acc": "0.90 (Table 1)"}}))
    text = render(tmp_path / "results")
    assert "## m" in text and "### exp" in text
    assert "| setting | acc | f1 |" in text and "| a | 0.9123 |  |" in text and "| b |  | 1 |" in text
    assert "| two<br>lines \\| pipe |  |  |" in text
    assert "Paper: acc: 0.90 (Table 1)" in text and "Command: `python x.py`" in text


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
    assert (root / "docs" / "results.md").read_text() == render(root / "results"), \
        "docs/results.md is stale: run python -m zoo.core.results"
