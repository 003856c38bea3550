"""FAST on a real HF base (SmolLM2-135M-Instruct) without the base: template tokens of a ChatML tokenizer whose
padding is its EOS (hand-built ids), BT(P) documents ending with the base's own boundary token, shuffled blocks, the
sweep's choice rule and position bins (hand values), Delta loss from a known base CE; the experiments on the tiny
overlay of fast-smollm2.yaml end to end (slow)."""

import json
from typing import ClassVar

import pytest
import torch

from zoo.methods.fast.datamodule import FastSAEDataModule, template_mask, template_token_ids
from zoo.methods.fast.experiments import choose_setting
from zoo.methods.fast.grid import position_edges
from zoo.methods.fast.metrics import POSITION_EDGES
from zoo.methods.fast.pipelines import pretrain_documents
from zoo.models.causal_lm import load_tokenizer
from zoo.models.chat import encode_rendered


class ChatMLTokens:
    """SmolLM2's special-token layout (``<|endoftext|>`` 0, ``<|im_start|>`` 1 = BOS, ``<|im_end|>`` 2 = EOS = pad)
    over a hand vocabulary; ``assistant`` is two tokens, as in SmolLM2's tokenizer."""

    pieces: ClassVar = {
        0: "<|endoftext|>",
        1: "<|im_start|>",
        2: "<|im_end|>",
        3: "system",
        4: "\n",
        5: "You",
        6: " are",
        7: "user",
        8: "Hi",
        9: "ass",
        10: "istant",
        11: "Hello",
        12: " user",
    }
    all_special_ids: ClassVar = [1, 2, 0]
    bos_token_id, eos_token_id, pad_token_id = 1, 2, 2

    def decode(self, ids):
        return "".join(self.pieces[i] for i in ids)


def test_chatml_template_tokens_are_the_specials_and_role_names():
    tok = ChatMLTokens()
    assert template_token_ids(tok) == [0, 1, 2]  # the pad is the EOS: <|im_end|> stays a template token
    # <|im_start|>system\nYou are<|im_end|>\n<|im_start|>user\nHi user<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>
    ids = [1, 3, 4, 5, 6, 2, 4, 1, 7, 4, 8, 12, 2, 4, 1, 9, 10, 4, 11, 2]
    marked = [tok.pieces[i] for i, m in zip(ids, template_mask(tok, ids).tolist()) if m]
    assert marked == [
        "<|im_start|>",
        "system",
        "<|im_end|>",
        "<|im_start|>",
        "user",
        "<|im_end|>",
        "<|im_start|>",
        "ass",
        "istant",
        "<|im_end|>",
    ]  # " user" in the message is content, the newlines are not marked


def test_zoo_lm_template_tokens_are_its_specials_only():
    tok = load_tokenizer()
    _, ids, _ = encode_rendered(
        tok, [{"role": "user", "content": "user assistant"}, {"role": "assistant", "content": "Fine."}]
    )
    marked = [tok.decode([i]) for i, m in zip(ids, template_mask(tok, ids).tolist()) if m]
    assert marked == ["<s>", "<|user|>", "</s>", "<|assistant|>", "</s>"]


def test_pretrain_documents_end_with_the_named_boundary(tmp_path):
    tok = load_tokenizer()
    text = tmp_path / "a.txt"
    text.write_text("one line\nanother line\n")
    wrapped = pretrain_documents(tok, [text], val_fraction=0.0)[0]
    ended = pretrain_documents(tok, [text], val_fraction=0.0, boundary="</s>")[0]
    assert wrapped[0] == tok.bos_token_id and wrapped[-1] == tok.eos_token_id
    assert ended == [*wrapped[1:-1], tok.eos_token_id]  # no BOS, the boundary token at the end
    with pytest.raises(ValueError, match=r"data\.document_boundary: '<\|endoftext\|>'"):
        pretrain_documents(tok, [text], boundary="<|endoftext|>")


def test_shuffled_blocks_are_the_same_blocks_in_another_order(tmp_path):
    text = tmp_path / "a.txt"
    text.write_text("".join(f"line number {i} of the text\n" for i in range(300)))
    tok = load_tokenizer()

    def blocks(shuffle):
        dm = FastSAEDataModule(
            pipeline="bt_pretrain",
            pretrain_path=[str(text)],
            harvest_tokens=None,
            block_size=16,
            empty_content="drop",
            shuffle_blocks=shuffle,
        )
        return [tuple(b.tolist()) for b in dm.train_sequences(tok)]

    plain, shuffled = blocks(False), blocks(True)
    assert len(plain) > 10 and sorted(plain) == sorted(shuffled) and plain != shuffled


def test_sweep_takes_the_weakest_setting_that_is_sparse_enough():
    rows = [
        {"l0": 300.0, "d_sae": 1000, "setting": {"l1_coefficient": 1.0}},
        {"l0": 20.0, "d_sae": 1000, "setting": {"l1_coefficient": 5.0}},
        {"l0": 5.0, "d_sae": 1000, "setting": {"l1_coefficient": 10.0}},
    ]
    assert choose_setting(rows, 0.02) == {"l1_coefficient": 5.0}  # 20 <= 2% of 1,000; 300 is not
    assert choose_setting(rows[:1] + rows[:1], 0.02) == {"l1_coefficient": 1.0}  # none sparse enough: the sparsest
    assert choose_setting([rows[0], {**rows[0], "l0": 250.0, "setting": {"l1_coefficient": 2.0}}], 0.02) == {
        "l1_coefficient": 2.0
    }
    with pytest.raises(ValueError, match="no sweep rows"):
        choose_setting([], 0.02)


