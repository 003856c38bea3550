"""End to end with the tiny overlay: train the SFT recipe in-process on the real-event sample, then predict."""

from zoo.cli import main


def test_train_and_predict_tiny(tmp_path, capsys):
    assert main(["train", "recipe=watchlog.yaml", "overlay=recipes/tiny/watchlog.yaml", f"out_dir={tmp_path}"]) == 0
    run = tmp_path / "watchlog-tiny" / "version_0"
    assert (run / "checkpoints" / "last.ckpt").is_file()
    capsys.readouterr()
    main(["predict", str(run), "data/mordor-sysmon/sample.jsonl.gz", "--out-dir", str(tmp_path / "pred")])
    out = capsys.readouterr().out
    assert out.count("window ") >= 30 and "explanation:" in out
    assert "lines 1-16]" in out  # line numbers of the user's file
    assert (tmp_path / "pred" / "watchlog_clip.png").stat().st_size > 1000
