"""The module: stage chaining by init_from, the prompt layout, detection metrics, option errors."""

import pytest
import torch

from zoo.core import hub
from zoo.methods.watchlog.decoder import PromptBuilder, greedy_generate, teacher_forced_loss
from zoo.methods.watchlog.module import WatchLogModule, best_f1_threshold, classification_metrics

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
    assert "lm.lm_head.weight" not in own  # tied weight stored once
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
    # each visual token carries its frame number's embedding (the marker's last token, just before it)
    number_ids = torch.tensor([mk[-1] for mk in b.markers])
    assert [m.tokenizer.decode([i]) for i in number_ids.tolist()] == ["0", "1", "2"]
    torch.testing.assert_close(x[:, b.visual_pos], vis + m.lm.get_input_embeddings()(number_ids))
    text = m.tokenizer.decode([i for mk in b.markers for i in mk])
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
    batch = {
        "frames": torch.rand(2, 4, 32, 128),
        "mask": torch.ones(2, 4, dtype=torch.bool),
        "event_labels": torch.tensor([[0, 1, 0, 1], [1, 0, 0, 0]]),
        "label": torch.tensor([1, 1]),
    }
    x, mask, ev = m._inputs(batch)
    assert x.shape == (2, 2, 32, 128) and ev.tolist() == [[0, 0], [1, 0]]
    assert m(x, mask).shape == (2,)


def test_answer_prefix_tokenises_like_the_start_of_a_training_answer():
    m = WatchLogModule(stage="sft", encoder=ENC, window=4, decoder=TINY)
    for verdict in ("malicious", "benign"):
        pre = m.builder.answer_prefix_ids(f"verdict: {verdict} ;")
        full = m.builder.answer_ids([f"verdict: {verdict} ; technique: t1003 ; evidence: #2"], 40)[0].tolist()
        assert full[: len(pre)] == pre


def test_grounded_verdict_follows_the_detection_threshold():
    torch.manual_seed(0)
    m = WatchLogModule(stage="sft", encoder=ENC, window=4, decoder=TINY).eval()
    frames, mask = torch.rand(2, 4, 32, 128), torch.ones(2, 4, dtype=torch.bool)
    det = m._detection(
        {
            "frames": frames,
            "mask": mask,
            "event_labels": torch.zeros(2, 4, dtype=torch.long),
            "label": torch.full((2,), -1),
        }
    )
    p = torch.sigmoid(det["win_logit"])
    assert p[0] != p[1]
    m.threshold.fill_(float(p.max()))  # one window above, one below
    m.dec_cfg["ground_verdict"] = True
    texts = m._explain(det)
    hi = int(p.argmax())
    assert texts[hi].startswith("verdict: malicious ;") and texts[1 - hi].startswith("verdict: benign ;")
    # the forced prefix is followed by what the LM generates after it
    gen = greedy_generate(m.lm, m.builder, m._visual(det)[:1], 4, prefix="verdict: benign ;")
    assert gen[0].startswith("verdict: benign ;") and len(gen[0]) > len("verdict: benign ;")
    m.dec_cfg["ground_verdict"] = False  # the LM writes the verdict itself
    assert m._explain(det) == greedy_generate(m.lm, m.builder, m._visual(det), 4)


def test_best_f1_threshold_known_answer():
    prob = torch.tensor([0.9, 0.8, 0.3, 0.6, 0.1])
    lab = torch.tensor([1, 0, 1, 1, 0])
    # thresholds: 0.9 -> F1 0.5, 0.8 -> 0.4, 0.6 -> 2/3, 0.3 -> 6/7, 0.1 -> 0.75
    assert best_f1_threshold(prob, lab) == pytest.approx(0.3)


@pytest.mark.parametrize("stage", ["pretrain", "align"])
def test_predict_refuses_a_model_whose_detection_head_never_trained(stage):
    from zoo.core.data import DataError

    kwargs = {"decoder": {"arch": "zoo-lm-tiny", "init": None}} if stage == "align" else {}
    with pytest.raises(DataError, match="detection head was never trained"):
        WatchLogModule(stage=stage, **kwargs).predict_cli(["events.jsonl"])
