"""A fit always validates at its end (#14 item 4): a short fine-tune whose val_check_interval never lands still logs
val/*, writes a best checkpoint, and `zoo eval` says which checkpoint it measured."""

import json

from zoo.cli import main

COMMON = [
    "recipe=tests/platform/recipes/digits.yaml",
    "logger.kind=csv",
    "export.formats=[]",
    "data.batch_size=8",
    "trainer.max_epochs=-1",
]


def test_short_fit_validates_at_its_last_step_and_eval_labels_the_checkpoint(tmp_path, capsys):
    assert (
        main(
            [
                "train",
                *COMMON,
                f"out_dir={tmp_path}",
                "trainer.max_steps=3",
                "trainer.val_check_interval=75",
                "trainer.check_val_every_n_epoch=null",
            ]
        )
        == 0
    )
    run = tmp_path / "digits" / "version_0"
    assert "val/acc" in json.loads((run / "metrics.json").read_text())["metrics"]
    best = sorted((run / "checkpoints").glob("best-*.ckpt"))
    assert [p.name for p in best] == ["best-000-0000003.ckpt"]
    capsys.readouterr()
    assert main(["eval", str(run)]) == 0
    assert "best checkpoint best-000-0000003.ckpt" in capsys.readouterr().out
    assert main(["eval", str(run), "--which", "last"]) == 0
    assert "last checkpoint last.ckpt" in capsys.readouterr().out


def test_validation_is_not_repeated_when_the_interval_lands_on_the_last_step(tmp_path):
    assert (
        main(
            [
                "train",
                *COMMON,
                f"out_dir={tmp_path}",
                "trainer.max_steps=4",
                "trainer.val_check_interval=2",
                "trainer.check_val_every_n_epoch=null",
            ]
        )
        == 0
    )
    (csv,) = (tmp_path / "digits" / "version_0").rglob("metrics.csv")
    header, *rows = [line.split(",") for line in csv.read_text().splitlines()]
    col = header.index("val/acc")
    assert [int(r[1]) for r in rows if r[col]] == [1, 3]  # after batches 2 and 4 (logged steps 1 and 3), once each
