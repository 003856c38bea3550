"""Stage A probe: the direction v = W1 - W0 points to the unsafe class."""

import pytest
import torch

from zoo.methods.shapo.probe import mean_pooled_states, train_probe


def test_probe_direction_points_to_unsafe():
    g = torch.Generator().manual_seed(0)
    n, d = 200, 8
    safe = torch.randn(n, d, generator=g)
    unsafe = torch.randn(n, d, generator=g)
    unsafe[:, 2] += 3.0  # the unsafe class sits at +3 along axis 2
    feats = torch.cat([safe, unsafe])
    labels = torch.cat([torch.zeros(n), torch.ones(n)]).long()
    res = train_probe(feats, labels, epochs=30, lr=0.05, batch_size=64, heldout=40, seed=0)
    v = res.direction
    assert v[2] > 0 and v[2].abs() == v.abs().max()  # towards unsafe, along the separating axis
    assert res.heldout_accuracy > 0.85
    assert torch.allclose(v, res.weight[1] - res.weight[0])
    # the mean unsafe state projects higher on v than the mean safe one
    assert (unsafe.mean(0) @ v) > (safe.mean(0) @ v)


def test_mean_pooling_ignores_padding():
    from zoo.models.causal_lm import build_causal_lm

    torch.manual_seed(0)
    lm = build_causal_lm("zoo-lm-tiny").eval()
    ids = torch.tensor([[5, 6, 7, 0, 0]])
    a = mean_pooled_states(lm, ids, torch.tensor([[1, 1, 1, 0, 0]]))
    b = mean_pooled_states(lm, ids[:, :3], torch.ones(1, 3, dtype=torch.long))
    assert torch.allclose(a, b, atol=1e-5)


def test_completion_kl_matches_manual_sum_and_is_zero_for_itself():
    from zoo.methods.shapo.lm import completion_kl
    from zoo.models.causal_lm import build_causal_lm

    torch.manual_seed(0)
    p, q = build_causal_lm("zoo-lm-tiny").eval(), build_causal_lm("zoo-lm-tiny").eval()
    prompts, completions = [[1, 5, 6], [1, 9]], [[7, 8], [4, 4, 2]]
    f = lambda m: lambda i, a: m(input_ids=i, attention_mask=a).logits
    kl = completion_kl(f(p), f(q), prompts, completions, pad_id=0, batch_size=2)
    want = []
    with torch.no_grad():
        for pr, c in zip(prompts, completions):
            ids = torch.tensor([pr + c])
            lp, lq = (
                torch.log_softmax(p(input_ids=ids).logits[0], -1),
                torch.log_softmax(q(input_ids=ids).logits[0], -1),
            )
            want.append(
                sum((lp[t].exp() * (lp[t] - lq[t])).sum().item() for t in range(len(pr) - 1, len(pr) + len(c) - 1))
            )
    assert kl.tolist() == pytest.approx(want, rel=1e-4) and min(want) > 0
    assert completion_kl(f(p), f(p), prompts, completions, 0, 2).abs().max() < 1e-6
