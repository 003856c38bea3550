"""Readers: a bad or duplicate date, or a count outside [0, n_posts], fails naming file, line and column."""

import json
import re

import pytest

from zoo.core.data import DataError
from zoo.methods.pulse.datamodule import load_texts
from zoo.methods.pulse.series import read_series


def _json(tmp_path, dates, n, counts):
    p = tmp_path / "s.json"
    p.write_text(
        json.dumps(
            {"dates": dates, "n_posts": n, "features": [{"idx": 3, "label": "x", "n_active": counts}]},
            separators=(",", ":"),
        )
    )
    return p


def test_json_reader_and_gaps(tmp_path):
    s = read_series(_json(tmp_path, ["2024-01-01", "2024-01-02", "2024-01-05"], [10, 5, 4], [1, 0, 4]))
    assert s.gaps == [["2024-01-03", "2024-01-04"]] and s.counts.tolist() == [[1, 0, 4]]


@pytest.mark.parametrize(
    "dates,counts,expect",
    [
        (["2024-01-01", "2024-01-01"], [1, 1], "duplicate date"),
        (["2024-01-01", "2024-13-02"], [1, 1], "bad date"),
        (["2024-01-01", "2024-01-02"], [1, 11], "features[0].n_active[1]"),
        (["2024-01-01", "2024-01-02"], [-1, 1], "count -1"),
    ],
)
def test_json_errors_name_file_line_column(tmp_path, dates, counts, expect):
    p = _json(tmp_path, dates, [10, 10], counts)
    with pytest.raises(DataError, match=re.escape(expect)) as e:
        read_series(p)
    where = str(e.value).split(": ")[0]
    file, line, col = where.rsplit(":", 2)
    assert file == str(p) and line == "1" and int(col) > 1
    text = p.read_text()
    assert text[int(col) - 1] in '"-0123456789'  # the column points at the offending value


def test_csv_errors(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("date,n_posts,therapy\n2024-01-01,10,2\n2024-01-02,5,6\n")
    with pytest.raises(DataError, match=r"s.csv:3: therapy: count 6 is not an integer in \[0, n_posts = 5\]"):
        read_series(p)
    p.write_text("date,n_posts,therapy\n2024-01-01,10,2\n2024-01-01,5,1\n")
    with pytest.raises(DataError, match=r"s.csv:3: date: duplicate date"):
        read_series(p)
    p.write_text("date,n_posts,therapy\n2024-01-01,10,2\n2024-01-03,5,1\n")
    assert read_series(p).gaps == [["2024-01-02", "2024-01-02"]]


def test_posts_jsonl_fails_as_file_line_key(tmp_path):
    p = tmp_path / "posts.jsonl"
    p.write_text('{"title": "a b c d e f g h i j k", "created_utc": 1700000000}\n{"title": "x"}\n')
    with pytest.raises(DataError, match=r"posts.jsonl:2: missing key 'created_utc'"):
        load_texts(str(p))
    p.write_text('{"title": 5, "created_utc": 1700000000}\n')
    with pytest.raises(DataError, match=r"posts.jsonl:1: 'title'"):
        load_texts(str(p))


def test_a_series_that_ends_before_the_window_is_warned_about(tmp_path, caplog):
    """A user's series ending before ``data.window`` ends is replayed on the days it has, with a warning naming both
    keys; one with no day in the window is refused, saying which days it has."""
    import logging

    from zoo.methods.pulse.datamodule import PulseDataModule

    path = _json(tmp_path, ["2024-01-01", "2024-01-02", "2024-01-03"], [10, 5, 4], [1, 0, 4])
    dm = PulseDataModule(series_path=str(path), window=["2024-01-02", "2024-06-30"])
    with caplog.at_level(logging.WARNING, logger="zoo"):
        dm.setup("fit")
    assert dm.series.dates == ["2024-01-02", "2024-01-03"]
    (msg,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"data.series_path {path} ends 2024-01-03, before the window's end 2024-06-30" in msg
    assert "data.window" in msg and "covers 2024-01-02 to 2024-01-03 only" in msg
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="zoo"):
        PulseDataModule(series_path=str(path), window=["2024-01-01", "2024-01-03"]).setup("fit")
    assert not caplog.records  # a series covering the window: no warning
    with pytest.raises(
        DataError,
        match=r"no days between 2025-01-01 and 2025-02-01 \(its days: 2024-01-01 to "
        r"2024-01-03; data.window",
    ):
        PulseDataModule(series_path=str(path), window=["2025-01-01", "2025-02-01"]).setup("fit")
