"""waterbirds-cifar is built exactly (counts, the 0.95 rate, pinned sha256) and the Waterbirds-layout reader fails
early naming file, line and column, a missing image, or a group absent from val."""

import hashlib

import numpy as np
import pytest

from zoo.core.data import DataError
from zoo.data.waterbirds import read_metadata, read_waterbirds
from zoo.methods.ltc.waterbirds_cifar import build, composite, feathered_disc, write

X_SHA256 = "dfcf8e29387eb964a838a0b28b33418edf5c51a760751d3702f5bf059ecce8cc"
ALL_SHA256 = "855dd61b9462b3636122877af35a1aaa546dae0c9134cb558142051998cf63aa"


@pytest.fixture(scope="module")
def data():
    return build()


def test_group_counts_and_exact_rate(data):
    g = 2 * data.y + data.place
    assert np.bincount(data.split).tolist() == [3200, 800, 800]
    assert np.bincount(g[data.split == 0]).tolist() == [1520, 80, 80, 1520]
    for s in (1, 2):
        assert np.bincount(g[data.split == s]).tolist() == [200, 200, 200, 200]
        for c in np.unique(data.cls):  # exactly half of each class on each place
            assert (
                data.place[(data.split == s) & (data.cls == c)].sum() * 2 == ((data.split == s) & (data.cls == c)).sum()
            )
    for c in np.unique(data.cls):
        m = (data.split == 0) & (data.cls == c)
        assert (data.place[m] == data.y[m]).sum() == 380 and m.sum() == 400  # 0.95 exactly
    assert set(data.y[np.isin(data.cls, [0, 1, 8, 9])]) == {1} and set(data.y[np.isin(data.cls, [3, 4, 5, 7])]) == {0}


def test_arrays_sha256_pinned(data):
    assert hashlib.sha256(data.x.tobytes()).hexdigest() == X_SHA256
    h = hashlib.sha256()
    for a in (data.x, data.y, data.place, data.split, data.cls):
        h.update(np.ascontiguousarray(a).tobytes())
    assert h.hexdigest() == ALL_SHA256


def test_captions(data):
    pre = data.split == 0
    caps = [c for c, p in zip(data.captions, pre) if p]
    assert all(caps) and not any(c for c, p in zip(data.captions, pre) if not p)
    with_place = [c for c in caps if "in front of" in c]
    assert 0.27 < len(with_place) / len(caps) < 0.33
    for c, place in zip(data.captions, data.place):
        if "in front of" in c:
            assert c.endswith("a temple" if place == 1 else "flowers")


def test_feathered_disc_and_composite_by_hand():
    a = feathered_disc()
    assert a[16, 16] == 1.0 and a[0, 0] == 0.0
    assert a[15, 15 + 12] == pytest.approx(np.clip((14 - np.hypot(0.5, 11.5)) / 4, 0, 1))
    obj, bg = np.full((32, 32, 3), 200, np.uint8), np.zeros((48, 48, 3), np.uint8)
    out = composite(obj, bg, (16, 0), a)
    assert out[16 + 16, 16].tolist() == [200] * 3 and out[0, 0].tolist() == [0] * 3


def _folder(tmp_path, rows):
    from PIL import Image

    (tmp_path / "img").mkdir()
    for name in ("a.png", "b.png"):
        Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "img" / name)
    (tmp_path / "metadata.csv").write_text("img_filename,y,place,split\n" + "\n".join(rows) + "\n")
    return tmp_path


VAL = [f"img/a.png,{g // 2},{g % 2},1" for g in range(4)]


def test_reader_reads_a_valid_folder(tmp_path):
    sets = read_waterbirds(_folder(tmp_path, VAL + ["img/b.png,1,0,2"]), size=8)
    assert sets["val"].group.tolist() == [0, 1, 2, 3] and sets["test"].x.shape == (1, 3, 8, 8)


def test_reader_bad_value_names_file_line_column(tmp_path):
    with pytest.raises(DataError, match=r"metadata.csv:4: column 'place': 7 not in"):
        read_metadata(_folder(tmp_path, VAL[:2] + ["img/a.png,1,7,1"] + VAL[2:]))


def test_reader_missing_image_names_path(tmp_path):
    with pytest.raises(DataError, match=r"img/missing.png: no such image"):
        read_metadata(_folder(tmp_path, VAL + ["img/missing.png,0,0,2"]))


def test_reader_group_absent_from_val_named(tmp_path):
    with pytest.raises(DataError, match=r"group 2 \(y=1, place=0\) has no image in the val split"):
        read_metadata(_folder(tmp_path, [r for r in VAL if not r.startswith("img/a.png,1,0")]))


def test_written_folder_round_trips(tmp_path, data):
    sub = type(data)(
        data.x[::200],
        data.y[::200],
        data.place[::200],
        data.split[::200],
        data.cls[::200],
        data.captions[::200],
        data.classes,
    )
    write(sub, tmp_path)
    sets = read_waterbirds(tmp_path, size=48)
    got = np.concatenate([sets[k].x.permute(0, 2, 3, 1).numpy() for k in ("train", "val", "test")])
    order = np.argsort(sub.split, kind="stable")
    assert np.array_equal(got, sub.x[order])
