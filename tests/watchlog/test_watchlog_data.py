"""Event files, labels, windows, recording splits, explanation targets and evidence precision."""

import json

import pytest

from zoo.core.data import DataError
from zoo.methods.watchlog.datamodule import WatchLogDataModule, balanced_sampler, explanation_target, serialise_tokens
from zoo.methods.watchlog.decoder import evidence_precision, parse_explanation
from zoo.methods.watchlog.windows import load_event_log, make_windows, split_recordings


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _events(n_rec=3, per_host=5):
    rows = []
    for r in range(n_rec):
        for i in range(per_host):
            for h in ("A", "B"):
                rows.append(
                    {
                        "dataset": f"rec{r}",
                        "host": h,
                        "event_id": 1,
                        "image": f"p{i}.exe",
                        "label": int(h == "B" and i == 2),
                    }
                )
    return rows


def test_malformed_line_names_its_number(tmp_path):
    p = tmp_path / "ev.jsonl"
    p.write_text('{"a": 1}\n\n{"a": 2\n')
    with pytest.raises(DataError, match=r"ev.jsonl:3: invalid JSON"):
        load_event_log(p)
    p.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(DataError, match=r"ev.jsonl:2: expected a JSON object"):
        load_event_log(p)
    p.write_text('{"a": 1, "label": 7}\n')
    with pytest.raises(DataError, match=r"ev.jsonl:1: 'label' must be 0 or 1"):
        load_event_log(p)


def test_labels_csv_by_line_number(tmp_path):
    p = tmp_path / "ev.jsonl"
    p.write_text('{"host": "h", "image": "a.exe"}\n\n{"host": "h", "image": "b.exe"}\n')
    lab = tmp_path / "labels.csv"
    lab.write_text("line,label,technique\n3,1,T1059\n")
    log = load_event_log(p, lab)
    assert log.lines == [1, 3] and log.labels == [0, 1] and log.techniques == {"ev": "T1059"}
    lab.write_text("line,label\n2,1\n")
    with pytest.raises(DataError, match=r"labels.csv:2: line 2 is not an event line"):
        load_event_log(p, lab)


def test_windows_per_host_with_labels_and_techniques(tmp_path):
    p = _write(tmp_path / "ev.jsonl", _events(1, 5))
    log = load_event_log(p)
    log.techniques["rec0"] = "T1003"
    ws = make_windows(log, window=2, group_by="host")
    assert [w.group for w in ws] == ["A"] * 3 + ["B"] * 3
    assert [len(w.event_idx) for w in ws] == [2, 2, 1] * 2
    assert all(log.events[i]["host"] == w.group for w in ws for i in w.event_idx)
    assert [w.label for w in ws] == [0, 0, 0, 0, 1, 0]
    assert [w.technique for w in ws] == ["none"] * 4 + ["T1003", "none"]
    assert len(make_windows(log, window=4, stride=2)) == 4  # starts 0, 2 per host (the tail is covered)


def test_split_by_recording_never_leaks():
    recs = [f"r{i}" for i in range(10)] * 3
    s = split_recordings(recs, (0.6, 0.2), seed=1)
    assert sorted(s["train"] + s["val"] + s["test"]) == sorted(set(recs))
    assert len(s["train"]) == 6 and len(s["val"]) == 2 and len(s["test"]) == 2
    s2 = split_recordings(recs, (0.6, 0.2), seed=1, test_recordings=["r3"])
    assert s2["test"] == ["r3"] and "r3" not in s2["train"] + s2["val"]
    with pytest.raises(DataError, match="data.test_recordings: not in the data"):
        split_recordings(recs, (0.6, 0.2), 0, test_recordings=["nope"])
    with pytest.raises(DataError, match=r"got 1 \(\['r0'\]\).*data.recording_key.*data.test_recordings"):
        split_recordings(["r0"] * 5, (0.6, 0.2), 0)


def test_datamodule_items(tmp_path):
    p = _write(tmp_path / "ev.jsonl", _events(4, 6))
    dm = WatchLogDataModule(
        path=str(p),
        metadata_path=None,
        window=4,
        token_len=8,
        batch_size=2,
        test_recordings=["rec3"],
        deduplicate=False,
    )  # every recording repeats the same events
    dm.setup()
    assert {w.recording for w in dm.splits["test"].windows} == {"rec3"}
    train_recs = {w.recording for w in dm.splits["train"].windows}
    assert "rec3" not in train_recs and not train_recs & {w.recording for w in dm.splits["val"].windows}
    item = dm.splits["test"][1]  # host A, events 4-5 (padded to 4 frames)
    assert item["frames"].shape == (4, 32, 128) and item["tokens"].shape == (4, 8)
    assert item["mask"].tolist() == [True, True, False, False]
    assert item["event_labels"].tolist() == [0, 0, -1, -1]
    assert item["frames"][2:].sum() == 0 and item["tokens"][2:].sum() == 0


def test_serialised_tokens_start_with_separator_and_skip_reserved():
    ids = serialise_tokens({"image": "a.exe", "label": 1, "host": "h"}, 100, 50)
    assert ids[0] == 1 and all(2 <= i < 100 for i in ids[1:]) and len(ids) == 4  # "image", "=", "a.exe"
    assert len(serialise_tokens({"x": " ".join("w" * i for i in range(1, 40))}, 100, 5)) == 5


def test_explanation_roundtrip_and_evidence_precision():
    t = explanation_target(1, "T1003.001", [2, 5, 6, 7, 9])
    assert t == "verdict: malicious ; technique: t1003.001 ; evidence: #2 #5 #6 #7"
    assert parse_explanation(t) == {"verdict": "malicious", "technique": "t1003.001", "evidence": [2, 5, 6, 7]}
    assert parse_explanation(explanation_target(0, "none", [])) == {
        "verdict": "benign",
        "technique": "none",
        "evidence": [],
    }
    assert parse_explanation("garbage")["verdict"] is None
    assert parse_explanation("verdict: malicious ; technique: x ; evidence: #2 #7 #10 #10 #2")["evidence"] == [2, 7, 10]
    prec, n = evidence_precision([[0, 1], [3], [9]], [[1, 0, 1], [0, 0, 0, 1], [1]])
    assert n == 4 and prec == pytest.approx(2 / 4)


def test_balanced_sampler_draws_the_requested_malicious_fraction():
    labels = [1] * 10 + [0] * 90
    idx = list(balanced_sampler(labels * 50, 0.5, seed=0))
    frac = sum(labels[i % 100] for i in idx) / len(idx)
    assert len(idx) == 5000 and abs(frac - 0.5) < 0.03  # ~0.10 without resampling
    assert idx == list(balanced_sampler(labels * 50, 0.5, seed=0))  # seeded
    with pytest.raises(ValueError, match="malicious_fraction=0.5 needs malicious and benign"):
        balanced_sampler([0, 0, 0], 0.5, seed=0)
    with pytest.raises(ValueError, match="data.malicious_fraction must lie in"):
        WatchLogDataModule(malicious_fraction=1.0)
