"""Logs continue across resume: a run that fails at step 7 and is resumed from its step-4 checkpoint ends with the same
log history as a run that never failed (csv rows, TensorBoard scalars, one wandb run with increasing steps)."""

import csv

import pytest

from zoo.cli import main

COMMON = [
    "recipe=tests/platform/recipes/digits.yaml",
    "+data.limit=400",
    "data.batch_size=32",
    "trainer.max_epochs=-1",
    "trainer.max_steps=14",
    "trainer.val_check_interval=5",
    "checkpoint.every_n_train_steps=4",
    "export.formats=[]",
]


def _fail_then_resume(out, monkeypatch, *extra):
    monkeypatch.setenv("ZOO_TEST_FAIL_AT_STEP", "7")
    with pytest.raises(RuntimeError, match="test failure at step 7"):
        main(["train", *COMMON, *extra, f"out_dir={out}"])
    monkeypatch.delenv("ZOO_TEST_FAIL_AT_STEP")
    if "logger.kind=wandb" in extra:  # what the end of the killed process would do: close its run
        import time

        import wandb

        wandb.finish(exit_code=1)
        time.sleep(1.1)  # offline run folders are named to the second
    assert main(["train", *COMMON, *extra, f"out_dir={out}", "resume=auto"]) == 0
    return out / "digits" / "version_0"


def _csv(run):
    with open(run / "logs" / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_csv_history_is_kept_and_continued_without_duplicate_steps(tmp_path, monkeypatch):
    assert main(["train", *COMMON, f"out_dir={tmp_path / 'straight'}"]) == 0
    straight = _csv(tmp_path / "straight" / "digits" / "version_0")
    resumed = _csv(_fail_then_resume(tmp_path / "resumed", monkeypatch))
    train_steps = [int(r["step"]) for r in resumed if r.get("train/loss")]
    assert train_steps == sorted(set(train_steps)), f"duplicate or unordered steps {train_steps}"
    assert train_steps[0] == 0 and train_steps[-1] == 13
    assert resumed == straight  # every row, every value: the resumed run logged what the straight run did


@pytest.mark.slow
def test_tensorboard_continues_and_drops_the_lost_segment(tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def scalars(run):
        acc = EventAccumulator(str(run / "logs"))
        acc.Reload()
        return {(e.step, round(e.value, 6)) for e in acc.Scalars("train/loss")}

    assert main(["train", *COMMON, "logger.kind=tensorboard", f"out_dir={tmp_path / 'straight'}"]) == 0
    straight = scalars(tmp_path / "straight" / "digits" / "version_0")
    run = _fail_then_resume(tmp_path / "resumed", monkeypatch, "logger.kind=tensorboard")
    assert len(list((run / "logs").glob("events.out.tfevents.*"))) == 2
    assert scalars(run) == straight


def _wandb_records(path):
    """The records of an offline ``.wandb`` file (LevelDB-log framing: 32 KiB blocks of crc/length/type + bytes)."""
    import struct

    from wandb.proto import wandb_internal_pb2 as pb

    data, pos, buf, out = path.read_bytes(), 7, b"", []  # 7 bytes: ':W&B' magic and version
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:
            pos += 32768 - pos % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0 and length == 0:
            break
        buf, pos = buf + data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 4):  # a full record, or the last piece of one
            rec = pb.Record()
            rec.ParseFromString(buf)
            out.append(rec)
            buf = b""
    return out


@pytest.mark.slow
def test_wandb_offline_resume_is_one_run_with_steps_continuing_from_the_checkpoint(tmp_path, monkeypatch):
    import wandb

    run = _fail_then_resume(tmp_path, monkeypatch, "logger.kind=wandb")
    wandb.finish()  # flush the open segment, as the end of the process does
    rid = (run / "wandb_id.txt").read_text().strip()
    segments = sorted((run / "wandb").glob("offline-run-*"))
    assert len(segments) == 2 and all(s.name.endswith(rid) for s in segments)
    import time

    def read():
        return [
            [r.history.step.num for r in _wandb_records(next(s.glob("*.wandb"))) if r.HasField("history")]
            for s in segments
        ]

    deadline = time.monotonic() + 60  # wandb's writer process may still be flushing the last segment
    while not all(read()) and time.monotonic() < deadline:
        time.sleep(1)
    steps = read()
    runs = [next(r.run for r in _wandb_records(next(s.glob("*.wandb"))) if r.HasField("run")) for s in segments]
    assert [r.run_id for r in runs] == [rid, rid]
    assert [r.resumed for r in runs] == [False, True], "the resumed segment must say it continues the run"
    for seg in steps:
        assert seg == sorted(seg), f"steps go back within a segment: {seg}"
    assert steps[0][0] == 0 and steps[1][0] == 4 and steps[1][-1] == 13, steps  # resumed at the step-4 checkpoint
