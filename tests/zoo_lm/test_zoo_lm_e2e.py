"""End to end with tiny overlays: pre-train -> release -> chat SFT from it -> release -> load and predict."""

import pytest
import torch

from zoo.cli import main
from zoo.core import hub
from zoo.models.causal_lm import load_causal_lm


def test_pretrain_release_sft_release_predict(tmp_path, zoo_home, capsys):
    assert main(["train", "recipe=zoo-lm.yaml", "overlay=recipes/tiny/zoo-lm.yaml", f"out_dir={tmp_path}"]) == 0
    base_run = tmp_path / "zoo-lm-tiny" / "version_0"
    assert (base_run / "export" / "hf" / "config.json").is_file()
    assert main(["release", str(base_run), "--id", "zoo-lm.base"]) == 0
    assert (
        main(
            [
                "train",
                "recipe=zoo-lm-chat.yaml",
                "overlay=recipes/tiny/zoo-lm-chat.yaml",
                "init_from=zoo-lm.base",
                f"out_dir={tmp_path}",
            ]
        )
        == 0
    )
    chat_run = tmp_path / "zoo-lm-chat-tiny" / "version_0"
    assert main(["release", str(chat_run), "--id", "zoo-lm.chat"]) == 0
    entry = hub.read_manifest()["zoo-lm.chat"]
    assert entry["license"].startswith("CC-BY-NC-4.0") and "val/ppl" in entry["metrics"]

    model, tok = load_causal_lm("zoo-lm.chat")
    base, _ = load_causal_lm("zoo-lm.base")
    assert type(model).__name__ == "LlamaForCausalLM" and len(tok) == 8192
    assert not torch.equal(model.model.embed_tokens.weight, base.model.embed_tokens.weight)  # SFT moved it
    capsys.readouterr()
    assert main(["predict", "zoo-lm.chat", "How do I bake bread?"]) == 0
    assert capsys.readouterr().out.strip()


@pytest.mark.slow  # ~20 s of CPU; minutes on the shared machine
def test_paper_recipe_fine_tunes_a_local_hf_directory_on_cpu(tmp_path):
    """The paper recipes' path for a user's own model: arch = an HF directory (here a tiny exported zoo-lm)."""
    import zoo

    zoo.create("zoo-lm", arch="zoo-lm-tiny").export_hf(str(tmp_path / "my-model"))
    assert (
        main(
            [
                "train",
                "recipe=paper/zoo-lm-chat-hf.yaml",
                f"model.arch={tmp_path / 'my-model'}",
                "model.gradient_checkpointing=false",
                "data.path=data/zoo-lm-chat/val.jsonl",
                "data.max_length=64",
                "data.batch_size=2",
                "trainer.accelerator=cpu",
                "trainer.devices=1",
                "trainer.strategy=auto",
                "trainer.precision=32-true",
                "trainer.max_steps=2",
                "trainer.limit_val_batches=1",
                "trainer.accumulate_grad_batches=1",
                "logger.kind=none",
                "export.formats=[hf]",
                f"out_dir={tmp_path}",
            ]
        )
        == 0
    )
    out = tmp_path / "zoo-lm-chat-hf" / "version_0" / "export" / "hf"
    model, tok = load_causal_lm(str(out))
    assert type(model).__name__ == "LlamaForCausalLM" and tok.chat_template
