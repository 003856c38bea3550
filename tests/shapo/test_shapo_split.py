"""The HH-RLHF preference split by conversation: no conversation crosses train / val / eval, none of val / eval
shares one with zoo-lm.chat's fixed `sft` part, and the shipped file is what the builder writes."""

import json

import pytest

from zoo.core.data import DataError, repo_root
from zoo.data.conversation_split import conversation_key, conversation_split, write_conversation_split
from zoo.data.preference import DEFAULT_PAIRS, DEFAULT_SPLIT, PREFERENCE_SPLIT, PreferenceDataModule, read_pairs


def _prompt(first, later=""):
    return f"\n\nHuman: {first}\n\nAssistant: ok" + (f"\n\nHuman: {later}" if later else "") + "\n\nAssistant:"


def test_conversation_key_is_the_first_human_turn():
    assert conversation_key(_prompt("How do  I\nsteal?", "and then?")) == "How do I steal?"
    assert conversation_key(_prompt("How do I steal?")) == conversation_key(_prompt("How do I steal?", "more"))


def test_conversation_split_moves_shared_eval_pairs_and_keeps_sft():
    # conversations: a = {0 sft, 3 eval}, b = {1 train, 4 eval}, c = {2 train}, d = {5 eval}, e = {6 train}
    prompts = [
        _prompt("a"),
        _prompt("b"),
        _prompt("c"),
        _prompt("a", "x"),
        _prompt("b", "y"),
        _prompt("d"),
        _prompt("e"),
    ]
    out = conversation_split(prompts, sft=[0], preference_train=[1, 2, 6], preference_eval=[3, 4, 5], val_fraction=0.0)
    assert out == {"sft": [0], "preference_train": [1, 2, 3, 4, 6], "preference_val": [], "preference_eval": [5]}
    out = conversation_split(
        prompts, sft=[0], preference_train=[1, 2, 6], preference_eval=[3, 4, 5], val_fraction=0.5, seed=1
    )
    assert len(out["preference_val"]) >= 1 and 3 not in out["preference_val"]  # 3 shares conversation a with sft
    val_convs = {conversation_key(prompts[i]) for i in out["preference_val"]}
    assert not val_convs & {conversation_key(prompts[i]) for i in out["preference_train"]}


def test_shipped_split_no_conversation_crosses_parts():
    root = repo_root()
    rows = read_pairs(root / DEFAULT_PAIRS)
    split = json.loads((root / PREFERENCE_SPLIT).read_text())
    source = json.loads((root / DEFAULT_SPLIT).read_text())
    assert split["sft"] == source["sft"]  # zoo-lm.chat's SFT part stays fixed
    convs = {
        k: {conversation_key(rows[i]["prompt"]) for i in split[k]}
        for k in ("sft", "preference_train", "preference_val", "preference_eval")
    }
    assert not convs["preference_train"] & convs["preference_val"]
    assert not convs["preference_train"] & convs["preference_eval"]
    assert not convs["preference_val"] & convs["preference_eval"]
    assert not convs["sft"] & (convs["preference_val"] | convs["preference_eval"])
    every = [i for k in ("sft", "preference_train", "preference_val", "preference_eval") for i in split[k]]
    assert sorted(every) == list(range(len(rows)))  # a partition of all pairs
    assert set(split["preference_eval"]) <= set(source["preference_eval"])  # eval only lost pairs


def test_shipped_split_is_what_the_builder_writes(tmp_path):
    out = write_conversation_split(tmp_path / "s.json")
    assert json.loads(out.read_text()) == json.loads((repo_root() / PREFERENCE_SPLIT).read_text())


def test_split_parts_overlap_is_refused_and_val_part_checked(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(
        "".join(json.dumps({"prompt": _prompt(str(i)), "chosen": "a", "rejected": "b"}) + "\n" for i in range(6))
    )
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"preference_train": [0, 1], "preference_val": [1], "preference_eval": [5]}))
    with pytest.raises(DataError, match="preference_val and preference_train overlap"):
        PreferenceDataModule(path=str(path), split_file=str(split)).setup("fit")
    split.write_text(json.dumps({"preference_train": [0, 1], "preference_val": [2], "preference_eval": [5]}))
    dm = PreferenceDataModule(path=str(path), split_file=str(split), redteam_path=None)
    dm.setup("fit")
    assert [len(dm.train_set), len(dm.val_set), len(dm.test_set)] == [2, 1, 1]
    with pytest.raises(ValueError, match="val_part"):
        PreferenceDataModule(val_part="test")
