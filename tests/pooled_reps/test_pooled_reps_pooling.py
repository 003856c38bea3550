"""Hook pooling during generate equals pooling of generate(output_hidden_states=True), with EOS and left padding."""

import torch

from zoo.models.causal_lm import build_causal_lm
from zoo.models.generation_pool import pooled_generate, pooled_generate_hidden_states, readout_modules


def _model_and_prompts():
    torch.manual_seed(0)
    model = build_causal_lm("zoo-lm-tiny").eval()
    ids = torch.zeros(3, 6, dtype=torch.long)
    mask = torch.zeros(3, 6, dtype=torch.long)
    for i, n in enumerate((6, 3, 4)):  # left padding of 0, 3 and 2 positions
        ids[i, 6 - n :] = torch.randint(3, 8192, (n,))
        mask[i, 6 - n :] = 1
    return model, ids, mask


def test_hook_pooling_equals_output_hidden_states_with_eos_and_padding():
    model, ids, mask = _model_and_prompts()
    torch.manual_seed(1)
    free = pooled_generate(model, ids, mask, 12, eos_token_ids=[], temperature=1.0, top_p=1.0)
    eos = int(free.tokens[0, 4])  # a token sampled mid-reply becomes "EOS": row 0 stops at position 5
    torch.manual_seed(1)
    a = pooled_generate(model, ids, mask, 12, [eos], temperature=1.0, top_p=1.0, token_layer=1)
    torch.manual_seed(1)
    b = pooled_generate_hidden_states(model, ids, mask, 12, [eos], temperature=1.0, top_p=1.0, token_layer=1)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.tokens, free.tokens)
    assert int(a.lengths[0]) <= 5 and torch.equal(a.lengths, b.lengths)
    for key in ("mean", "prompt", "last", "states"):
        assert torch.allclose(getattr(a, key), getattr(b, key), atol=1e-5), key
    # the last readout is hidden_states[-1], i.e. after the final RMSNorm
    assert readout_modules(model)[-1] is model.model.norm


def test_positions_after_eos_and_padding_do_not_count():
    model, ids, mask = _model_and_prompts()
    torch.manual_seed(2)
    pg = pooled_generate(model, ids, mask, 8, [], temperature=1.0, top_p=1.0, token_layer=1)
    eos = int(pg.tokens[1, 2])
    torch.manual_seed(2)
    cut = pooled_generate(model, ids, mask, 8, [eos], temperature=1.0, top_p=1.0, token_layer=1)
    n = int(cut.lengths[1])
    assert n <= 3 and int(cut.tokens[1, n - 1]) == eos  # the EOS position itself is pooled
    assert torch.allclose(cut.mean[1, 1], pg.states[1, :n].mean(0), atol=1e-6)
    assert torch.all(cut.states[1, n:] == 0)
    # prompt pool of the padded row 1 averages its 3 real positions only
    with torch.no_grad():
        hs = model(input_ids=ids[1:2, 3:], output_hidden_states=True).hidden_states
    assert torch.allclose(cut.prompt[0, 1], hs[1][0].mean(0), atol=1e-5)


def test_early_stop_feeds_the_last_token_and_matches_a_full_forward():
    model, ids, mask = _model_and_prompts()
    ids, mask = ids[1:2], mask[1:2]  # one left-padded row: generate stops as soon as it samples the model's EOS
    torch.manual_seed(3)
    free = pooled_generate(model, ids, mask, 10, [], temperature=1.0, top_p=1.0)
    eos = int(free.tokens[0, 4])
    model.generation_config.eos_token_id = eos
    torch.manual_seed(3)
    a = pooled_generate(model, ids, mask, 10, [eos], temperature=1.0, top_p=1.0, token_layer=1)
    torch.manual_seed(3)
    b = pooled_generate_hidden_states(model, ids, mask, 10, [eos], temperature=1.0, top_p=1.0, token_layer=1)
    n = int(a.lengths[0])
    assert n <= 5 and int(a.tokens[0, n - 1]) == eos and torch.all(a.tokens[0, n:] == 0)
    for key in ("mean", "prompt", "last", "states"):
        assert torch.allclose(getattr(a, key), getattr(b, key), atol=1e-5), key
    with torch.no_grad():  # no cache, no padding: the states at the generated positions, EOS included
        hs = model(input_ids=torch.cat([ids[:, 3:], a.tokens[:, :n]], 1), output_hidden_states=True).hidden_states
    assert torch.allclose(a.states[0, :n], hs[2][0, 3 : 3 + n], atol=1e-5)
    assert torch.allclose(a.mean[-1, 0], hs[-1][0, 3 : 3 + n].mean(0), atol=1e-5)


def test_hook_pooling_on_a_gemma3_decoder_equals_output_hidden_states():
    """Gemma-3 (the model-size axis' largest base) pools the same way: a tiny random Gemma3ForCausalLM."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    cfg = Gemma3TextConfig(
        vocab_size=8192,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        sliding_window=4,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    model = Gemma3ForCausalLM(cfg).eval()
    _, ids, mask = _model_and_prompts()
    torch.manual_seed(1)
    a = pooled_generate(model, ids, mask, 8, [2], temperature=1.0, top_p=1.0, token_layer=1)
    torch.manual_seed(1)
    b = pooled_generate_hidden_states(model, ids, mask, 8, [2], temperature=1.0, top_p=1.0, token_layer=1)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.lengths, b.lengths)
    for key in ("mean", "prompt", "last", "states"):
        assert torch.allclose(getattr(a, key), getattr(b, key), atol=1e-5), key
    assert readout_modules(model)[-1] is model.model.norm
