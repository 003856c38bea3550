"""ONNX exports (#14 item 5) of the shipped weights users deploy: the LM (full forward, and one decoding step with a KV
cache), the cost model's scorer, WatchLog's detector, ST-TGExplainer's scorer and Cond-DP's regressor (also as a
``torch_export`` ``.pt2``). Each graph is written by ``zoo export``, then run by onnxruntime (or ``torch.export.load``)
on inputs it was not traced with (another batch size, other lengths, padded rows) and compared with the torch model;
the KV-cache graph decodes greedily token by token as ``generate`` does."""

import numpy as np
import pytest
import torch

from zoo.cli import main
from zoo.core.loading import load_module


def _lm_batch(module):
    from zoo.models.causal_lm import export_batch

    texts = ("Hi", "What is the capital of France? Answer in one word.", "Write a haiku about rain on a tin roof.")
    return export_batch(module.tokenizer, texts)[0]


def _watchlog_batch(module):
    _, (x, mask), _ = module.export_graph()
    g = torch.Generator().manual_seed(1)
    x = (
        torch.rand((3, *x.shape[1:]), generator=g)
        if x.is_floating_point()
        else torch.randint(0, 100, (3, *x.shape[1:]), generator=g)
    )
    mask = torch.ones(3, mask.shape[1], dtype=torch.bool)
    mask[1, mask.shape[1] // 2 :] = False  # a short window, padded
    return x, mask


def _tgn_batch(module):
    _, args, _ = module.export_graph()
    g = torch.Generator().manual_seed(1)
    out = []
    for a in args:  # 5 events instead of the traced 2, values redrawn in the same ranges
        shape = (5, *a.shape[1:])
        if a.dtype == torch.bool:
            out.append(torch.rand(shape, generator=g) > 0.5)
        elif a.dtype == torch.long:
            out.append(torch.randint(1, int(module.net.node_emb.num_embeddings), shape, generator=g))
        else:
            out.append((torch.rand(shape, generator=g, dtype=a.dtype) * float(a.max())).sort(-1).values)
    return tuple(out)


def _rows_batch(module):
    """5 rows of features instead of the traced 2 (a model of one ``(B, d)`` input)."""
    (x,) = module.export_graph()[1]
    return (torch.randn(5, *x.shape[1:], generator=torch.Generator().manual_seed(1)),)


CASES = {
    "zoo-lm.chat": (_lm_batch, 1e-3),
    "shapo-cost-model.zoo-lm-hh": (_lm_batch, 1e-3),
    "watchlog.mordor": (_watchlog_batch, 1e-4),
    "st-tgexplainer.collegemsg": (_tgn_batch, 1e-4),
    "cond-dp.commuting-sf-eps1": (_rows_batch, 1e-4),
}


@pytest.mark.parametrize("ref", list(CASES))
def test_onnx_export_matches_torch_on_new_inputs(ref, tmp_path, capsys):
    import onnxruntime as ort

    torch.set_num_threads(1)
    assert main(["export", ref, "--formats", "onnx", "--out", str(tmp_path)]) == 0, capsys.readouterr().err
    module = load_module(ref)[0]
    make, atol = CASES[ref]
    args = make(module)
    graph = module.export_graph()[0]
    with torch.no_grad():
        want = graph(*args)
    want = [t.numpy() for t in (want if isinstance(want, tuple) else (want,))]
    sess = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    got = sess.run(None, {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)})
    assert len(got) == len(want)
    for w, o in zip(want, got):
        assert w.shape == o.shape and w.shape[0] == args[0].shape[0]
        np.testing.assert_allclose(o, w, atol=atol, rtol=1e-3)
    if ref == "zoo-lm.chat":
        _kv_decodes_like_generate(ort.InferenceSession(str(tmp_path / "model_kv.onnx")), module)


@pytest.mark.parametrize("ref", ["cond-dp.commuting-sf-eps1"])
def test_torch_export_takes_another_batch_size(ref, tmp_path, capsys):
    """The ``.pt2`` runs a batch of 5 (it was traced with 2; a static batch fails
    ``Guard failed: x.size()[0] == 2``)."""
    torch.set_num_threads(1)
    assert main(["export", ref, "--formats", "torch_export", "--out", str(tmp_path)]) == 0, capsys.readouterr().err
    module = load_module(ref)[0]
    make, atol = CASES[ref]
    args = make(module)
    with torch.no_grad():
        want = module.export_graph()[0](*args)
        got = torch.export.load(str(tmp_path / "model.pt2")).module()(*args)
    assert got.shape == want.shape == (5,)
    torch.testing.assert_close(got, want, atol=atol, rtol=1e-3)


def _kv_decodes_like_generate(sess, module, n: int = 12):
    """Greedy decoding with the KV-cache step (prompt first, then one token at a time) gives ``generate``'s reply."""
    from zoo.methods.zoo_lm.onnx_cache import empty_cache

    prompt = "How do I bake bread?"
    ids = module.prompt_ids(prompt)
    past = [t.numpy() for t in empty_cache(module.lm, 1)]
    past_mask, new, out = np.zeros((1, 1), np.int64), np.array([ids]), []
    for _ in range(n):
        pos = np.arange(past_mask.sum(), past_mask.sum() + new.shape[1])[None]
        logits, *past = sess.run(
            None, dict(zip([i.name for i in sess.get_inputs()], [new, past_mask, np.ones_like(new), pos, *past]))
        )
        past_mask = np.concatenate([past_mask, np.ones_like(new)], 1)
        tok = int(logits[0, -1].argmax())
        if tok == module.tokenizer.eos_token_id:
            break
        out.append(tok)
        new = np.array([[tok]])
    got = module.tokenizer.decode(out, skip_special_tokens=True).strip()
    assert got == module.generate([prompt], greedy=True, max_new_tokens=n, repetition_penalty=1.0)[0]
