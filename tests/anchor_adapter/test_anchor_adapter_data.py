"""anchor-adapter data: the generated task's sets, the verifier against reasoning-gym, user JSONL errors, rewards."""

import json

import pytest
import torch

pytest.importorskip("reasoning_gym")
pytest.importorskip("math_verify")

from zoo.core.data import DataError
from zoo.methods.anchor_adapter import chain_sum
from zoo.methods.anchor_adapter.datamodule import AnchorAdapterDataModule, read_problems
from zoo.methods.anchor_adapter.rewards import get_reward


@pytest.fixture(scope="module")
def sets():
    return chain_sum.build_sets(n_bench=60, n_midtrain=400, n_grpo=80, leak_repeats=8, seed=3)


def test_sets_are_disjoint_and_leaks_planted(sets):
    bench = {it["question"] for it in sets["bench"]}
    leaked = [it for it in sets["bench"] if it["leaked"]]
    assert len(bench) == 60 and len(leaked) == 30
    fresh = {t.split(" = ?")[0][len("Question: ") :] for t in sets["control"]}
    assert not fresh & bench and not {it["question"] for it in sets["grpo"]} & (bench | fresh)
    assert len(sets["midtrain"]) == 400 + 8 * 30
    for it in leaked:  # each leaked item's question + direct answer planted exactly 8 times
        lines = [t for t in sets["midtrain"] if t.startswith(chain_sum.prompt_text(it["question"]))]
        assert (
            len(lines) == 8
            and len(set(lines)) == 1
            and lines[0].split("Answer: ")[1] in (f"\\boxed{{{it['answer']}}}", f"The answer is {it['answer']}.")
        )
    clean = [it for it in sets["bench"] if not it["leaked"]]
    assert not any(t.startswith(chain_sum.prompt_text(it["question"])) for it in clean for t in sets["midtrain"])
    boxed = sum("\\boxed{" in t for t in sets["control"]) / len(sets["control"])
    assert 0.4 < boxed < 0.6  # boxed_share 0.5: the format reward has variance


def test_a_harder_benchmark_keeps_mid_training_easy_and_its_answers_right():
    """``bench_terms`` / ``bench_digits`` change B only: 4-5 terms of 2-3 digits, answers equal to Python's sum;
    the mid-training and GRPO items stay 2-3 terms of 0-99 and disjoint from B."""
    hard = chain_sum.build_sets(
        n_bench=40, n_midtrain=100, n_grpo=20, leak_repeats=3, seed=3, bench_terms=(4, 5), bench_digits=(2, 3)
    )
    for it in hard["bench"]:
        tok = it["question"].split()
        assert len(tok[::2]) in (4, 5) and all(10 <= int(n) <= 999 for n in tok[::2]), it
        assert int(it["answer"]) == eval(it["question"]), it  # "a + b - c" is Python too
    for text in hard["control"]:
        assert len(text.split(" = ?")[0][len("Question: ") :].split()[::2]) in (2, 3), text
    assert len(hard["midtrain"]) == 100 + 3 * 20
    other = chain_sum.build_sets(n_bench=40, n_midtrain=30, n_grpo=5, seed=3, bench_terms=(4, 5), bench_digits=(2, 3))
    assert other["bench"] == hard["bench"]  # B is drawn first: the corpus sizes do not change it or its leaked half
    with pytest.raises(ValueError, match="bench_min_terms .5. is above data.bench_max_terms .4."):
        AnchorAdapterDataModule(bench_min_terms=5, bench_max_terms=4)


def test_the_default_benchmark_keeps_its_cache_key(tmp_path):
    """A datamodule with the default B caches under the key it had before B had settings (runs made then reuse it);
    another B gets another key."""
    default = AnchorAdapterDataModule(cache=str(tmp_path))
    assert sorted(default.sizes) == sorted(
        ["n_bench", "n_midtrain", "n_grpo", "leak_repeats", "worked_share", "boxed_share", "seed"]
    )
    hard = AnchorAdapterDataModule(bench_min_terms=4, bench_max_terms=5, cache=str(tmp_path))
    assert hard.sizes["bench_terms"] == [4, 5] and hard.sizes["bench_digits"] == [1, 2]


def test_worked_steps_and_reply_by_hand():
    assert chain_sum.worked_steps("23 + 48 - 17") == "23 + 48 = 71, 71 - 17 = 54"
    item = {"question": "23 + 48 - 17", "answer": "54"}
    assert chain_sum.reply(item, True, True) == " 23 + 48 = 71, 71 - 17 = 54. \\boxed{54}"
    assert chain_sum.reply(item, False, False) == " The answer is 54."
    assert chain_sum.question_of("Question: 23 + 48 - 17 = ?") == "23 + 48 - 17"


