"""anchor-adapter analyses on a tiny two-adapter LM: identities with known answers (patching, lens, key scaling,
perplexity, JSD) and the adapter switch."""

import math

import pytest
import torch

from zoo.methods.anchor_adapter import circuit, steering
from zoo.methods.anchor_adapter.evaluation import item_perplexities
from zoo.methods.anchor_adapter.policy import adapters, answer_batch, build_policy, decoder, encode_prompts

ITEMS = [
    {"question": "23 + 48 - 17", "answer": "54"},
    {"question": "5 - 9", "answer": "-4"},
    {"question": "61 + 7", "answer": "68"},
]


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    model, tok = build_policy("zoo-lm-tiny", {"r": 4, "alpha": 8}, {"r": 2, "alpha": 4})
    with torch.no_grad():  # peft starts B at zero: give both adapters an effect
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.2)
    return model.eval(), tok


def _logits(model, ids, mask):
    return model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0)).logits


def test_adapters_switch_and_only_grpo_trains(policy):
    model, tok = policy
    ids, mask = encode_prompts(tok, ["Question: 1 + 2 = ?\nAnswer:"])
    after = _logits(model, ids, mask)
    with adapters(model, ["midtrain"]):
        before = _logits(model, ids, mask)
    assert not torch.allclose(before, after) and torch.equal(after, _logits(model, ids, mask))
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".grpo." in n for n in trainable)


def test_self_patching_is_identity_and_cross_patching_is_not(policy):
    model, tok = policy
    ids, mask = answer_batch(tok, ITEMS, "cpu")[:2]
    after = _logits(model, ids, mask)
    for layer, comp in ((0, "attn"), (1, "mlp")):
        cached = circuit.cache_component(model, ids, mask, layer, comp)
        with circuit.patched(model, layer, comp, cached):
            assert torch.allclose(_logits(model, ids, mask), after, atol=1e-6)
        with adapters(model, ["midtrain"]):
            before = _logits(model, ids, mask)
            with circuit.patched(model, layer, comp, cached):
                assert not torch.allclose(_logits(model, ids, mask), before, atol=1e-4)


def test_last_layer_logit_lens_equals_logits(policy):
    model, tok = policy
    ids, mask, _ = answer_batch(tok, ITEMS, "cpu")
    streams = circuit.lens_streams(model, ids, mask)
    _, norm, head = decoder(model)
    assert torch.allclose(head(norm(streams["resid_post"][-1])), _logits(model, ids, mask)[:, -1], atol=1e-5)
    lens = circuit.logit_lens(model, tok, ITEMS)
    assert set(lens["ranks"]) == {"resid_mid", "mlp_out", "attn_out", "resid_post"}
    assert all(r >= 1 for rs in lens["ranks"].values() for r in rs)


def test_rank_by_hand():
    logits = torch.tensor([[0.1, 0.5, 0.3], [2.0, 1.0, 0.0]])
    assert circuit._rank(logits, torch.tensor([2, 0])).tolist() == [2.0, 1.0]


def test_key_scaling_identity_and_zeroed_columns(policy):
    model, tok = policy
    ids, mask = answer_batch(tok, ITEMS, "cpu")[:2]
    down = decoder(model)[0][1].mlp.down_proj
    idx = torch.tensor([0, 5, 17])
    ref = _logits(model, ids, mask)
    with steering.scaled_keys(down, idx, 1.0):
        assert torch.equal(_logits(model, ids, mask), ref)
    with steering.scaled_keys(down, idx, 0.0):
        scaled = _logits(model, ids, mask)
    base, saved = down.base_layer.weight, down.base_layer.weight.detach().clone()
    loras = [(down.lora_A[a].weight, down.lora_A[a].weight.detach().clone()) for a in down.lora_A]
    with torch.no_grad():  # zero column j of the effective W_down = zero input feature j of base and LoRA A
        base[:, idx] = 0
        for w, _ in loras:
            w[:, idx] = 0
    try:
        assert torch.allclose(scaled, _logits(model, ids, mask), atol=1e-5)
    finally:
        with torch.no_grad():
            base.copy_(saved)
            for w, s in loras:
                w.copy_(s)
    scores = steering.neuron_scores(model, tok, ITEMS, 1)
    assert scores.shape == (down.in_features,) and (scores >= 0).all()


def test_perplexity_by_hand(policy):
    _, tok = policy
    V = 50

    class Peaked(torch.nn.Module):
        """Logit log(3) on the true next token, 0 elsewhere: p(next) = 3 / (V + 2), so PPL = (V + 2) / 3."""

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, input_ids, attention_mask=None):
            logits = torch.zeros(*input_ids.shape, V)
            nxt = torch.cat([input_ids[:, 1:], input_ids[:, :1]], 1) % V
            logits.scatter_(-1, nxt[..., None], math.log(3))
            return type("Out", (), {"logits": logits})

    class ModTok:
        pad_token_id = 0

        def __call__(self, text):
            return type("E", (), {"input_ids": [t % V for t in tok(text).input_ids]})

    ans, pro = item_perplexities(Peaked(), ModTok(), ITEMS)
    assert ans == pytest.approx([(V + 2) / 3] * 3, rel=1e-5) and pro == pytest.approx([(V + 2) / 3] * 3, rel=1e-5)


