"""The load flow: a trained module and its resolved recipe from a zoo id, a package folder, a run directory or a
pretrained base id (``zoo.load``, ``zoo eval``, ``zoo predict``, ``zoo export``, ``zoo release``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zoo.core import hub, run
from zoo.core.bases import BASES
from zoo.core.build import build_module, construct
from zoo.core.recipe import anchor_shipped_paths, apply_overrides_checked, load_recipe, validate
from zoo.core.registry import constructor_kwargs, get_method


def load_module(ref: str, which: str = "best", overrides: list[str] | tuple = ()) -> tuple[Any, dict]:
    """A trained LightningModule and its resolved recipe from a zoo id, a package folder or a run directory: the path
    of ``zoo.load``, ``zoo eval``, ``zoo predict``, ``zoo export`` and ``zoo release``. Networks are sized from the
    saved hparams (and ``sizes_from_state``) before the weights arrive; the weights must then fit exactly
    (:func:`zoo.core.hub.load_exact`: no missing, unexpected or reshaped key, head keys included).

    A pretrained base id (``smollm2-135m-instruct``, :mod:`zoo.core.bases`) is the module its registry recipe builds
    (``recipes/zoo-lm-smollm2-chat.yaml``: the base itself, untrained adapters that change nothing), so ``zoo predict`` and
    ``zoo eval`` measure the base as released.

    ``overrides`` are ``train.py``'s ``k=v`` / ``+k=v`` / ``~k`` tokens applied to the saved recipe before the module
    is built (``data.path=my.jsonl``, ``model.generation.temperature=0``), checked like a recipe's keys.

    Raises:
        hub.HubError / run.RunError: nothing loadable at ``ref``.
    """
    import yaml

    p = Path(ref)
    if ref in BASES and not p.exists():
        cfg = load_recipe(BASES[ref].recipe, list(overrides))
        validate(cfg)
        return build_module(cfg).eval(), cfg
    if p.is_dir() and (p / "checkpoints").is_dir():
        cfg = yaml.safe_load((p / "config.yaml").read_text())
        ckpt = hub.read_ckpt(run.find_checkpoint(p, which))
        state = ckpt["state_dict"]
        # hparams as the module saved them: a method may fill data-derived sizes (vocabulary, node count) in setup
        cfg["model"] = dict(ckpt.get("hyper_parameters") or cfg.get("model") or {})
    else:
        cfg, state = hub.load_package(ref)
    anchor_shipped_paths(cfg)  # a run trained in the project root reads its shipped data from any directory
    if overrides:
        apply_overrides_checked(cfg, overrides)
    entry = get_method(cfg["method"])
    kwargs = constructor_kwargs(entry.module_cls, cfg.get("model") or {})
    for k, v in entry.module_cls.sizes_from_state(hub.clean_state_dict(state)).items():
        if kwargs.get(k) is None:
            kwargs[k] = v
    module = construct(entry.module_cls, kwargs, "model")
    hub.load_exact(module, state, where=str(ref))
    module.eval()
    return module, cfg
