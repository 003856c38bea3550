"""experiments.py per model: a recipe names the model, the tables carry it, zoo-lm.chat's file names stay, the
generation cache resumes, and the scale table reads every run that recorded its model; plain-text prompts for a
tokenizer without a chat template."""

import json

from zoo.methods.pooled_reps import experiments
from zoo.methods.pooled_reps.pipeline import encode_prompts, prompt_ids
from zoo.models.causal_lm import load_tokenizer
from zoo.models.chat import encode_rendered


def test_recipe_model_writes_its_own_tables_and_the_scale_table(tmp_path):
    argv = [
        "--recipe",
        "pooled-reps-smollm2.yaml",
        "--overlay",
        "tiny/pooled-reps-smollm2.yaml",
        "--seeds",
        "0",
        "1",
        "--domains",
        "alpaca-heldout",
        "hh-eval",
        "--max-items",
        "12",
        "--n-boot",
        "10",
        "--results-dir",
        str(tmp_path / "results"),
        "--cache",
        str(tmp_path / "cache"),
    ]
    experiments.main(argv)
    folder = tmp_path / "results" / "pooled-reps"
    names = {f.name for f in folder.glob("*.json")}
    assert names == {"alignment-zoo-lm-tiny.json", "delta-zoo-lm-tiny.json", "relations-zoo-lm-tiny.json", "scale.json"}
    doc = json.loads((folder / "alignment-zoo-lm-tiny.json").read_text())
    assert doc["model"] == "zoo-lm-tiny" and doc["items"] == {"alpaca-heldout": 12, "hh-eval": 12}
    assert {r["model"] for r in doc["rows"]} == {"zoo-lm-tiny"} and {r["seed"] for r in doc["rows"]} == {0, 1}
    assert "zoo-lm-tiny (0.6M parameters" in doc["notes"] and "own chat template" in doc["notes"]
    cached = sorted(f.name for f in (tmp_path / "cache").iterdir())
    assert cached == [f"zoo-lm-tiny-{d}-n12-s{s}-T8.pt" for d in ("alpaca-heldout", "hh-eval") for s in (0, 1)]
    scale = json.loads((folder / "scale.json").read_text())["rows"]
    assert [(r["model"], r["domain"], r["space"]) for r in scale] == [
        ("zoo-lm-tiny", "alpaca-heldout", "tfidf"),
        ("zoo-lm-tiny", "hh-eval", "tfidf"),
    ]
    delta = json.loads((folder / "delta-zoo-lm-tiny.json").read_text())["summary"]
    for row in scale:
        d = next(r for r in delta if r["domain"] == row["domain"] and r["space"] == "tfidf" and r["pairing"] == "true")
        assert row["delta_cka"] == d["delta_cka"]["mean"] and row["delta_lo"] <= row["delta_hi"]
        assert abs(row["prompt_minus_mean"] - (row["prompt"]["mean"] - row["mean"]["mean"])) < 1e-12
    assert {p.name for p in (folder / "figures").iterdir()} == {"zoo-lm-tiny"}  # zoo-lm.chat's PNGs untouched
    before = (folder / "alignment-zoo-lm-tiny.json").read_text()
    experiments.main(argv)  # resumed from the cache: the same numbers
    assert json.loads((folder / "alignment-zoo-lm-tiny.json").read_text())["rows"] == json.loads(before)["rows"]


def test_default_recipe_is_zoo_lm_chat_and_keeps_its_file_names():
    cfg = experiments.model_settings("pooled-reps.yaml", [])
    assert (cfg["ref"], cfg["T"], cfg["temperature"], cfg["top_p"], cfg["k"]) == ("zoo-lm.chat", 64, 0.7, 0.95, 10)
    assert experiments.model_settings("pooled-reps-smollm2.yaml", [])["ref"] == "smollm2-135m-instruct"
    assert experiments.model_tag("/models/Qwen3-14B/") == "Qwen3-14B"


def test_prompt_without_a_chat_template_is_a_bos_text_transcript():
    tok = load_tokenizer()
    messages = [
        {"role": "user", "content": "Hi </s> there"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Name a river."},
    ]
    assert prompt_ids(tok, messages) == encode_rendered(tok, messages, add_generation_prompt=True)[1]
    tok.chat_template = None
    ids = prompt_ids(tok, messages)
    assert ids[0] == tok.bos_token_id and tok.eos_token_id not in ids  # "</s>" in the text is not a control token
    assert tok.decode(ids[1:]) == "User: Hi </s> there\n\nAssistant: Hello.\n\nUser: Name a river.\n\nAssistant:"
    input_ids, mask = encode_prompts(tok, [{"messages": messages}, {"messages": messages[:1]}])
    assert mask[1, 0] == 0 and mask[:, -1].all() and input_ids[0].tolist() == ids  # left-padded
