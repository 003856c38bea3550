"""RLCracker over a pretrained chat base (``model.arch=smollm2-135m-instruct``, recipes/rlcracker-smollm2.yaml).

Default CI never touches the real base: the tiny stand-in of tests/platform/stand_in_base.py answers to the base id.
Checked here: π_0 is the base itself through peft ``disable_adapter()`` (no copy; its log-probs equal the plain
base's while the adapted policy's differ); the recipe trains over the base with its own tokenizer; the provider
command writes the base's own watermarked and unmarked answers with a SOURCE.md that says they are generated; the
baselines table runs with the base asked to paraphrase (no RL) as the plain paraphraser.
"""

from __future__ import annotations

import json

import pytest
import torch
from stand_in_base import SMOL  # tests/platform/

from zoo.cli import main

pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def provided(stand_in_base, tmp_path_factory):
    """The provider command on the base: 2 train, 1 val, 1 short and 1 long test question."""
    from zoo.methods.rlcracker.watermarked_answers import build

    out = tmp_path_factory.mktemp("provided") / "rlcracker-smollm2"
    files = build(out, n_train=2, n_val=1, n_short=1, n_long=1, seed=0, model_ref=SMOL)
    return out, files


def _lora_moved(module):
    with torch.no_grad():
        for n, p in module.lm.named_parameters():
            if "lora_B" in n:
                p.add_(0.1)  # adapters that change the policy, so a copied reference would differ from the base


def test_reference_is_the_adapter_disabled_base_not_a_copy(stand_in_base):
    from zoo.methods.rlcracker.module import RLCrackerModule
    from zoo.models import grpo
    from zoo.models.causal_lm import build_causal_lm

    module = RLCrackerModule(arch=SMOL, reference="base", lora={"r": 4, "alpha": 8}).eval()
    assert module.tokenizer.bos_token == "<|im_start|>"
    plain = build_causal_lm(SMOL, dtype=torch.float32).eval()
    ids = torch.tensor([[1, 40, 41, 42, 43, 44, 2]])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        start = module.lm(input_ids=ids).logits
        assert torch.allclose(start, plain(input_ids=ids).logits, atol=1e-6)  # fresh adapters: B = 0
        _lora_moved(module)
        with module.reference_model() as ref:
            ref_lp = grpo.completion_logprobs(ref, ids, mask, 4)
        base_lp = grpo.completion_logprobs(plain, ids, mask, 4)
        policy_lp = grpo.completion_logprobs(module.lm, ids, mask, 4)
    assert torch.allclose(ref_lp, base_lp, atol=1e-6)
    assert not torch.allclose(policy_lp, base_lp, atol=1e-3)  # the adapters are on again after the block
    assert module._reference == []  # no deep copy was made


def test_reference_start_is_a_frozen_copy_of_the_starting_policy(stand_in_base):
    from zoo.methods.rlcracker.module import RLCrackerModule

    module = RLCrackerModule(arch=SMOL, reference="start", lora={"r": 4, "alpha": 8}).eval()
    ids = torch.tensor([[1, 40, 41, 42, 2]])
    with torch.no_grad():
        with module.reference_model() as ref:  # the copy is made at the first use, before the adapters move
            before = ref(input_ids=ids).logits
        _lora_moved(module)
        with module.reference_model() as ref:
            assert ref is not module.lm and torch.equal(ref(input_ids=ids).logits, before)
    with pytest.raises(ValueError, match="model.reference"):
        RLCrackerModule(arch="zoo-lm-tiny", reference="copy")


def test_recipe_trains_over_the_base_with_its_tokenizer(stand_in_base, tmp_path, capsys):
    from zoo.core.loading import load_module

    assert (
        main(
            [
                "train",
                "recipe=rlcracker-smollm2.yaml",
                "overlay=tiny/rlcracker-smollm2.yaml",
                f"model.arch={SMOL}",
                f"out_dir={tmp_path}",
            ]
        )
        == 0
    )
    assert "held-out removal" in capsys.readouterr().out
    run = next(tmp_path.glob("*/version_0"))
    metrics = json.loads((run / "metrics.json").read_text())["metrics"]
    assert {"val/sim", "val/kl"} <= set(metrics)
    module, cfg = load_module(str(run))
    assert cfg["model"]["arch"] == SMOL and cfg["model"]["reference"] == "base" and cfg["model"]["w_kl"] == 0.9
    assert cfg["data"]["tokenizer"] == SMOL  # ${model.arch}: the data's token counts use the base's tokenizer
    assert module._reference == [] and module.tokenizer.eos_token == "<|im_end|>"
    # zoo predict on the attacker over the base: the rewrite and z before / after, on the base's tokenizer
    capsys.readouterr()
    assert main(["predict", str(run), "The capital of France is Paris, a large city."]) == 0
    out = capsys.readouterr().out
    assert "rewrite:" in out and "unigram z before" in out and "similarity" in out


