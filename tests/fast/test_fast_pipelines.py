"""FAST's pipelines on zoo-lm.chat: a FAST activation is the conversation run alone, BT blocks attend across
documents, the truncated read equals the full model's, Delta loss of an identity SAE is 0, a saved SAE opens in
sae-lens, and bad user input fails naming file, line and key."""

import json

import pytest
import torch

from zoo.core.data import DataError
from zoo.data.chat import read_conversations
from zoo.methods.fast.metrics import delta_loss
from zoo.methods.fast.pipelines import encode_conversations, harvest, pack_blocks, truncated_lm
from zoo.methods.fast.sae import build_sae
from zoo.models.activations import residual_stream
from zoo.models.causal_lm import load_causal_lm

CONVS = [
    [{"role": "user", "content": "Name a fruit."}, {"role": "assistant", "content": "An apple."}],
    [
        {"role": "user", "content": "How do I bake bread? Tell me the steps."},
        {"role": "assistant", "content": "Mix flour, water and yeast, let it rise, then bake it."},
    ],
]


@pytest.fixture(scope="module")
def lm():
    return load_causal_lm("zoo-lm.chat")


def test_fast_activation_equals_the_conversation_run_alone(lm):
    model, tok = lm
    ids = encode_conversations(tok, CONVS, max_length=256)
    got = harvest(model, ids, [1, 2], pad_id=tok.pad_token_id)  # batched with right padding, forward stops at 2
    for i, seq in enumerate(ids):
        alone = residual_stream(model, torch.tensor([seq]), layers=[1, 2])  # the full model, one sequence
        for layer in (1, 2):
            assert torch.allclose(got[layer][i], alone[layer][0], atol=1e-5)
    assert len(model.model.layers) == 4 and len(truncated_lm(model, 1).model.layers) == 2  # the LM is untouched


def test_bt_blocks_attend_across_documents(lm):
    model, tok = lm
    docs = encode_conversations(tok, CONVS, max_length=256)
    blocks, owner = pack_blocks(docs, block_size=len(docs[0]) + 6)
    assert owner[0].unique().tolist() == [0, 1]
    packed = harvest(model, blocks, [2])[2][0]
    alone = harvest(model, [docs[1]], [2])[2][0]
    start = len(docs[0])  # the second conversation's first token, preceded by the first conversation in the block
    assert not torch.allclose(packed[start:], alone[:6], atol=1e-3)


def test_delta_loss_is_zero_for_an_identity_sae(lm):
    model, tok = lm
    d = model.config.hidden_size
    sae = build_sae("standard", d, 2 * d)
    with torch.no_grad():  # x = ReLU(x) - ReLU(-x): an exact identity
        sae.W_enc.copy_(torch.cat([torch.eye(d), -torch.eye(d)], dim=1))
        sae.W_dec.copy_(torch.cat([torch.eye(d), -torch.eye(d)], dim=0))
        sae.b_enc.zero_()
        sae.b_dec.zero_()
    ids = encode_conversations(tok, CONVS, 256)
    batch = torch.zeros(2, max(map(len, ids)), dtype=torch.long)
    mask = torch.zeros_like(batch)
    for i, s in enumerate(ids):
        batch[i, : len(s)], mask[i, : len(s)] = torch.tensor(s), 1
    ce, _, pct = delta_loss(model, truncated_lm(model, 2), 2, [(batch, mask)], lambda x: sae.decode(sae.encode(x)))
    assert ce > 1.0 and abs(pct) < 1e-4
    zero = delta_loss(model, truncated_lm(model, 2), 2, [(batch, mask)], torch.zeros_like)[2]
    assert zero > 10.0  # zero-ablating the residual stream hurts


def _write(tmp_path, rows):
    p = tmp_path / "chat.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return p


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"messages": [{"role": "robot", "content": "hi"}]}, r":2: messages\[0\]\.role"),
        ({"messages": [{"role": "user", "content": "hi"}]}, r":2: messages: no 'assistant' turn"),
        (
            {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": " "}]},
            r":2: messages\[1\]\.content",
        ),
    ],
)
def test_bad_chat_rows_name_file_line_and_key(tmp_path, bad, match):
    good = {"messages": CONVS[0]}
    path = _write(tmp_path, [good, bad])
    with pytest.raises(DataError, match=match):
        read_conversations(path)


def test_empty_reply_can_be_dropped_and_counted(tmp_path):
    rows = [
        {"messages": CONVS[0]},
        {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": ""}]},
    ]
    convs, dropped = read_conversations(_write(tmp_path, rows), empty_content="drop")
    assert len(convs) == 1 and dropped == 1


def test_bad_layer_names_model_layer():
    from zoo.methods.fast.module import FastSAEModule

    with pytest.raises(ValueError, match=r"model\.layer: 7 is out of range.*0\.\.3"):
        FastSAEModule(layer=7)


def test_saved_sae_opens_in_sae_lens_with_the_same_outputs(tmp_path):
    from sae_lens import SAE

    from zoo.methods.fast.module import FastSAEModule

    for arch in ("standard", "jumprelu"):
        module = FastSAEModule(sae=arch)
        with torch.no_grad():
            module.act_scale.fill_(0.37)
            for p in module.sae.parameters():
                p.add_(0.01 * torch.randn_like(p))
            if arch == "jumprelu":
                module.sae.threshold.fill_(0.05)
        module.save_sae_lens(str(tmp_path / arch))
        loaded = SAE.load_from_disk(str(tmp_path / arch))
        x = 5 * torch.randn(16, module.sae.cfg.d_in)
        assert torch.allclose(loaded.encode(x), module.encode(x), atol=1e-5)
        assert torch.allclose(loaded.decode(loaded.encode(x)), module(x), atol=1e-4)