def test_position_bins():
    assert position_edges(256) == POSITION_EDGES
    assert position_edges(512) == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 513]
    assert position_edges(3) == [0, 1, 2, 4]


def test_delta_loss_from_a_known_base_ce():
    from zoo.methods.fast.metrics import delta_loss
    from zoo.methods.fast.pipelines import truncated_lm
    from zoo.models.causal_lm import build_causal_lm

    torch.manual_seed(0)
    model = build_causal_lm("zoo-lm-tiny").eval()
    ids = torch.randint(3, 8192, (2, 12))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    batches = [(ids, mask)]
    ce, spliced, pct = delta_loss(model, truncated_lm(model, 1), 1, batches, lambda x: 0.5 * x)
    again = delta_loss(model, truncated_lm(model, 1), 1, batches, lambda x: 0.5 * x, base_ce=ce)
    assert again == pytest.approx((ce, spliced, pct))
    assert delta_loss(model, truncated_lm(model, 1), 1, batches, lambda x: 0.5 * x, base_ce=2 * ce)[2] == pytest.approx(
        100 * (spliced - 2 * ce) / (2 * ce)
    )


@pytest.mark.slow
def test_experiments_on_the_tiny_smollm2_overlay_sweep_grid_and_resume(tmp_path):
    from zoo.methods.fast import experiments

    argv = [
        "--recipe",
        "fast-smollm2.yaml",
        "--overlay",
        "tiny/fast-smollm2.yaml",
        "--name",
        "tiny",
        "--sweep",
        "--sweep-l1",
        "0.5",
        "5",
        "--sweep-jumprelu",
        "1.0:0.01",
        "--seeds",
        "0",
        "1",
        "--pipelines",
        "fast",
        "bt_pretrain",
        "--delta-convs",
        "4",
        "--gsnr-batches",
        "2",
        "--out-dir",
        str(tmp_path / "runs"),
        "--results-dir",
        str(tmp_path / "results"),
    ]
    experiments.main(argv)
    folder = tmp_path / "results" / "fast"
    sweep = json.loads((folder / "tiny-sweep.json").read_text())
    assert [r["l1"] for r in sweep["rows"] if r["sae"] == "standard"] == [0.5, 5.0]
    grid = json.loads((folder / "tiny.json").read_text())
    assert len(grid["rows"]) == 2 * 2 * 2 and {r["seed"] for r in grid["rows"]} == {0, 1}
    chosen = [
        r
        for r in sweep["rows"]
        if r["sae"] == "standard" and f"Chosen: standard {{'l1_coefficient': {r['l1']}}}" in sweep["notes"]
    ]
    assert len(chosen) == 1 and all(r["l1"] == chosen[0]["l1"] for r in grid["rows"] if r["sae"] == "standard")
    for r in grid["rows"]:
        assert 0 < r["l0"] <= r["d_sae"] == 512 and r["l0_fraction"] == pytest.approx(r["l0"] / 512)
        assert r["log2_mse_st"] == r["log2_mse_st"] and r["log2_mse_st_after0"] == r["log2_mse_st_after0"]
    assert "zoo-lm-tiny (2 decoder blocks, d = 64), residual stream after block 1" in grid["notes"]
    assert "'<|assistant|>'" in grid["notes"] and "gradient-norm clip 1.0" in grid["notes"]
    assert {p.name for p in (folder / "figures").iterdir()} == {
        f"tiny-{k}.png" for k in ("log2-mse-st", "error-vs-position", "feature-density", "gsnr")
    }
    before = grid["rows"]
    experiments.main(argv)  # resumed from the logs: nothing retrained, the same rows
    assert json.loads((folder / "tiny.json").read_text())["rows"] == before


def test_model_size_table_puts_each_grid_beside_the_paper(tmp_path):
    from zoo.core.results import write_result
    from zoo.methods.fast import experiments

    def row(pipeline, seed, st, **extra):
        return {
            "pipeline": pipeline,
            "sae": "standard",
            "seed": seed,
            "log2_mse_st": st,
            "log2_mse": st + 1,
            "delta_loss": 1.0,
            "l0": 41.0,
            **extra,
        }

    write_result("fast", "pipelines-standard", [row("fast", 0, 1.0), row("fast", 1, 2.0)], results_dir=tmp_path)
    write_result("fast", "smollm2", [row("bt_chat", 0, 3.0, d_sae=4608)], results_dir=tmp_path)
    experiments.main(["--compare", "--results-dir", str(tmp_path)])
    doc = json.loads((tmp_path / "fast" / "by-model.json").read_text())
    assert [(r["model"], r["pipeline"], r["l0_fraction"], r["paper_log2_mse_st"]) for r in doc["rows"]] == [
        ("zoo-lm.chat (no clip)", "fast", 41 / 2048, 0.6468),
        ("zoo-lm.chat (no clip)", "fast", 41 / 2048, 0.6468),
        ("SmolLM2-135M-Instruct (clip 1.0)", "bt_chat", 41 / 4608, 1.5093),
    ]
    assert doc["summary"][0]["log2_mse_st"]["mean"] == 1.5 and doc["summary"][0]["seeds"] == 2