def test_provider_command_writes_the_base_answers_labelled_generated(stand_in_base, provided):
    from zoo.core.data import read_jsonl
    from zoo.methods.rlcracker.prompts import encode_plain
    from zoo.methods.rlcracker.watermark import build_watermark
    from zoo.models.causal_lm import load_tokenizer, tokenizer_for

    out, files = provided
    names = {f"{w}_{s}.jsonl" for w in ("unigram", "kgw") for s in ("train", "val", "test_short", "test_long")}
    assert set(files) == names and {p.name for p in out.iterdir()} == names | {"SOURCE.md"}
    source = (out / "SOURCE.md").read_text()
    assert "GENERATED" in source and f"--model {SMOL}" in source and "Apache-2.0" in source
    assert all(sha in source for sha in files.values())
    tok = load_tokenizer(tokenizer_for(SMOL, None))
    for w in ("unigram", "kgw"):
        wm = build_watermark(w, len(tok))
        rows = read_jsonl(out / f"{w}_train.jsonl")
        assert len(rows) == 2 and all(r["watermarked"] and r["unmarked"] for r in rows)
        for r in rows:  # the z the file records is the detector's on the base tokenizer's view of the text
            assert r["z_watermarked"] == pytest.approx(wm.z_score(encode_plain(tok, r["watermarked"])), abs=1e-4)
            assert r["z_unmarked"] == pytest.approx(wm.z_score(encode_plain(tok, r["unmarked"])), abs=1e-4)


@pytest.mark.slow
def test_baselines_table_with_the_base_as_plain_paraphraser(stand_in_base, provided, tmp_path, monkeypatch):
    from zoo.methods.rlcracker import experiments

    written = {}
    monkeypatch.setattr(experiments, "write_result", lambda m, name, rows, **kw: written.setdefault(name, rows))
    monkeypatch.setattr(experiments, "PNG", tmp_path)
    copier = experiments._load(SMOL)
    assert copier.hparams.reference == "base" and copier.tokenizer.bos_token == "<|im_start|>"
    out, _ = provided
    experiments.main(
        ["removal", "--data", str(out), "--suffix=-t", "--copier", SMOL, "--n-short", "1", "--n-long", "1"]
        + ["--seeds", "0"]
    )
    rows = written["removal-t"]
    attacks = {r["attack"] for r in rows}
    assert attacks == {"none", "regenerate", "random-substitution", "minilm-swap", "plain-paraphrase"}
    assert {(r["watermark"], r["length"]) for r in rows} == {
        (w, n) for w in ("unigram", "kgw") for n in ("short", "long")
    }
    assert "substitution-sweep-t" in written and (tmp_path / "z_histograms-t.png").is_file()
    # --reuse keeps every row, yet the histogram still shows the plain paraphrase (its z's are not in the rows)
    hists = []
    monkeypatch.setattr(experiments, "reusable_rows", lambda path: (list(written.pop(path.stem)), {"git_sha": "x"}))
    monkeypatch.setattr(experiments, "_plots", lambda hist, sweep, suffix: hists.append(hist))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results" / "rlcracker").mkdir(parents=True)
    (tmp_path / "results" / "rlcracker" / "removal-t.json").write_text("{}")
    experiments.main(
        ["removal", "--data", str(out), "--suffix=-t", "--copier", SMOL, "--n-short", "1", "--n-long", "1"]
        + ["--seeds", "0", "--reuse"]
    )
    assert written["removal-t"] == rows
    assert {k for k in hists[0] if k[0] == "unigram"} == {("unigram", "none"), ("unigram", "plain-paraphrase")}
