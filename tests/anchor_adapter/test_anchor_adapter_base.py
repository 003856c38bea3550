"""anchor-adapter stage 1 over a pretrained base (recipes/anchor-adapter-midtrain[-clean]-smollm2.yaml).

The tiny stand-in of tests/platform/stand_in_base.py answers to ``smollm2-135m-instruct`` (a byte-level tokenizer,
BOS ``<|im_start|>``, EOS ``<|im_end|>``): the mid-training lines must be tokenised with the base's tokenizer, not
the shipped zoo-lm one, and benchmark B is scored before (the bare base) and after.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import yaml
from safetensors.torch import load_file
from stand_in_base import SMOL  # tests/platform/

from zoo.cli import main

pytest.importorskip("gguf")
pytest.importorskip("reasoning_gym")


def test_midtrain_lines_use_the_fed_models_tokenizer(stand_in_base):
    from zoo.methods.anchor_adapter.datamodule import AnchorAdapterDataModule
    from zoo.models.causal_lm import load_tokenizer, tokenizer_for

    line = "Question: 23 + 48 - 17 = ?\nAnswer: \\boxed{54}"
    own = load_tokenizer(tokenizer_for(SMOL, None))
    dm = AnchorAdapterDataModule()
    dm.trainer = SimpleNamespace(lightning_module=SimpleNamespace(tokenizer=own))
    got = dm._collate_lines([line])["input_ids"][0].tolist()
    assert got == own(line).input_ids + [own.convert_tokens_to_ids("<|im_end|>")]
    assert got != load_tokenizer()(line).input_ids + [load_tokenizer().eos_token_id]  # not the zoo-lm tokenizer
    unattached = AnchorAdapterDataModule()
    assert unattached._collate_lines([line])["input_ids"][0].tolist()[:-1] == load_tokenizer()(line).input_ids


@pytest.mark.parametrize(
    "recipe", ["anchor-adapter-midtrain-smollm2.yaml", "anchor-adapter-midtrain-clean-smollm2.yaml"]
)
def test_stage1_over_the_base_scores_benchmark_b(recipe, stand_in_base, tmp_path):
    assert (
        main(
            [
                "train",
                f"recipe={recipe}",
                f"overlay=tiny/{recipe}",
                f"model.base={SMOL}",
                f"out_dir={tmp_path}",
                f"data.cache={tmp_path / 'cache'}",
            ]
        )
        == 0
    )
    run = next(tmp_path.glob("*/version_0"))
    ev = json.loads((run / "anchor" / "eval.json").read_text())
    assert set(ev) == ({"after"} if "clean" in recipe else {"before", "after"})
    assert 0 <= ev["after"]["acc_leaked"] <= 1 and ev["after"]["ppl_answer"] > 1
    package = run / "export" / "package"  # a delta over the base: base.yaml names it, only the adapters are stored
    doc = yaml.safe_load((package / "base.yaml").read_text())
    assert doc["base"] == SMOL and doc["keys"]
    assert f"zoo base fetch {SMOL}" in (package / "README.md").read_text()  # the card's Base section
    stored = load_file(package / "model.safetensors")
    assert stored and all("lora_" in k for k in stored), sorted(stored)[:5]
    from zoo.core.hub import load_package

    _, joined = load_package(str(package))  # the base's tensors joined back from the (stand-in) base
    assert set(stored) < set(joined) and set(doc["keys"]) <= set(joined)
    assert (run / "checkpoints" / "last.ckpt").is_file()  # what the GRPO stage reads (model.stage1)


def test_grpo_stage_over_the_base_starts_from_the_stage1_checkpoint(stand_in_base, tmp_path, capsys):
    """What the recipes' comment promises: GRPO reads the stage-1 run's ``checkpoints/last.ckpt`` (model.stage1)."""
    common = [f"model.base={SMOL}", f"data.cache={tmp_path / 'cache'}"]
    stage1 = tmp_path / "stage1"
    assert (
        main(
            [
                "train",
                "recipe=anchor-adapter-midtrain-smollm2.yaml",
                "overlay=tiny/anchor-adapter-midtrain-smollm2.yaml",
            ]
            + common
            + [f"out_dir={stage1}"]
        )
        == 0
    )
    ckpt = next(stage1.glob("*/version_0/checkpoints/last.ckpt"))
    stage2 = tmp_path / "stage2"
    assert (
        main(
            [
                "train",
                "recipe=anchor-adapter-smollm2.yaml",  # its stage-1 LoRA settings are the stage-1 recipe's
                "overlay=tiny/anchor-adapter-smollm2.yaml",
                f"model.stage1={ckpt}",
            ]
            + common
            + ["model.analyses=[logit_lens,key_scaling]", "export.formats=[]", f"out_dir={stage2}"]
        )
        == 0
    )
    # a GRPO recipe with another stage-1 rank fails naming the settings, before a run directory exists
    wrong = tmp_path / "wrong"
    args = ["train", "recipe=anchor-adapter.yaml", "overlay=tiny/anchor-adapter.yaml", f"model.stage1={ckpt}"]
    assert main(args + common + [f"out_dir={wrong}"]) != 0
    assert "same model.base and model.midtrain_lora needed" in capsys.readouterr().err
    assert not list(wrong.glob("*/version_*"))
    root = next(stage2.glob("*/version_0")) / "anchor"
    ev = json.loads((root / "eval.json").read_text())
    before = json.loads(next(stage1.glob("*/version_0/anchor/eval.json")).read_text())["after"]
    # GRPO's "before" is exactly the stage-1 model it loaded (perplexities do not depend on the reply cap)
    ppl = [k for k in before if k.startswith("ppl_")]
    assert ppl and all(ev["before"][k] == pytest.approx(before[k], rel=1e-5) for k in ppl)
    assert (root / "key_scaling.json").is_file() and (root / "logit_lens.json").is_file()
