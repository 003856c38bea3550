"""Shared data readers: a malformed JSON line is reported by file, line and the column within that line."""

import pytest

from zoo.core.data import DataError, read_jsonl


@pytest.mark.parametrize("line, column", [('{"a": 1 "b": 2}', 9), ('{"a": 1, "b": 2', 16), ('{"a": tru}', 7)])
def test_invalid_json_names_line_and_column(tmp_path, line, column):
    p = tmp_path / "x.jsonl"
    p.write_text('{"ok": 1}\n' + line + "\n")
    with pytest.raises(DataError, match=rf"x.jsonl:2: invalid JSON \(.* at column {column}\)"):
        read_jsonl(p)
