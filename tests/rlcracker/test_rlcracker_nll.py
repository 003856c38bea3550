"""The NLL term covers question + completion (the authors' ``_get_loss_perplexity``), padding left out."""

import pytest
import torch

transformers = pytest.importorskip("transformers")
from zoo.methods.rlcracker.module import fluency_nll


def test_fluency_nll_is_the_lm_loss_over_question_and_completion_without_padding():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=40,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    lm = transformers.LlamaForCausalLM(cfg).eval()
    pad = 0
    # row 0: question [5, 6, 7] + completion [8, 9]; row 1: left-padded question [11, 12] + completion [13, pad]
    ids = torch.tensor([[5, 6, 7, 8, 9], [pad, 11, 12, 13, pad]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 1, 1, 1, 0]])
    got = fluency_nll(lm, ids, mask)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    labels = ids.masked_fill(mask == 0, -100)
    labels[1, 1] = -100  # row 1's first real token follows a pad: not predicted
    want = lm(input_ids=ids, attention_mask=mask, position_ids=positions, labels=labels).loss  # HF: token mean
    assert float(got) == pytest.approx(float(want), rel=1e-5)
    # by hand: 4 + 2 = 6 predicted tokens (the first real token of each row has no prediction)
    logp = torch.log_softmax(lm(input_ids=ids, attention_mask=mask, position_ids=positions).logits, -1)
    terms = [logp[0, t - 1, ids[0, t]] for t in range(1, 5)] + [logp[1, t - 1, ids[1, t]] for t in (2, 3)]
    assert float(got) == pytest.approx(-float(sum(terms)) / 6, rel=1e-5)
    # the completion-only NLL (the zoo's former term) is a different number
    completion_only = -(logp[0, 2, 8] + logp[0, 3, 9] + logp[1, 2, 13]) / 3
    assert float(got) != pytest.approx(float(completion_only), rel=1e-3)
    got.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in lm.parameters())
