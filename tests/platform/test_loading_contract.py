"""The loading contract (issue #12): every load path refuses missing, unexpected and reshaped keys, except a method's
declared head keys, and sizes its networks before the weights arrive.

Paths: ``zoo.load`` (also ``zoo release``), ``init_from`` (``train.py``), ``resume``, ``zoo eval``, ``zoo predict``,
``zoo export``. Every manifest entry is loaded through ``zoo.load`` and ``init_from``; a corrupted copy (one key
removed, one renamed, one reshaped) through every path. The small packages run by default, the 21 MB LM-derived
ones under ``-m slow``.
"""

import logging
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

import zoo
from zoo.cli import compose_and_validate, main
from zoo.core import hub
from zoo.core.build import build_module
from zoo.core.recipe import RecipeError
from zoo.core.registry import get_method

SMALL = {"st-tgexplainer.collegemsg", "watchlog.stage1"}
ALL = sorted(hub.read_manifest())
CORRUPTIONS = {"removed": "1 missing", "renamed": "1 missing, 1 unexpected", "reshaped": "1 reshaped"}


def _param(ids):
    return [pytest.param(i, marks=() if i in SMALL else pytest.mark.slow) for i in ids]


def _victim(zoo_id: str, state: dict) -> str:
    """A key no load path may excuse: not a head key of the package's method, a tensor of rank >= 1."""
    heads = get_method(hub.read_manifest()[zoo_id]["method"]).module_cls.head_keys
    return next(k for k in sorted(state) if not hub.is_head_key(k, heads) and state[k].ndim >= 1)


def corrupted_copy(zoo_id: str, kind: str, dst) -> tuple:
    """A copy of the package folder with one key removed, renamed or reshaped; returns ``(folder, key)``."""
    src = hub.checkpoints_dir() / hub.read_manifest()[zoo_id]["path"]
    shutil.copytree(src, dst)
    state = load_file(str(dst / "model.safetensors"))
    key = _victim(zoo_id, state)
    value = state.pop(key)
    if kind == "renamed":
        state[key + "_renamed"] = value
    elif kind == "reshaped":
        state[key] = torch.zeros(value.shape[0] + 1, *value.shape[1:], dtype=value.dtype)
    save_file(state, str(dst / "model.safetensors"))
    return dst, key


def _package_cfg(zoo_id: str) -> dict:
    cfg, _ = hub.load_package(zoo_id)
    return cfg


@pytest.mark.parametrize("zoo_id", _param(ALL))
def test_every_manifest_entry_loads_through_zoo_load_and_init_from(zoo_id, caplog):
    module = zoo.load(zoo_id)
    _, state = hub.load_package(zoo_id)
    assert set(hub.clean_state_dict(state)) == set(module.state_dict())
    cfg = dict(_package_cfg(zoo_id), init_from=zoo_id)
    caplog.set_level(logging.INFO, logger="zoo")
    fresh = build_module(cfg)
    assert "re-initialised head keys" not in caplog.text  # same method, same shapes: nothing to re-initialise
    own = fresh.state_dict()
    assert all(torch.equal(own[k], v) for k, v in module.state_dict().items())


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
@pytest.mark.parametrize("zoo_id", _param(ALL))
def test_corrupted_package_is_refused_by_zoo_load_and_init_from(zoo_id, kind, tmp_path):
    folder, key = corrupted_copy(zoo_id, kind, tmp_path / "pkg")
    with pytest.raises(hub.HubError, match=CORRUPTIONS[kind]) as e:
        zoo.load(str(folder))
    assert key in str(e.value)
    with pytest.raises(hub.HubError, match=CORRUPTIONS[kind]) as e:
        build_module(dict(_package_cfg(zoo_id), init_from=str(folder)))
    assert key in str(e.value) and "init_from" in str(e.value)


@pytest.mark.parametrize("command", ["eval", "predict", "export"])
@pytest.mark.parametrize("zoo_id", sorted(SMALL))
def test_corrupted_package_is_refused_by_cli_paths(zoo_id, command, tmp_path, capsys):
    folder, key = corrupted_copy(zoo_id, "renamed", tmp_path / "pkg")
    extra = {"predict": ["1", "2", "3"], "export": ["--out", str(tmp_path / "out")], "eval": []}[command]
    assert main([command, str(folder), *extra]) == 2
    err = capsys.readouterr().err
    assert "1 missing, 1 unexpected" in err and key in err and key + "_renamed" in err
    assert not (tmp_path / "out").exists()


def test_resume_refuses_a_checkpoint_that_does_not_fit(tmp_path):
    """``resume=`` holds the checkpoint to the same contract before Lightning restores it (no head keys excused)."""
    recipe = "tests/platform/recipes/digits.yaml"
    args = [f"recipe={recipe}", f"out_dir={tmp_path}", "trainer.max_steps=2", "logger.kind=none", "export.formats=[]"]
    assert main(["train", *args]) == 0
    ckpt = tmp_path / "digits" / "version_0" / "checkpoints" / "last.ckpt"
    doc = torch.load(str(ckpt), weights_only=True)
    doc["state_dict"].pop("head.bias")  # a head key: init_from would excuse it, resume may not
    doc["state_dict"]["body.0.weight_renamed"] = doc["state_dict"].pop("body.0.weight")
    torch.save(doc, str(ckpt))
    with pytest.raises(hub.HubError, match="2 missing, 1 unexpected") as e:
        from zoo.core.training import train

        train(compose_and_validate([*args, f"resume={ckpt}", "trainer.max_steps=4"]))
    assert "head.bias" in str(e.value) and "body.0.weight_renamed" in str(e.value)


