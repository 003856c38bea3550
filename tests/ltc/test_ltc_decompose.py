"""The decomposition is exact: heads + other terms sum to ``encode_image`` (tiny CLIP and a random ViT-B-16)."""

import pytest
import torch

pytest.importorskip("open_clip")

from zoo.methods.ltc.decompose import decompose, head_outputs
from zoo.models.clip import CaptionVocab, build_clip


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return build_clip(vocab_size=30).eval()


def _perturb(model):
    """Random LayerNorm affine parameters, so the ln_post fold is tested with gamma != 1, beta != 0."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.LayerNorm):
            m.weight.data = 1 + 0.3 * torch.randn(m.weight.shape, generator=g)
            m.bias.data = 0.3 * torch.randn(m.bias.shape, generator=g)
    return model


def test_parts_sum_to_encode_image_float32(tiny):
    x = torch.randn(4, 3, 48, 48)
    with torch.no_grad():
        d = decompose(_perturb(tiny).visual, x)
        ref = tiny.encode_image(x)
    assert d.heads.shape == (4, 6, 4, 128) and d.others.shape == (4, 7, 128)
    torch.testing.assert_close(d.embedding(), ref, atol=1e-5, rtol=0)


def test_parts_sum_to_encode_image_float64_and_tokens(tiny):
    m = _perturb(build_clip(vocab_size=30)).double().eval()
    x = torch.randn(3, 3, 48, 48, dtype=torch.float64)
    with torch.no_grad():
        d = decompose(m.visual, x, tokens=True)
        ref = m.encode_image(x)
    assert (d.embedding() - ref).abs().max() < 1e-10
    assert d.tokens.shape == (3, 6, 4, 37, 128)
    assert (d.tokens.sum(3) - d.heads).abs().max() < 1e-10


def test_head_sums_equal_attention_output(tiny):
    attn = tiny.visual.transformer.resblocks[2].attn
    h = torch.randn(2, 37, 128)
    with torch.no_grad():
        out, cls_heads, cls_tok = head_outputs(attn, h, n_tokens=True)
        ref = attn(h, h, h, need_weights=False)[0]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(cls_heads.sum(1), ref[:, 0], atol=1e-5, rtol=0)
    torch.testing.assert_close(cls_tok.sum(2), cls_heads, atol=1e-5, rtol=0)


def _vit_b16_visual():
    from open_clip.model import CLIPVisionCfg, _build_vision_tower

    torch.manual_seed(0)
    cfg = CLIPVisionCfg(layers=12, width=768, head_width=64, patch_size=16, image_size=224)
    return _perturb(_build_vision_tower(512, cfg)).eval()


def test_random_vit_b16_float32():
    v = _vit_b16_visual()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        d = decompose(v, x)
        ref = v(x)
    assert d.heads.shape == (1, 12, 12, 512)
    torch.testing.assert_close(d.embedding(), ref, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_random_vit_b16_float64():
    v = _vit_b16_visual().double()
    x = torch.randn(1, 3, 224, 224, dtype=torch.float64)
    with torch.no_grad():
        assert (decompose(v, x).embedding() - v(x)).abs().max() < 1e-10


def test_unsupported_pooling_is_refused(tiny):
    import copy

    v = copy.deepcopy(tiny.visual)
    v.pool_type = "avg"
    with pytest.raises(ValueError, match="CLS-token"):
        decompose(v, torch.randn(1, 3, 48, 48))


def test_caption_vocab_remaps_and_refuses_unknown_words():
    v = CaptionVocab.from_texts(["a photo of a cat", "a small truck"], context_length=8)
    t = v(["a small cat"])
    assert t.shape == (1, 8) and int(t[0, 0]) == len(v) - 2 and int(t[0].argmax()) == 4  # SOT, EOT last
    with pytest.raises(ValueError, match="not in the caption vocabulary"):
        v(["a photo of a dog"])
