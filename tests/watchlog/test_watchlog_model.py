"""The module: stage chaining by init_from, the prompt layout, detection metrics, option errors."""
import pytest
import torch

from zoo.core import hub
from zoo.methods.watchlog.decoder import PromptBuilder, teacher_forced_loss
from zoo.methods.watchlog.module import WatchLogModule, classification_metrics

TINY = {"arch": "zoo-lm-tiny", "init": None, "max_answer_tokens": 16, "max_new_tokens": 4}
ENC = {"dim": 16, "depth": 1, "heads": 2}


def test_stage1_weights_load_into_stage2_keeping_the_decoder():
    torch.manual_seed(0)
    s1 = WatchLogModule(stage="pretrain", encoder=ENC, window=4)
    s2 = WatchLogModule(stage="align", encoder=ENC, window=4, decoder=TINY)
    lm_before = {k: v.clone() for k, v in s2.state_dict().items() if k.startswith("lm.")}
    hub.adapt_and_load(s2, s1.state_dict(), "watchlog")
    own = s2.state_dict()
    assert all(torch.equal(own[k], v) for k, v in s1.state_dict().items())
    assert all(torch.equal(own[k], v) for k, v in lm_before.items())
    assert "lm.lm_head.weight" not in own                                  # tied weight stored once
    assert s2.lm.lm_head.weight is s2.lm.get_input_embeddings().weight
    trainable = {n.split(".")[0] for n, p in s2.named_parameters() if p.requires_grad}
    assert trainable == {"projector"}
    # and the SFT module takes the full stage-2 state; a detection-only module drops the decoder
    hub.adapt_and_load(WatchLogModule(stage="sft", encoder=ENC, window=4, decoder=TINY), s2.state_dict(), "watchlog")
    hub.adapt_and_load(WatchLogModule(stage="detect", encoder=ENC, window=4), s2.state_dict(), "watchlog")


def test_prompt_places_visual_tokens_after_their_markers():
    torch.manual_seed(0)
    m = WatchLogModule(stage="sft", encoder=ENC, window=3, decoder=TINY)
    b: PromptBuilder = m.builder
    vis = torch.randn(2, 3, m.lm.config.hidden_size)
    x = b.prompt_embeds(m.lm.get_input_embeddings(), vis)
    assert x.shape == (2, b.prompt_len, m.lm.config.hidden_size)
    torch.testing.assert_close(x[:, b.visual_pos], vis)
    text = m.tokenizer.decode([i for i in sum(b.markers, [])])
    assert text == "#0 #1 #2"
    # teacher forcing scores answer tokens only: changing the prompt's visual tokens changes the loss
    l1 = teacher_forced_loss(m.lm, b, vis, ["verdict: benign", "verdict: malicious"])
    l2 = teacher_forced_loss(m.lm, b, vis * 0, ["verdict: benign", "verdict: malicious"])
    assert torch.isfinite(l1) and not torch.isclose(l1, l2)


def test_classification_metrics_known_answer():
    prob = torch.tensor([0.9, 0.8, 0.2, 0.6, 0.1])
    lab = torch.tensor([1, 0, 1, 1, 0])
    m = classification_metrics(prob, lab)
    assert m["accuracy"] == pytest.approx(3 / 5)
    assert m["precision"] == pytest.approx(2 / 3) and m["recall"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(2 / 3)


def test_option_errors():
    with pytest.raises(ValueError, match="model.stage"):
        WatchLogModule(stage="nope")
    with pytest.raises(ValueError, match="model.encoder.dimm"):
        WatchLogModule(encoder={"dimm": 3})
    with pytest.raises(ValueError, match="needs model.decoder"):
        WatchLogModule(stage="sft")
    with pytest.raises(ValueError, match="adapter must be"):
        WatchLogModule(encoder={"adapter": "spatial"})


def test_frame_stride_keeps_every_other_frame():
    m = WatchLogModule(encoder=ENC, window=4, frame_stride=2)
    batch = {"frames": torch.rand(2, 4, 32, 128), "mask": torch.ones(2, 4, dtype=torch.bool),
             "event_labels": torch.tensor([[0, 1, 0, 1], [1, 0, 0, 0]]), "label": torch.tensor([1, 1])}
    x, mask, ev = m._inputs(batch)
    assert x.shape == (2, 2, 32, 128) and ev.tolist() == [[0, 0], [1, 0]]
    assert m(x, mask).shape == (2,)