def test_case2_own_weights_load_into_their_recipe(tmp_path, caplog):
    """Issue #12 case 2: ``init_from=st-tgexplainer.collegemsg`` into its own recipe (``num_nodes: null``) used to fail
    "weights do not fit" with every model shape ``-`` (the network was built in ``setup``). Now the package sizes it."""
    caplog.set_level(logging.WARNING, logger="zoo")
    cfg = compose_and_validate(
        [
            "recipe=st-tgexplainer.yaml",
            "init_from=st-tgexplainer.collegemsg",
            f"out_dir={tmp_path}",
            "trainer.max_steps=2",
            "data.max_train_events=400",
            "data.max_eval_events=64",
            "trainer.limit_val_batches=1",
            "model.fidelity_levels=[]",
            "data.mrr_negatives=0",
            "logger.kind=none",
            "export.formats=[]",
        ]
    )
    module = build_module(cfg)
    assert cfg["model"]["num_nodes"] == 1899 and "adopted model.num_nodes = 1899" in caplog.text
    own = module.state_dict()
    assert all(torch.equal(own[k], v) for k, v in zoo.load("st-tgexplainer.collegemsg").state_dict().items())
    from zoo.core.training import train

    run_dir = train(cfg)
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()


def test_transfer_to_another_graph_reinitialises_node_embeddings_only(tmp_path, caplog):
    """CollegeMsg weights fine-tune on Bitcoin-OTC (another node set): node-indexed head keys are re-initialised at
    the new graph's size and logged; every other weight starts from the package."""
    import lightning as L

    from zoo.core.build import build_datamodule

    caplog.set_level(logging.INFO, logger="zoo")
    cfg = compose_and_validate(
        [
            "recipe=st-tgexplainer-bitcoin-otc.yaml",
            "init_from=st-tgexplainer.collegemsg",
            "data.max_train_events=64",
            "data.max_eval_events=32",
            "model.fidelity_levels=[]",
            "data.mrr_negatives=0",
        ]
    )
    module, dm = build_module(cfg), build_datamodule(cfg)
    ref = zoo.load("st-tgexplainer.collegemsg")
    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=1,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    before = {k: v.clone() for k, v in module.state_dict().items()}
    trainer.fit(module, datamodule=dm)
    assert module.net.node_emb.num_embeddings == dm.num_nodes + 1 != ref.net.node_emb.num_embeddings
    assert "re-initialised head keys ['net.node_emb.weight', 'raw_node_ids']" in caplog.text
    assert torch.equal(before["net.time_enc.omega"], ref.state_dict()["net.time_enc.omega"])
    shared = [k for k in ref.state_dict() if not hub.is_head_key(k, type(module).head_keys) and k != "net.time_scale"]
    assert shared and all(torch.equal(before[k], ref.state_dict()[k]) for k in shared)


def test_transfer_without_init_from_still_refuses_a_wrong_node_count(tmp_path):
    """A recipe that states ``model.num_nodes`` for another graph is a mistake, not a transfer."""
    from zoo.core.training import train

    cfg = compose_and_validate(
        [
            "recipe=st-tgexplainer-bitcoin-otc.yaml",
            "overlay=recipes/tiny/st-tgexplainer.yaml",
            "+model.num_nodes=1899",
            f"out_dir={tmp_path}",
        ]
    )
    with pytest.raises(ValueError, match="model.num_nodes=1899 but .* has 5881 nodes"):
        train(cfg)


def test_case6_watchlog_canvas_mismatch_is_refused_naming_both_sides():
    """Issue #12 case 6: ``init_from`` a WatchLog package into a recipe with another canvas layout used to load
    silently (same pixel size, other rows x cols). Now it fails before the model is built, naming both values."""
    cfg = compose_and_validate(["recipe=watchlog-stage1.yaml", "init_from=watchlog.stage1", "data.canvas=[32,128,8,2]"])
    with pytest.raises(RecipeError) as e:
        build_module(cfg)
    msg = str(e.value)
    assert "model.canvas: recipe [32, 128, 8, 2], watchlog.stage1 (model.canvas) [32, 128, 4, 4]" in msg


def test_settings_the_recipe_leaves_unset_are_adopted_from_the_package():
    """A weight setting that is ``None`` in the recipe takes the package's value (and the run's config.yaml says so)."""
    from zoo.core.build import reconcile_settings

    src_cfg = _package_cfg("watchlog.stage1")
    cfg = {"method": "watchlog", "model": {"canvas": [32, 128, 4, 4], "group_by": None, "window": None}}
    lines = reconcile_settings(cfg, src_cfg, "watchlog", "watchlog.stage1")
    assert cfg["model"]["group_by"] == "host" and cfg["model"]["window"] == 16
    assert "model.group_by = 'host' (from watchlog.stage1)" in lines


def test_fit_sized_buffers_take_the_saved_shape_but_must_be_present():
    """A buffer sized at fit time (a stored set) loads at its saved shape; leaving it out is still refused."""
    import torch

    from zoo.core.hub import HubError, check_fit, load_exact
    from zoo.core.module import ZooModule

    class Fitted(ZooModule):
        fit_sized_buffers = ("stored",)

        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 1)
            self.register_buffer("stored", torch.empty(0, 3))

    saved = {**Fitted().state_dict(), "stored": torch.arange(6.0).reshape(2, 3)}
    fresh = Fitted()
    load_exact(fresh, dict(saved))
    assert torch.equal(fresh.stored, saved["stored"])
    with pytest.raises(HubError, match=r"1 missing"):
        check_fit(Fitted(), {k: v for k, v in saved.items() if k != "stored"})
    with pytest.raises(HubError, match=r"1 reshaped"):
        check_fit(Fitted(), {**saved, "lin.weight": torch.zeros(1, 3)})
