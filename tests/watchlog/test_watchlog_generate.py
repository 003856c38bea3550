"""Greedy explanations through transformers' ``generate(inputs_embeds=...)`` equal a hand-written greedy loop."""

import pytest
import torch

from zoo.methods.watchlog.decoder import greedy_generate
from zoo.methods.watchlog.module import WatchLogModule

TINY = {"arch": "zoo-lm-tiny", "init": None, "max_answer_tokens": 16, "max_new_tokens": 4}
ENC = {"dim": 16, "depth": 1, "heads": 2}


@torch.no_grad()
def reference_ids(lm, builder, visual, max_new_tokens, prefix=""):
    """The oracle: one full forward per new token (no cache), argmax of the last position, eos ends a row."""
    embed = lm.get_input_embeddings()
    x = builder.prompt_embeds(embed, visual)
    if prefix:
        pre = torch.tensor(builder.answer_prefix_ids(prefix))
        x = torch.cat([x, embed(pre)[None].expand(x.shape[0], -1, -1)], 1)
    rows = []
    for b in range(x.shape[0]):
        seq, ids = x[b : b + 1], []
        for _ in range(max_new_tokens):
            nxt = int(lm(inputs_embeds=seq).logits[0, -1].argmax())
            if nxt == builder.eos:
                break
            ids.append(nxt)
            seq = torch.cat([seq, embed(torch.tensor([[nxt]]))], 1)
        rows.append(ids)
    return rows


def reference_greedy(lm, builder, visual, max_new_tokens, prefix=""):
    return [
        (prefix + builder.tok.decode(ids, skip_special_tokens=True)).strip()
        for ids in reference_ids(lm, builder, visual, max_new_tokens, prefix)
    ]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return WatchLogModule(stage="sft", encoder=ENC, window=4, decoder=TINY).eval()


@pytest.mark.parametrize("prefix", ["", "verdict: benign ;"])
def test_generate_matches_the_greedy_loop(model, prefix):
    torch.manual_seed(1)
    visual = torch.randn(3, 4, model.lm.config.hidden_size)
    assert greedy_generate(model.lm, model.builder, visual, 6, prefix) == reference_greedy(
        model.lm, model.builder, visual, 6, prefix
    )


def test_rows_stop_at_their_own_eos(model, monkeypatch):
    """A token the model emits mid-answer is made the eos: rows end there, the others keep going."""
    torch.manual_seed(2)
    visual = torch.randn(4, 4, model.lm.config.hidden_size)
    free = reference_ids(model.lm, model.builder, visual, 8)
    assert len(free[0]) == 8
    monkeypatch.setattr(model.builder, "eos", free[0][4])
    stopped = greedy_generate(model.lm, model.builder, visual, 8)
    assert stopped == reference_greedy(model.lm, model.builder, visual, 8)
    assert (
        stopped[0] == model.builder.tok.decode(free[0][: free[0].index(free[0][4])], skip_special_tokens=True).strip()
    )


def test_no_new_tokens_returns_the_prefix(model):
    visual = torch.randn(2, 4, model.lm.config.hidden_size)
    assert greedy_generate(model.lm, model.builder, visual, 0, "verdict: benign ;") == ["verdict: benign ;"] * 2
