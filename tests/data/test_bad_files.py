"""The shared readers name what is wrong with a user's file: a byte that is not UTF-8 (a binary file) with its line,
a header naming a column twice, and images the square model input cannot take (refused) or had to be resized or
converted for (one log line)."""

import logging
import os

import numpy as np
import pytest
from PIL import Image

from zoo.core.data import DataError, read_csv_rows, read_jsonl
from zoo.data.images import read_image_folder


def test_binary_csv_is_refused_with_its_line(tmp_path):
    path = tmp_path / "garbage.csv"
    path.write_bytes(b"x1,y_1\n1,2\n" + b"\xff\xfe" + os.urandom(64))
    with pytest.raises(DataError, match=rf"^{path}:3: not UTF-8 text \(byte 0xff at column 1\); save the file as"):
        read_csv_rows(path)


def test_binary_jsonl_is_refused_with_its_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": "\xe9t\xe9"}\n')
    with pytest.raises(DataError, match=rf"^{path}:2: not UTF-8 text \(byte 0xe9 at column 8\)"):
        read_jsonl(path)


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffx1,y\n1,2\n".encode())
    assert read_csv_rows(path, required=("x1",)) == (["x1", "y"], [{"x1": "1", "y": "2"}])


def test_nul_bytes_are_refused_as_binary(tmp_path):
    path = tmp_path / "nul.csv"
    path.write_bytes(b"x1,y\n1,2\n3,\x004\n")
    try:
        _header, rows = read_csv_rows(path)
    except DataError as e:  # the csv module of this Python refuses NUL: named with its line
        assert str(e).startswith(f"{path}:3: not a CSV text line")
    else:  # a csv module that reads NUL keeps it in the cell, where the column's number check names it
        assert rows[1]["y"] == "\x004"


def test_duplicate_header_is_refused_naming_the_column(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("x1,x2,x2,y\n1,2,3,4\n")
    with pytest.raises(DataError, match=rf"^{path}:1: column 'x2' appears twice in the header \(columns 2 and 3\)"):
        read_csv_rows(path)


def _image(path, w, h, mode="RGB"):
    Image.fromarray(np.full((h, w) + ((3,) if mode == "RGB" else ()), 128, dtype=np.uint8), mode).save(path)


@pytest.mark.parametrize("w,h,mode", [(5, 900, "RGB"), (3, 3, "L"), (200, 40, "RGB")])
def test_image_folder_refuses_degenerate_and_elongated_images(tmp_path, w, h, mode):
    (tmp_path / "a").mkdir()
    _image(tmp_path / "a" / "ok.png", 32, 32)
    _image(tmp_path / "a" / "bad.png", w, h, mode)
    with pytest.raises(DataError, match=rf"^{tmp_path / 'a' / 'bad.png'}: a {w}x{h} image \({mode}\); images need"):
        read_image_folder(str(tmp_path), size=32)


def test_image_folder_logs_what_it_resized_and_converted(tmp_path, caplog):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _image(tmp_path / "a" / "big.png", 64, 48)
    _image(tmp_path / "a" / "same.png", 32, 32)
    _image(tmp_path / "b" / "grey.png", 32, 32, "L")
    with caplog.at_level(logging.INFO, logger="zoo"):
        train, _test = read_image_folder(str(tmp_path), size=32, test_fraction=0.0)
    assert train.x.shape == (3, 3, 32, 32)
    assert (
        f"{tmp_path}: of 3 images, 1 resized (e.g. big.png: 64x48 -> 32x32) and 1 converted (e.g. grey.png: "
        "L -> RGB)" in caplog.text
    )
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="zoo"):
        read_image_folder(str(tmp_path / "a" / ".."), size=64, channels=3, test_fraction=0.0)
    assert "3 resized" in caplog.text