def test_jsd_by_hand():
    p = torch.log(torch.tensor([[1.0, 0.0], [0.5, 0.5]]).clamp(min=1e-30))
    q = torch.log(torch.tensor([[0.0, 1.0], [0.5, 0.5]]).clamp(min=1e-30))
    assert circuit.jsd(p, q).tolist() == pytest.approx([math.log(2), 0.0], abs=1e-6)


def test_transformer_lens_cache_matches_our_hooks(policy, tmp_path):
    """TransformerBridge (transformer-lens 3.9) on the merged after-RL model: its resid_mid / attn_out / mlp_out /
    resid_post caches at the answer position equal our plain hooks'."""
    import copy

    bridge_mod = pytest.importorskip("transformer_lens.model_bridge")
    model, tok = policy
    ids, mask = answer_batch(tok, ITEMS[:1], "cpu")[:2]
    ours = circuit.lens_streams(model, ids, mask)
    hf = copy.deepcopy(model).merge_and_unload()
    hf.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    bridge = bridge_mod.TransformerBridge.boot_transformers(str(tmp_path), hf_model=hf, tokenizer=tok, device="cpu")
    logits, cache = bridge.run_with_cache(ids)
    assert torch.allclose(logits[:, -1], _logits(model, ids, mask)[:, -1], atol=1e-5)
    for name in ("resid_mid", "attn_out", "mlp_out", "resid_post"):
        for layer, h in enumerate(ours[name]):
            assert torch.allclose(cache[f"blocks.{layer}.hook_{name}"][:, -1], h, atol=1e-5), (name, layer)


def test_neuron_score_overlap_is_normalised_per_prompt_by_its_answer_tokens():
    """By hand: 2 prompts, 3 neurons. Neuron top tokens {5, 6}, {7, 8}, {5, 9}; answers {5} and {6, 7}.
    Overlaps: prompt 0 -> 1/1, 0/1, 1/1; prompt 1 -> 1/2, 1/2, 0/2. Keys |k| = [1, 2, 3] and [4, 0.5, 1] (signs dropped).
    Scores: prompt 0 -> 1·11, 2·1, 3·11 = 11, 2, 33; prompt 1 -> 4·6, 0.5·6, 1·1 = 24, 3, 1; mean 17.5, 2.5, 17."""
    keys = torch.tensor([[1.0, -2.0, 3.0], [4.0, 0.5, -1.0]])
    top = torch.tensor([[5, 6], [7, 8], [5, 9]])
    answers = [torch.tensor([5]), torch.tensor([6, 7, 7])]  # a repeated answer token counts once
    assert steering.overlap_scores(keys, top, answers).tolist() == pytest.approx([17.5, 2.5, 17.0])
    # the former pooled score (overlap over the union of answers / 10 top tokens, mean |k|) ranks neuron 2 above 0
    pooled = torch.isin(top, torch.tensor([5, 6, 7])).float().sum(-1) / 10
    assert (keys.abs().mean(0) * (1 + 10 * pooled)).tolist() == pytest.approx([2.5 * 3, 1.25 * 2, 2.0 * 2])
    with pytest.raises(ValueError, match="no tokens"):
        steering.overlap_scores(keys, top, [torch.tensor([5]), torch.tensor([], dtype=torch.long)])


def test_neuron_scores_equal_per_item_forwards(policy):
    """neuron_scores on a padded batch = the mean of the authors' single-prompt score, each prompt run alone."""
    model, tok = policy
    layer = 1
    _, norm, head = decoder(model)
    down = decoder(model)[0][layer].mlp.down_proj
    d_ff = down.in_features
    with torch.no_grad():
        top = head(norm(down(torch.eye(d_ff)))).topk(10, -1).indices.tolist()
        want = torch.zeros(d_ff)
        keys = []
        h = down.register_forward_pre_hook(lambda m, a: keys.append(a[0][0, -1].abs()))
        for it in ITEMS:  # each prompt alone: no padding
            model(input_ids=answer_batch(tok, [it], "cpu")[0])
        h.remove()
        for it, k in zip(ITEMS, keys):
            answer = set(tok.encode(str(it["answer"]), add_special_tokens=False))
            for j in range(d_ff):
                overlap = len(set(top[j]) & answer) / len(answer)
                want[j] += k[j] * (1 + 10 * overlap) / len(ITEMS)
        got = steering.neuron_scores(model, tok, ITEMS, layer)
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-6)
