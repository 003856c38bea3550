"""Packages over a base (issue #12): only tensors that differ are stored, the chain is verified base first."""

import pytest
import torch
import yaml
from safetensors.torch import load_file, save_file

import zoo
from zoo.cli import main
from zoo.core import delta, hub
from zoo.core.rebase import rebase_package

RECIPE = "tests/platform/recipes/digits.yaml"


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    assert main(["train", f"recipe={RECIPE}", f"out_dir={out}", "trainer.max_steps=3", "logger.kind=none"]) == 0
    return out / "digits" / "version_0"


def _fine_tuned_head(zoo_home, digits_run, zoo_id: str) -> dict:
    """Release the run as ``zoo_id`` and change its head only (a fine-tune with a frozen body)."""
    assert main(["release", str(digits_run), "--id", zoo_id, "--force"]) == 0  # may replace an earlier release
    f = zoo_home / zoo_id / "model.safetensors"
    state = load_file(str(f))
    state["head.weight"] = state["head.weight"] + 1.0
    save_file(state, str(f), metadata={"format": "full"})
    entry = hub.read_manifest()[zoo_id]
    entry["files"]["model.safetensors"] = hub.file_entry(f)
    hub.write_manifest_entry(zoo_id, entry)
    return state


def test_delta_package_stores_only_changed_tensors_and_loads_identically(zoo_home, digits_run):
    assert main(["release", str(digits_run), "--id", "digits-mlp.base"]) == 0
    full = _fine_tuned_head(zoo_home, digits_run, "digits-mlp.head")
    before = zoo.load("digits-mlp.head")
    sizes = rebase_package("digits-mlp.head", "digits-mlp.base")
    assert sizes["stored"] == 1 and sizes["from_base"] == len(full) - 1 and sizes["after"] < sizes["before"]
    assert set(load_file(str(zoo_home / "digits-mlp.head" / "model.safetensors"))) == {"head.weight"}
    entry = hub.read_manifest()["digits-mlp.head"]
    assert entry["base"] == "digits-mlp.base" and "base.yaml" in entry["files"]
    after = zoo.load("digits-mlp.head")
    assert all(torch.equal(after.state_dict()[k], v) for k, v in before.state_dict().items())


def test_delta_refuses_a_base_that_changed(zoo_home, digits_run):
    assert main(["release", str(digits_run), "--id", "digits-mlp.base"]) == 0
    _fine_tuned_head(zoo_home, digits_run, "digits-mlp.head")
    rebase_package("digits-mlp.head", "digits-mlp.base")
    _fine_tuned_head(zoo_home, digits_run, "digits-mlp.base")  # the base is re-released with other weights
    with pytest.raises(hub.HubError, match="the base changed"):
        zoo.load("digits-mlp.head")


def test_delta_refuses_a_tampered_base(zoo_home, digits_run):
    assert main(["release", str(digits_run), "--id", "digits-mlp.base"]) == 0
    _fine_tuned_head(zoo_home, digits_run, "digits-mlp.head")
    rebase_package("digits-mlp.head", "digits-mlp.base")
    f = zoo_home / "digits-mlp.base" / "model.safetensors"
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(hub.HubError, match="digits-mlp.base: sha256 mismatch"):
        zoo.load("digits-mlp.head")


def test_split_over_base_matches_lora_wrapped_names_and_exact_values():
    base = {
        "lm.model.layers.0.self_attn.q_proj.weight": torch.ones(2, 2),
        "lm.model.embed_tokens.weight": torch.zeros(3, 2),
    }
    own = {
        "policy.base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight": torch.ones(2, 2),
        "policy.base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight": torch.ones(1, 2),
        "policy.base_model.model.model.embed_tokens.weight": torch.zeros(3, 2).index_fill(0, torch.tensor([1]), 1e-7),
    }
    keys, stored = delta.split_over_base(own, base)
    assert keys == {
        "policy.base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight": "lm.model.layers.0.self_attn.q_proj.weight"
    }
    assert set(stored) == {
        "policy.base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight",
        "policy.base_model.model.model.embed_tokens.weight",
    }  # one value differs by 1e-7


def test_base_yaml_must_be_well_formed(tmp_path):
    (tmp_path / "base.yaml").write_text(yaml.safe_dump({"base": "zoo-lm.base"}))
    with pytest.raises(delta.DeltaError, match="must map base"):
        delta.read_base(tmp_path)
