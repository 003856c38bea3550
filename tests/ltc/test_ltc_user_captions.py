"""A user's own Waterbirds-layout folder (#42): captions with words the shipped vocabulary lacks grow it (and the run's
package keeps it), a caption the CLIP cannot take fails as ``metadata.csv:LINE``, and a metadata.csv without a caption
column serves a post-hoc run (``trainer.max_epochs=0``)."""

import csv
import re

import pytest

pytest.importorskip("open_clip")

from zoo.cli import main

TINY = ["recipe=ltc.yaml", "overlay=tiny/ltc.yaml", "export.formats=[package]"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """``mine/``: 120 images of the built split, each training caption prefixed with words outside the shipped
    vocabulary; ``nocap/``: the same images, metadata.csv without the caption column."""
    from zoo.methods.ltc.waterbirds_cifar import build, write

    d = build()
    root = tmp_path_factory.mktemp("ltc-user")
    sub = type(d)(
        d.x[::40],
        d.y[::40],
        d.place[::40],
        d.split[::40],
        d.cls[::40],
        [f"a zebra grazing {c}" if c else "" for c in d.captions[::40]],
        d.classes,
    )
    write(sub, root / "mine")
    with open(root / "mine" / "metadata.csv", newline="") as f:
        rows = list(csv.reader(f))
    (root / "nocap").mkdir()
    (root / "nocap" / "images").symlink_to(root / "mine" / "images", target_is_directory=True)
    with open(root / "nocap" / "metadata.csv", "w", newline="") as f:
        csv.writer(f).writerows(r[:4] for r in rows)
    return root, rows


def test_user_captions_grow_the_vocabulary_and_the_package_keeps_it(folders, tmp_path, caplog):
    import logging

    import zoo
    from zoo.methods.ltc.prompts import caption_texts
    from zoo.models.clip import CaptionVocab

    root, _ = folders
    with caplog.at_level(logging.INFO, logger="zoo"):
        assert (
            main(["train", *TINY, f"data.path={root / 'mine'}", "model.context_length=24", f"out_dir={tmp_path}"]) == 0
        )
    shipped = len(CaptionVocab.from_texts(caption_texts()))
    # "zebra" and "grazing": the two words of the prefix the shipped captions and prompts never use
    assert f"the training captions add 2 token(s) to the caption vocabulary ({shipped} -> {shipped + 2})" in caplog.text
    (run,) = tmp_path.glob("*/version_0")
    model = zoo.load(str(run / "export" / "package"))
    assert len(model.vocab) == shipped + 2 and model.clip.token_embedding.weight.shape[0] == shipped + 2
    assert model.encode_text(["a zebra grazing a photo of a dog"]).shape == (1, 32)
    assert main(["eval", str(run)]) == 0


def test_a_caption_too_long_names_its_line(folders, tmp_path, capsys):
    root, rows = folders
    assert main(["train", *TINY, f"data.path={root / 'mine'}", "model.context_length=8", f"out_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    m = re.search(
        r"metadata\.csv:(\d+): column 'caption': text '([^']*)': (\d+) tokens, context_length 8 allows 6", err
    )
    assert m and rows[int(m.group(1)) - 1][4] == m.group(2) and int(m.group(3)) > 6, err  # the line it names
    assert "raise model.context_length" in err and "Traceback" not in err and not any(tmp_path.iterdir())


def test_a_metadata_csv_without_captions_serves_a_post_hoc_run(folders, tmp_path, capsys):
    root, _ = folders
    nocap = root / "nocap"
    assert main(["train", *TINY, f"data.path={nocap}", "trainer.max_epochs=0", f"out_dir={tmp_path}"]) == 0
    (run,) = tmp_path.glob("*/version_0")
    assert (run / "ltc" / "rows.json").is_file() and "| ltc |" in capsys.readouterr().out
    # training the CLIP does need captions: refused naming the file and the column
    assert main(["train", *TINY, f"data.path={nocap}", f"out_dir={tmp_path / 'fit'}"]) == 2
    err = capsys.readouterr().err
    line = re.search(r"metadata\.csv:(\d+): train image (\S+) has no caption \(column 'caption'\)", err)
    assert line, err
    with open(nocap / "metadata.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[int(line.group(1)) - 1][0] == line.group(2), err  # the line it names holds that image


def test_the_waterbirds_prompts_over_the_tiny_clip(tmp_path, capsys):
    """``model.prompts=waterbirds`` on the tiny CLIP: the prompts' words ("landbird", "webbed", ...) are in its
    vocabulary, so the pipeline runs (it ended in a raw ``not in the caption vocabulary`` traceback after training)."""
    from zoo.methods.ltc.prompts import PROMPT_SETS, caption_texts
    from zoo.models.clip import CaptionVocab

    assert main(["train", *TINY, "model.prompts=waterbirds", "export.formats=[]", f"out_dir={tmp_path}"]) == 0
    (run,) = tmp_path.glob("*/version_0")
    assert (run / "ltc" / "rows.json").is_file() and "| ltc |" in capsys.readouterr().out
    vocab = CaptionVocab.from_texts(caption_texts() + PROMPT_SETS["waterbirds"].all_prompts())
    assert len(vocab) > len(CaptionVocab.from_texts(caption_texts()))
