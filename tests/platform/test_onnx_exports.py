"""ONNX exports (#14 item 5) of the shipped weights users deploy: the LM, the cost model's scorer, WatchLog's detector and
ST-TGExplainer's scorer. Each graph is written by ``zoo export``, then run by onnxruntime on inputs it was not traced
with (another batch size, other lengths, padded rows) and compared with the torch model."""
import numpy as np
import pytest
import torch

from zoo.cli import main
from zoo.core.build import load_module


def _lm_batch(module):
    from zoo.models.causal_lm import export_batch

    texts = ("Hi", "What is the capital of France? Answer in one word.", "Write a haiku about rain on a tin roof.")
    return export_batch(module.tokenizer, texts)[0]


def _watchlog_batch(module):
    _, (x, mask), _ = module.export_graph()
    g = torch.Generator().manual_seed(1)
    x = torch.rand((3, *x.shape[1:]), generator=g) if x.is_floating_point() else torch.randint(
        0, 100, (3, *x.shape[1:]), generator=g)
    mask = torch.ones(3, mask.shape[1], dtype=torch.bool)
    mask[1, mask.shape[1] // 2:] = False  # a short window, padded
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


CASES = {"zoo-lm.chat": (_lm_batch, 1e-3), "shapo-cost-model.zoo-lm-hh": (_lm_batch, 1e-3),
         "watchlog.mordor": (_watchlog_batch, 1e-4), "st-tgexplainer.collegemsg": (_tgn_batch, 1e-4)}


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
