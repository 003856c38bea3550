"""Watermarks: green lists, the green bias and the z detector on hand-made sequences (issue #24's list)."""

import importlib.util
import math

import pytest
import torch

from zoo.methods.rlcracker.watermark import KEY, KGW, Unigram, Watermark, build_watermark

V = 1000


def test_green_list_size_is_floor_gamma_v():
    assert int(Unigram(1001, gamma=0.5).mask.sum()) == 500
    assert int(Unigram(1000, gamma=0.25).mask.sum()) == 250
    assert int(KGW(1001, gamma=0.5).green_mask([5, 6, 7, 8]).sum()) == 500


def test_kgw_list_depends_only_on_prefix_and_key():
    wm = KGW(V)
    a = wm.green_mask([1, 2, 3, 11, 12, 13, 14])
    assert torch.equal(a, wm.green_mask([9, 9, 11, 12, 13, 14]))  # earlier tokens do not matter
    assert torch.equal(a, KGW(V).green_mask([11, 12, 13, 14]))  # nor the instance
    assert not torch.equal(a, KGW(V, key=KEY + 1).green_mask([11, 12, 13, 14]))
    assert not torch.equal(a, wm.green_mask([11, 12, 13, 15]))
    with pytest.raises(ValueError, match="prefix tokens"):
        wm.green_mask([1, 2])


def test_z_on_hand_made_sequences():
    wm = Unigram(V)
    green = torch.nonzero(wm.mask).flatten().tolist()
    red = torch.nonzero(~wm.mask).flatten().tolist()
    assert wm.z_score(green[:4]) == pytest.approx(2.0)  # (4 - 2) / sqrt(4 * 0.25)
    assert wm.z_score(green[:12] + red[:4]) == pytest.approx(2.0)  # (12 - 8) / sqrt(16 * 0.25)
    assert wm.z_score(red[:9]) == pytest.approx(-3.0)  # (0 - 4.5) / 1.5
    assert math.isnan(wm.z_score([]))
    kgw = KGW(V, prefix_length=1)  # MarkLLM's default h = 1: the first token is not scored
    seq = [7]
    for _ in range(8):
        seq.append(int(torch.nonzero(kgw.green_mask(seq)).flatten()[0]))
    assert kgw.green_flags(seq) == [True] * 8 and kgw.z_score(seq) == pytest.approx(math.sqrt(8))


@pytest.mark.parametrize("t", [1, 9, 100])
@pytest.mark.parametrize("gamma", [0.25, 0.5])
def test_all_green_z(t, gamma):
    wm = Unigram(V, gamma=gamma)
    g = torch.nonzero(wm.mask).flatten()[:1].tolist()
    assert wm.z_score(g * t) == pytest.approx(math.sqrt(t * (1 - gamma) / gamma))


@pytest.mark.parametrize("name", ["unigram", "kgw"])
def test_green_mass_under_uniform_logits(name):
    wm = build_watermark(name, V, gamma=0.5, delta=2.0)
    ids = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])
    probs = torch.softmax(wm.processor()(ids, torch.zeros(2, V)), -1)
    for b in range(2):
        mass = float(probs[b][wm.green_mask(ids[b].tolist())].sum())
        e = math.exp(2.0)
        assert mass == pytest.approx(0.5 * e / (0.5 * e + 0.5), abs=1e-6)


@pytest.mark.parametrize("name,n", [("unigram", 3000), ("kgw", 600)])
def test_null_z_is_standard_normal(name, n):
    wm = build_watermark(name, V)
    g = torch.Generator().manual_seed(0)
    z = torch.tensor([wm.z_score(torch.randint(0, V, (40,), generator=g).tolist()) for _ in range(n)])
    tol = 4 / math.sqrt(n)
    assert abs(float(z.mean())) < tol and abs(float(z.std()) - 1) < 3 * tol