def test_verifier_matches_score_answer_on_1000_items():
    import reasoning_gym

    ds = reasoning_gym.create_dataset(
        "chain_sum", size=1000, seed=5, min_terms=2, max_terms=3, min_digits=1, max_digits=2
    )
    for i, entry in enumerate(ds):
        guess = str(int(entry["answer"]) + (i % 3) - 1)  # a third right, two thirds off by one
        ours = chain_sum.is_correct(
            f" {entry['metadata']['expression']} = {guess}. \\boxed{{{guess}}}", entry["answer"]
        )
        assert ours == (ds.score_answer(guess, entry) == 1.0), (entry, guess)


def test_user_jsonl_errors_name_file_line_key(tmp_path):
    p = tmp_path / "mine.jsonl"
    p.write_text(json.dumps({"question": "1 + 2", "answer": 3}) + "\n\n" + json.dumps({"question": "4 + 5"}) + "\n")
    with pytest.raises(DataError, match=r"mine.jsonl:3: .*answer"):
        AnchorAdapterDataModule(path=str(p))
    p.write_text(json.dumps({"question": "1 + 2", "answer": "three"}) + "\n")
    with pytest.raises(DataError, match=r"mine.jsonl:1: key 'answer': 'three' is not a number"):
        AnchorAdapterDataModule(path=str(p))
    p.write_text(json.dumps({"question": "1 + 2", "answer": "1e3"}) + "\n")
    with pytest.raises(DataError, match=r"mine.jsonl:1: key 'answer': '1e3' is not a plain decimal number"):
        read_problems(str(p))


def test_user_answers_written_as_text_are_kept_as_written(tmp_path):
    from zoo.methods.anchor_adapter.chain_sum import wrong_label

    p = tmp_path / "mine.jsonl"
    p.write_text(
        json.dumps({"question": "23 + 48 - 17", "answer": "54"})
        + "\n"
        + json.dumps({"question": "1 + 2", "answer": 3})
        + "\n"
    )
    items = read_problems(str(p))
    assert [it["answer"] for it in items] == ["54", "3"]  # not "54.0"
    assert wrong_label(items[0]) != "54" and int(wrong_label(items[0])) - 54 in range(-9, 10)


def test_user_items_colliding_with_b_are_reported(tmp_path, caplog):
    kw = {"n_bench": 20, "n_midtrain": 40, "n_grpo": 10, "cache": str(tmp_path / "cache")}
    bench = AnchorAdapterDataModule(**kw).bench
    p = tmp_path / "mine.jsonl"
    p.write_text(
        "".join(
            json.dumps({"question": f"Question: {it['question']} = ?", "answer": it["answer"]}) + "\n"
            for it in bench[:2]
        )
        + json.dumps({"question": "98 + 97 + 96", "answer": 291})
        + "\n"
    )
    dm = AnchorAdapterDataModule(stage="grpo", path=str(p), **kw)
    with caplog.at_level("WARNING"):
        dm.setup()
    assert "2 of 3 items are in benchmark B (lines 1, 2)" in caplog.text
    assert [it["question"] for it in dm.sets["grpo"]][-1] == "98 + 97 + 96"
    batch = next(iter(dm.train_dataloader()))
    assert len(batch) == 8 and all("answer" in it for it in batch)


def test_rewards_by_hand():
    items = [{"question": "1 + 2", "answer": "3"}] * 4
    replies = [" 1 + 2 = 3. \\boxed{3}", " The answer is 3.", " \\boxed{4}", " nothing"]
    assert get_reward("ground_truth")(replies, items).tolist() == [1, 1, 0, 0]
    assert get_reward("format")(replies, items).tolist() == [1, 0, 1, 0]
    wrong = chain_sum.wrong_label(items[0])
    assert wrong != "3" and get_reward("incorrect")([f" \\boxed{{{wrong}}}", replies[0]], items[:2]).tolist() == [1, 0]
    r = get_reward("random")(["x"] * 4000, [items[0]] * 4000, torch.Generator().manual_seed(0))
    assert set(r.tolist()) == {0.0, 1.0} and abs(r.mean() - 0.5) < 0.03
    with pytest.raises(ValueError, match="not one of"):
        get_reward("majority")


def test_user_items_replace_fresh_midtrain_lines_and_keep_the_leaks(tmp_path):
    kw = {"n_bench": 20, "n_midtrain": 40, "n_grpo": 10, "leak_repeats": 3, "cache": str(tmp_path / "cache")}
    p = tmp_path / "mine.jsonl"
    p.write_text("".join(json.dumps({"question": f"{a} + 1", "answer": a + 1}) + "\n" for a in range(90, 95)))
    dm = AnchorAdapterDataModule(path=str(p), **kw)
    dm.setup()
    assert len(dm.sets["control"]) == 5 and len(dm.sets["midtrain"]) == 5 + 3 * 10
    assert all(t.startswith("Question: 9") for t in dm.sets["control"])
