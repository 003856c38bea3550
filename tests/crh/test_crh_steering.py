"""The authors' pre-hook site (block l's input = block l - 1's output) covers every position; prompt-only steering
touches only the prefill of ``generate``."""

import pytest
import torch

from zoo.methods.crh.steering import last_token_states, steer_site, steered_generate
from zoo.models.activations import decoder_layers, steer
from zoo.models.causal_lm import build_causal_lm, load_tokenizer


@pytest.fixture(scope="module")
def lm():
    torch.manual_seed(0)
    return build_causal_lm("zoo-lm-tiny").eval(), load_tokenizer()


def test_input_site_equals_a_forward_pre_hook_at_every_position(lm):
    model, _ = lm
    ids = torch.randint(3, 200, (2, 6))
    v = torch.randn(64)

    def pre_hook(_m, args, kwargs):  # what the authors register on block l
        return (args[0] + v, *args[1:]), kwargs

    handle = decoder_layers(model)[1].register_forward_pre_hook(pre_hook, with_kwargs=True)
    with torch.no_grad():
        expected = model(input_ids=ids).logits
    handle.remove()
    with steer(model, steer_site(1, "input"), v), torch.no_grad():
        got = model(input_ids=ids).logits
    assert torch.allclose(got, expected, atol=1e-5)
    with torch.no_grad():
        plain = model(input_ids=ids).logits
    assert not torch.allclose(plain[:, 0], got[:, 0])  # the first position is steered too
    assert steer_site(1, "output") == 1
    with pytest.raises(ValueError, match="layer 0"):
        steer_site(0, "input")


def test_prompt_only_steers_the_prefill_only(lm):
    model, tok = lm
    calls = []
    block = decoder_layers(model)[0]
    handle = block.register_forward_hook(lambda _m, _a, out: calls.append(out[0] if isinstance(out, tuple) else out))
    v = torch.randn(1, 64) * 50
    steered_generate(
        model, tok, ["User: hi\nAssistant: "], v, 1, "input", prompt_only=True, max_new_tokens=3, temperature=0.0
    )
    with_prompt_only = [c.clone() for c in calls]
    calls.clear()
    steered_generate(
        model,
        tok,
        ["User: hi\nAssistant: "],
        torch.zeros(1, 64),
        1,
        "input",
        prompt_only=True,
        max_new_tokens=3,
        temperature=0.0,
    )
    handle.remove()
    # the recording hook runs after steer's (prepended) hook, so it sees the steered output: + v on the prefill
    # only; decode steps see block 0's own output (block 0 does not depend on the steered KV cache)
    assert torch.allclose(with_prompt_only[0], calls[0] + v[:, None], atol=1e-4)
    n = min(len(calls), len(with_prompt_only))
    assert n >= 2
    for a, b in zip(with_prompt_only[1:n], calls[1:n]):
        assert not torch.allclose(a, b + v[:, None], atol=1e-3)


def test_last_token_states_ignore_padding(lm):
    model, tok = lm
    texts = ["User: a\nAssistant: b", "User: a much longer question here\nAssistant: and its reply"]
    both = last_token_states(model, tok, texts, [0, 1])
    alone = last_token_states(model, tok, texts[:1], [0, 1])
    assert torch.allclose(both[1][0], alone[1][0], atol=1e-5)


def test_keyword_mass_is_a_probability_and_grows_with_more_ids(lm):
    model, tok = lm
    prompts = ["User: hi\nAssistant: ", "User: what is bread?\nAssistant: "]
    v = torch.zeros(2, 64)
    texts, small = steered_generate(
        model, tok, prompts, v, 1, "input", max_new_tokens=4, temperature=0.0, watch_ids=[5]
    )
    _, large = steered_generate(
        model, tok, prompts, v, 1, "input", max_new_tokens=4, temperature=0.0, watch_ids=list(range(3, 4000))
    )
    assert len(texts) == 2 and small.shape == (2,)
    assert bool(((small >= 0) & (large <= 1 + 1e-6) & (large > small)).all())