def test_watermarked_generation_is_detected_and_plain_is_not():
    """A uniform 'model' sampled through the green bias: z grows like sqrt(T); without it, it stays small."""
    for name in ("unigram", "kgw"):
        wm = build_watermark(name, V)
        g = torch.Generator().manual_seed(1)
        seq = [1, 2, 3, 4]
        for _ in range(200):
            logits = wm.processor()(torch.tensor([seq]), torch.zeros(1, V))
            seq.append(int(torch.multinomial(torch.softmax(logits[0], -1), 1, generator=g)))
        assert wm.detect(seq[4:] if name == "unigram" else seq)
        assert not wm.detect(torch.randint(0, V, (200,), generator=g).tolist())


@pytest.mark.skipif(importlib.util.find_spec("markllm") is None, reason="needs the markllm extra (test oracle)")
@pytest.mark.parametrize("name", ["kgw", "unigram"])
def test_markllm_z_equal(name):  # runs in the venv of constraints-markllm.txt (Pillow 9.4 keeps markllm out of dev)
    """MarkLLM's own scorer (``<Scheme>Utils.score_sequence``, notes §3.7) on the same token ids gives our z."""
    import types

    if name == "kgw":
        from markllm.watermark.kgw.kgw import KGWUtils as Utils
    else:
        from markllm.watermark.unigram.unigram import UnigramUtils as Utils
    cfg = types.SimpleNamespace(
        gamma=0.5,
        delta=2.0,
        hash_key=KEY,
        prefix_length=4,
        f_scheme="time",
        window_scheme="left",
        z_threshold=4.0,
        vocab_size=8192,
        device="cpu",
    )
    ids = torch.randint(0, 8192, (60,), generator=torch.Generator().manual_seed(0))
    z_theirs, _ = Utils(cfg).score_sequence(ids)
    assert float(z_theirs) == pytest.approx(build_watermark(name, 8192).z_score(ids.tolist()), abs=1e-5)


@pytest.mark.parametrize("name", ["kgw", "unigram"])
@pytest.mark.parametrize(
    "folder,provider",
    [
        ("rlcracker", None),
        # the base's own answers (recipes/rlcracker-smollm2.yaml): its tokenizer needs the fetched base
        pytest.param("rlcracker-smollm2", "smollm2-135m-instruct", marks=pytest.mark.slow),
    ],
)
def test_shipped_rows_carry_the_detectors_z(name, folder, provider):
    """data/<folder> was written by this detector: a row's recorded z is the z of its re-tokenised text (with the
    provider's tokenizer), and for zoo-lm.chat's answers the watermarked are flagged while the unmarked are not (a
    seeding change without a data rebuild fails). The SmolLM2 set is checked once it exists."""
    import json

    from zoo.core.data import repo_root
    from zoo.methods.rlcracker.prompts import encode_plain
    from zoo.models.causal_lm import load_tokenizer, tokenizer_for

    path = repo_root() / "data" / folder / f"{name}_val.jsonl"
    if not path.is_file():
        pytest.skip(f"data/{folder} is not generated yet")
    tok = load_tokenizer(tokenizer_for(provider, None) if provider else None)
    mark = build_watermark(name, len(tok))
    rows = [json.loads(line) for line in path.open()]
    for row in rows[:4]:
        assert mark.z_score(encode_plain(tok, row["watermarked"])) == pytest.approx(row["z_watermarked"], abs=1e-3)
        assert mark.z_score(encode_plain(tok, row["unmarked"])) == pytest.approx(row["z_unmarked"], abs=1e-3)
    if provider is None:
        assert sum(r["z_watermarked"] > mark.threshold for r in rows) >= 0.9 * len(rows)
        assert sum(r["z_unmarked"] > mark.threshold for r in rows) <= 0.1 * len(rows)


def test_a_scheme_without_green_mask_cannot_be_built():
    class NoList(Watermark):
        name = "none"

    with pytest.raises(TypeError, match="green_mask"):
        NoList(vocab_size=10)
    with pytest.raises(TypeError, match="green_mask"):
        Watermark(vocab_size=10)
