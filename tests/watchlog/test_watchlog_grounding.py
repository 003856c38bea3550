"""De-duplication across splits, user files evaluated whole, rule-wrong scores, technique retrieval, head evidence,
defining events and the technique index in the weights."""

import json
import math

import numpy as np
import pytest
import torch

from zoo.core.data import DataError
from zoo.core.hub import check_fit
from zoo.methods.watchlog import techniques as tq
from zoo.methods.watchlog.datamodule import WatchLogDataModule
from zoo.methods.watchlog.detection import rule_wrong_metrics
from zoo.methods.watchlog.module import WatchLogModule
from zoo.methods.watchlog.protocol import data_overrides
from zoo.methods.watchlog.windows import EventLog, Window, deduplicate_splits, window_key

SAMPLE = "data/mordor-sysmon/sample.jsonl.gz"
ENC = {"kind": "video", "patch": [8, 16], "dim": 16, "depth": 1, "heads": 2}


def _log(images):
    events = [
        {"dataset": "r", "host": "h", "utc_time": f"t{i}", "event_id": 1, "image": im} for i, im in enumerate(images)
    ]
    return EventLog(events, list(range(1, len(events) + 1)), [0] * len(events), ["r"] * len(events))


def test_window_key_ignores_digits_and_reserved_keys_and_dedup_drops_later_splits():
    log = _log(["a1.exe", "b.exe", "a22.exe", "b.exe", "c.exe", "b.exe"])
    w = [Window((0, 1), "r", "h", 0, "none"), Window((2, 3), "r", "h", 0, "none"), Window((4, 5), "r", "h", 0, "none")]
    assert window_key(log, w[0]) == window_key(log, w[1]) != window_key(log, w[2])  # a1 ~ a22; time not drawn
    splits = {"train": [w[0]], "val": [w[1], w[2]], "test": [w[2], w[1]]}
    assert deduplicate_splits(log, splits) == {"train": 0, "val": 1, "test": 2}
    assert splits == {"train": [w[0]], "val": [w[2]], "test": []}


def test_no_normalised_window_in_two_splits_of_the_sample():
    dm = WatchLogDataModule(path=SAMPLE, split=[0.5, 0.2])
    dm.setup()
    keys = {name: {window_key(dm.log_, w) for w in ds.windows} for name, ds in dm.splits.items()}
    assert not keys["train"] & keys["val"] and not keys["train"] & keys["test"] and not keys["val"] & keys["test"]
    raw = WatchLogDataModule(path=SAMPLE, split=[0.5, 0.2], deduplicate=False)
    raw.setup()
    assert sum(dm.duplicates_dropped.values()) == sum(len(d) for d in raw.splits.values()) - sum(
        len(d) for d in dm.splits.values()
    )


def test_a_users_file_without_split_is_evaluated_whole():
    dm = WatchLogDataModule(path=SAMPLE)  # no split, no test_recordings: every window is a test one
    dm.setup()
    assert not dm.is_shipped_data()
    assert len(dm.splits["train"]) == len(dm.splits["val"]) == 0
    assert {w.recording for w in dm.splits["test"].windows} == set(dm.log_.recordings)
    with pytest.raises(DataError, match="no training windows"):
        dm.train_dataloader()
    assert WatchLogDataModule().is_shipped_data()
    again = dm.resplit(split=[0.5, 0.2])  # reuses the events; a split trains again
    assert again.log_ is dm.log_ and len(again.splits["train"]) > 0


def test_data_overrides():
    assert data_overrides(["data.path=x.jsonl", "data.split=[0.8,0.1]"]) == {"path": "x.jsonl", "split": [0.8, 0.1]}
    assert data_overrides([]) == {}
    with pytest.raises(ValueError, match="data.KEY=VALUE"):
        data_overrides(["model.x=1"])


def test_rule_wrong_metrics_hand_values():
    label = torch.tensor([1, 1, 0, 0, 1])
    rule = torch.tensor([0, 1, 1, 0, 0])  # wrong on windows 0 (missed), 2 (false alarm), 4 (missed)
    prob = torch.tensor([0.9, 0.1, 0.2, 0.9, 0.1])
    m = rule_wrong_metrics(prob, label, rule, 0.5)
    assert m == {
        "windows (rule wrong)": 3,
        "accuracy (rule wrong)": 2 / 3,
        "recall (rule wrong)": 0.5,
        "specificity (rule wrong)": 1.0,
    }
    assert rule_wrong_metrics(rule.float(), label, rule, 0.5)["accuracy (rule wrong)"] == 0.0


