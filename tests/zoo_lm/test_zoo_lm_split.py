"""The HH-RLHF split every method relies on, and that zoo-lm's chat SFT data never touch its preference parts."""

import json

import pytest

from zoo.core.data import read_jsonl, repo_root, seeded_split
from zoo.methods.zoo_lm.derived_data import HH_PAIRS, HH_SPLIT, hh_messages

ROOT = repo_root()


@pytest.fixture(scope="module")
def split():
    return json.loads((ROOT / HH_SPLIT).read_text())


@pytest.fixture(scope="module")
def pairs():
    return read_jsonl(ROOT / HH_PAIRS)


def test_split_is_the_documented_seeded_split(split, pairs):
    assert split["seed"] == 0 and split["fractions"] == [0.4, 0.45, 0.15]
    assert [split["sft"], split["preference_train"], split["preference_eval"]] == seeded_split(
        len(pairs), [0.4, 0.45, 0.15], seed=0
    )


def test_split_is_disjoint_and_covers_every_pair(split, pairs):
    parts = [set(split[k]) for k in ("sft", "preference_train", "preference_eval")]
    assert sum(map(len, parts)) == len(pairs) == 2007
    assert set.union(*parts) == set(range(len(pairs)))
    assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    assert [len(p) for p in parts] == [803, 903, 301]


def test_chat_sft_files_hold_no_preference_text(split, pairs):
    rows = [
        json.loads(line)
        for name in ("train", "val")
        for line in (ROOT / f"data/zoo-lm-chat/{name}.jsonl").read_text(encoding="utf-8").split("\n")
        if line
    ]
    hh = {int(r["source"].split(":")[1]) for r in rows if r["source"].startswith("hh-rlhf-harmless:")}
    assert hh == set(split["sft"])
    contents = {m["content"] for r in rows for m in r["messages"]}
    sft_turns = {m["content"] for i in split["sft"] for m in hh_messages(pairs[i]["prompt"], pairs[i]["chosen"])}
    held_out = [pairs[i] for i in split["preference_train"] + split["preference_eval"]]
    # every held-out reply that is not also (verbatim) a turn of some sft transcript, and long enough not to
    # coincide with a short Alpaca output ("No.")
    replies = {t.strip() for p in held_out for t in (p["chosen"], p["rejected"]) if len(t.strip()) >= 20}
    replies -= sft_turns
    assert len(replies) > 2000
    leaked = replies & contents
    assert not leaked, sorted(leaked)[:3]


def test_hh_transcript_parsing():
    prompt = "\n\nHuman: Hi there\n\nAssistant: Hello.\n\nHuman: Help me?\n\nAssistant:"
    assert hh_messages(prompt, " Sure.") == [
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Help me?"},
        {"role": "assistant", "content": "Sure."},
    ]
    merged = hh_messages("\n\nHuman: a\n\nAssistant: b\n\nAssistant: c\n\nHuman: d\n\nAssistant:", "e")
    assert [m["content"] for m in merged] == ["a", "b\n\nc", "d", "e"]
