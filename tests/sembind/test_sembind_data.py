"""Captions from pixels by hand, and a user's folder + captions.csv: good rows load, bad rows fail naming file,
line and column."""

import pytest
import torch
from PIL import Image

from zoo.core.data import DataError
from zoo.methods.sembind.captions import COLOURS, caption, colour_attributes
from zoo.methods.sembind.datamodule import CaptionDataModule, read_caption_folder


def test_colour_and_brightness_of_flat_images_by_hand():
    red = torch.zeros(1, 3, 8, 8)
    red[:, 0] = 0.9
    blue_dark = torch.zeros(1, 3, 8, 8)
    blue_dark[:, 2] = 0.25
    grey = torch.full((1, 3, 8, 8), 0.8)
    colour, bright = colour_attributes(torch.cat([red, blue_dark, grey]))
    assert [COLOURS[c] for c in colour] == ["red", "blue", "grey"]
    assert bright.tolist() == [2, 0, 2]  # HSV value: max channel 0.9 and 0.8 are bright (> 0.7), 0.25 dark (< 0.3)
    assert caption("truck", 0, 2, template=0, synonym=1) == "a photo of a bright red lorry"


def _folder(tmp_path, rows: str, images=("a.png", "b.png")):
    for name in images:
        Image.new("RGB", (12, 12), (200, 30, 30)).save(tmp_path / name)
    (tmp_path / "captions.csv").write_text("file,caption\n" + rows)
    return str(tmp_path)


def test_user_folder_loads(tmp_path):
    x, caps = read_caption_folder(_folder(tmp_path, "a.png,a red thing\nb.png,another red thing\n"), 8)
    assert x.shape == (2, 3, 8, 8) and caps == ["a red thing", "another red thing"]
    dm = CaptionDataModule(dataset="folder", path=str(tmp_path), size=8, split="all")
    dm.setup()
    assert len(dm.train_set.captions) + len(dm.test_set.captions) == 2 and (dm.train_set.y == -1).all()


@pytest.mark.parametrize(
    "rows, where",
    [
        ("a.png,a red thing\nmissing.png,x\n", ":3: column 'file'"),
        ("a.png,a red thing\nb.png,  \n", ":3: column 'caption'"),
        ("a.png,a red thing\nnot-an-image.png,x\n", ":3: column 'file'"),
    ],
)
def test_bad_rows_name_file_line_and_column(tmp_path, rows, where):
    (tmp_path / "not-an-image.png").write_text("hello")
    with pytest.raises(DataError, match=f"captions.csv{where}"):
        read_caption_folder(_folder(tmp_path, rows), 8)


def test_missing_column_and_unknown_split(tmp_path):
    (tmp_path / "captions.csv").write_text("file,text\na.png,x\n")
    with pytest.raises(DataError, match="missing column"):
        read_caption_folder(str(tmp_path), 8)
    with pytest.raises(DataError, match="data.split"):
        CaptionDataModule(split="attacker")