def test_head_evidence():
    assert tq.head_evidence([0.1, 0.9, 0.6, 0.7, 0.95], 4) == [1, 3, 2]  # frame 4 is padding
    assert tq.head_evidence([0.1, 0.3, 0.2], 3) == [1]  # none above 0.5: the top frame
    assert tq.head_evidence([0.9] * 6, 6, k=2) == [0, 1]
    assert tq.head_evidence([0.9], 0) == []


def test_retrieval_names_the_nearest_technique_or_unknown():
    vecs = np.array([[1.0, 0.0], [2.0, 0.1], [0.0, 1.0]])
    names, protos = tq.prototypes(vecs, ["b", "b", "a"])
    assert names == ["a", "b"] and np.allclose(np.linalg.norm(protos, axis=1), 1)
    assert tq.name_techniques(np.array([[0.1, 1.0], [1.0, 0.0], [-1.0, -1.0]]), names, protos, 0.5) == [
        "a",
        "b",
        tq.UNKNOWN,
    ]
    assert tq.name_techniques(np.array([[1.0, 0.0]]), [], np.zeros((0, 2)), 0.0) == [tq.UNKNOWN]


def test_tau_from_leave_one_recording_out():
    # r1, r2 share technique "x" (same direction); r3's "y" is unique and far away: named x, y -> unknown
    vecs = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    tau = tq.calibrate_tau(vecs, ["x", "x", "y"], ["r1", "r2", "r3"])
    cos_12 = 0.9 / math.hypot(0.9, 0.1)
    assert 0.11 < tau <= cos_12  # below r1~r2, above r3's best (cos to x ~ 0.11)
    assert tq.calibrate_tau(vecs, ["x", "y", "z"], ["r1", "r2", "r3"]) == float("inf")  # nothing recurs


def test_defining_events():
    assert tq.is_defining_event(
        {"command_line": '"C:\\u\\Rubeus.exe" asktgt /user:x /ptt'}, "empire_shell_rubeus_asktgt_ptt"
    )
    assert not tq.is_defining_event({"command_line": "whoami.exe /user"}, "empire_shell_rubeus_asktgt_ptt")
    assert tq.is_defining_event(
        {"target_object": "HKU\\S-1_Classes\\ms-settings\\Shell\\Open\\command"}, "empire_uac_shellapi_fodhelper"
    )
    assert not tq.is_defining_event({"command_line": "rubeus.exe asktgt"}, "a recording without a pattern")


def test_technique_index_travels_with_the_weights_and_old_weights_still_load():
    torch.manual_seed(0)
    m = WatchLogModule(stage="detect", encoder=ENC, window=4)
    assert not any(k.startswith("technique_") for k in m.state_dict())  # no index: nothing stored
    dm = WatchLogDataModule(path=SAMPLE, window=4, split=[0.7, 0.1])
    dm.setup()
    info = m.fit_technique_index(dm.splits["train"])
    assert info["techniques"] == len(m.technique_list()) > 0
    state = m.state_dict()
    assert state["technique_prototypes"].shape == (info["techniques"], 16)
    sized = WatchLogModule(stage="detect", encoder=ENC, window=4, **WatchLogModule.sizes_from_state(state))
    check_fit(sized, state)
    sized.load_state_dict(state)
    assert sized.technique_list() == m.technique_list()
    old = {k: v for k, v in state.items() if not k.startswith("technique_")}  # weights saved before the index
    bare = WatchLogModule(stage="detect", encoder=ENC, window=4, **WatchLogModule.sizes_from_state(old))
    check_fit(bare, old)
    bare.load_state_dict(old)
    pred = bare.predict_dataset(dm.splits["test"], explain=False)
    assert {p["technique"] for p in pred} == {tq.UNKNOWN}
    json.dumps([p["evidence_head"] for p in pred])


def test_explanation_takes_evidence_from_the_head_and_technique_from_retrieval():
    m = WatchLogModule(
        stage="sft",
        encoder=ENC,
        window=4,
        decoder={"arch": "zoo-lm-tiny", "init": None, "max_answer_tokens": 16, "max_new_tokens": 4},
    )
    row = {
        "generated": "verdict: malicious ; technique: t1021 ; evidence: #3",
        "evidence_head": [1, 2],
        "technique": "unknown",
    }
    assert m._ground(row) == "verdict: malicious ; technique: unknown ; evidence: #1 #2"
    assert (
        m._ground({**row, "generated": "verdict: benign ; technique: none"})
        == "verdict: benign ; technique: none ; evidence: none"
    )
    assert m._ground({**row, "generated": "::::"}) == "::::"  # no verdict: left as generated
    m.dec_cfg.update(evidence="lm", technique="lm")
    assert m._ground(row) == row["generated"]
    with pytest.raises(ValueError, match="decoder.evidence"):
        WatchLogModule(stage="sft", encoder=ENC, window=4, decoder={"arch": "zoo-lm-tiny", "evidence": "x"})
