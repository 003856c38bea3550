"""zoo predict (#13): ``--json`` adds metrics when the input carries labels (a chat file's assistant replies), and the
LM's generation settings (greedy, temperature, max tokens) are plain overrides, checked like recipe keys."""

import json
import math

import pytest

from zoo.cli import main
from zoo.core.data import repo_root

REF = "zoo-lm.chat"


@pytest.fixture(scope="module")
def lm():
    from zoo.core.loading import load_module

    return load_module(REF)[0]


@pytest.fixture
def chats(tmp_path):
    lines = (repo_root() / "data" / "zoo-lm-chat" / "train.jsonl").read_text().splitlines()[:2]
    path = tmp_path / "chats.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_json_has_metrics_for_labelled_input_and_none_for_a_prompt(chats, capsys, lm):
    from zoo.methods.zoo_lm.predict import labelled_chats

    assert (
        main(
            ["predict", REF, "model.generation.greedy=true", "model.generation.max_new_tokens=6", str(chats), "--json"]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    m = doc["metrics"]
    assert m["n"] == 2 and 0 <= m["exact_match"] <= 1
    assert math.isclose(m["reference_ppl"], math.exp(m["reference_nll"]), rel_tol=1e-9)
    # the model was trained on these replies: far below a uniform guess over the vocabulary (ln 8192 = 9.0 nats)
    assert 0 < m["reference_nll"] < 8
    replies = [r["reply"] for r in doc["prediction"]]
    assert replies == lm.generate([p for p, _ in labelled_chats([str(chats)])], greedy=True, max_new_tokens=6)
    assert main(["predict", REF, "model.generation.max_new_tokens=4", "Hello", "--json"]) == 0
    assert "metrics" not in json.loads(capsys.readouterr().out)


def test_greedy_and_temperature_zero_decode_the_argmax(lm):
    import torch

    prompt = "How do I bake bread?"
    greedy = lm.generate([prompt], greedy=True, max_new_tokens=5, seed=1)
    assert greedy == lm.generate([prompt], temperature=0.0, max_new_tokens=5, seed=2)  # no sampling: seed-free
    ids = torch.tensor([lm.prompt_ids(prompt)])
    for _ in range(5):  # argmax decoding by hand (repetition_penalty 1.0 so the logits are untouched)
        nxt = lm.lm(input_ids=ids).logits[0, -1].argmax()
        if int(nxt) == lm.tokenizer.eos_token_id:
            break
        ids = torch.cat([ids, nxt.view(1, 1)], 1)
    by_hand = lm.tokenizer.decode(ids[0, len(lm.prompt_ids(prompt)) :], skip_special_tokens=True).strip()
    assert lm.generate([prompt], greedy=True, max_new_tokens=5, repetition_penalty=1.0) == [by_hand]


def test_generation_override_typos_fail_like_recipe_keys(capsys):
    assert main(["predict", REF, "model.generation.temprature=0", "Hello"]) == 2
    err = capsys.readouterr().err
    assert "model.generation.temprature" in err and "temperature" in err
    assert main(["predict", REF, "model.generation.max_new_tokens=0", "Hello"]) == 2
    assert "model.generation.max_new_tokens: must be >= 1" in capsys.readouterr().err
