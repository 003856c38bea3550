"""Data checked before the run starts: the datamodule's ``setup("fit")`` runs before any run directory exists, so a
bad row of any method's data (the user's ``data.path`` or a shipped file) fails first, naming the file, the line and
the recipe key to change, and leaves nothing under ``runs/``.

Lightning's own ``setup("fit")`` call inside ``trainer.fit`` is then skipped for that datamodule (the data are read
once). During the check the datamodule sees a stand-in trainer holding the module (``trainer.lightning_module``) and
the recipe's ``trainer`` settings, as a real fit gives it at that point. A setup that needs more of a live trainer
(anything but :class:`~zoo.core.data.DataError` raised) is left to the fit, as before.

The trainer settings a method refuses (``ZooModule.trainer_rules`` in its table) are checked twice: by the recipe
check for what the recipe states (:func:`check_trainer_rules`, before torch), and here for ``devices: auto``, which
only the machine can count (:func:`check_processes`).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from types import SimpleNamespace

from zoo.core.data import DataError
from zoo.core.phases import phase
from zoo.core.schema import RecipeError, method_schema

log = logging.getLogger("zoo")


def recipe_keys(message: str, data: dict) -> list[str]:
    """The ``data.<key>`` entries a data error asks the user to look at: the file key whose path the message starts
    with, then any key whose value (a column or key name, ``data.label = 'y'``) the message quotes; empty when the
    message names a recipe key itself or none matches."""
    if re.search(r"\bdata\.\w+", message):
        return []
    where = message.split(":")[0]
    files = [
        k
        for k, v in data.items()
        if _is_file_key(k)
        and any(
            isinstance(x, str)
            and x
            and (
                where == x or where.endswith("/" + x.lstrip("./")) or Path(where).parent == Path(x)
            )  # a file in the key's folder
            for x in (v if isinstance(v, list) else [v])
        )
    ]
    named = [
        k
        for k, v in data.items()
        if not _is_file_key(k) and isinstance(v, str) and v and (f"'{v}'" in message or f'"{v}"' in message)
    ]
    return [f"data.{k}" for k in files + named]


def with_recipe_key(error: DataError, data: dict) -> DataError:
    """``error`` with ``(recipe key: data.<key>, ...)`` appended when :func:`recipe_keys` finds any."""
    keys = recipe_keys(str(error), data)
    return DataError(f"{error} (recipe key{'s' if len(keys) > 1 else ''}: {', '.join(keys)})") if keys else error


def _is_file_key(key: str) -> bool:
    return bool(re.search(r"(path|_file|_files|_paths|_dir)$", key))


def check_run(cfg: dict, module, datamodule) -> None:
    """What is checked once the module and datamodule exist and before the run directory: the trainer settings the
    method refuses (:func:`check_processes`), then the data (:func:`check_data`)."""
    check_processes(cfg)
    check_data(cfg, module, datamodule)


def planned_processes(trainer: dict) -> int | None:
    """Processes a ``trainer:`` block starts (devices x nodes), or None when ``devices`` is ``auto`` / -1 (the
    machine decides: :func:`check_processes` counts them before a run directory exists)."""
    dev, nodes = trainer.get("devices", "auto"), trainer.get("num_nodes") or 1
    if isinstance(dev, list):
        return len(dev) * nodes
    if isinstance(dev, str) and dev.replace(",", "").strip().isdigit():
        dev = len([d for d in dev.split(",") if d.strip()]) if "," in dev else int(dev)
    return dev * nodes if isinstance(dev, int) and not isinstance(dev, bool) and dev >= 1 else None


def check_trainer_rules(table: dict, cfg: dict, processes: int | None) -> None:
    """Refuse trainer settings the method declares it cannot run (``ZooModule.trainer_rules``): more than
    ``max_processes`` processes, or a refused strategy, under the model settings the rule names.

    Raises:
        RecipeError: naming ``trainer.devices`` or ``trainer.strategy`` and the method's reason.
    """
    model, trainer = cfg.get("model") or {}, cfg.get("trainer") or {}
    for rule in table["module"].get("trainer_rules", []):
        if not all(model.get(k, rule["defaults"].get(k)) in values for k, values in rule["when"].items()):
            continue
        if processes is not None and processes > rule.get("max_processes", processes):
            raise RecipeError(f"trainer.devices: {rule['why']} (this run would start {processes} processes)")
        strategy = trainer.get("strategy")
        if isinstance(strategy, str) and any(
            strategy == s or strategy.startswith(s + "_") for s in rule.get("refused_strategies", ())
        ):
            raise RecipeError(f"trainer.strategy: {rule['why']} (got {strategy!r})")


def check_model_rules(table: dict, cfg: dict) -> None:
    """Refuse a recipe that leaves empty a model argument its settings need (``ZooModule.model_rules``, from the
    method's table, so no torch import): e.g. ShaPO's ``variant: reward`` without ``cost_model``.

    Raises:
        RecipeError: naming ``model.<argument>`` and the method's reason.
    """
    model = cfg.get("model") or {}
    for rule in table["module"].get("model_rules", []):
        if not all(model.get(k, rule["defaults"].get(k)) in values for k, values in rule["when"].items()):
            continue
        for key in rule["requires"]:
            if model.get(key, rule["defaults"].get(key)) in (None, ""):
                raise RecipeError(f"model.{key}: {rule['why']}")


def check_processes(cfg: dict) -> None:
    """The method's trainer rules (``ZooModule.trainer_rules``, from its table) against the processes this machine
    will start: ``devices: auto`` (which the recipe check cannot count) is every visible GPU for a GPU accelerator,
    else 1, times ``num_nodes``. Every rank of a multi-process run checks the same and refuses the same.

    Raises:
        RecipeError: naming ``trainer.devices`` or ``trainer.strategy`` and the method's reason.
    """
    import torch

    table, tr = method_schema(cfg["method"]), cfg.get("trainer") or {}
    if table is None:
        return
    n = planned_processes(tr)
    if n is None:
        gpu = str(tr.get("accelerator", "auto")) in ("auto", "gpu", "cuda") and torch.cuda.is_available()
        n = (torch.cuda.device_count() if gpu else 1) * (tr.get("num_nodes") or 1)
    check_trainer_rules(table, cfg, n)


def check_data(cfg: dict, module, datamodule) -> None:
    """Run ``datamodule.setup("fit")`` now (before the run directory) and skip Lightning's repeat of it.

    Raises:
        DataError: the datamodule's, with ``(recipe key: data.<key>)`` appended when the message names none.
    """
    if datamodule is None:
        return
    tr = cfg.get("trainer") or {}
    stand_in = SimpleNamespace(
        lightning_module=module,
        max_epochs=tr.get("max_epochs"),
        max_steps=tr.get("max_steps", -1),
        global_rank=0,
        local_rank=0,
        world_size=1,
        is_global_zero=True,
        datamodule=datamodule,
    )
    before = datamodule.trainer
    datamodule.trainer = stand_in
    try:
        with phase(f"reading the data ({type(datamodule).__name__}.setup: files, splits, tokenising)"):
            datamodule.setup("fit")
    except DataError as e:
        raise with_recipe_key(e, cfg.get("data") or {}) from None
    except Exception as e:  # noqa: BLE001  (a setup that needs a live trainer: checked by the fit itself)
        log.debug("data check before the run left to the fit: %s: %s", type(e).__name__, e)
        return
    finally:
        datamodule.trainer = before
    setup = datamodule.setup

    def setup_once(stage: str | None = None) -> None:
        datamodule.setup = setup  # later stages (validate, test) run as usual
        if stage != "fit":
            setup(stage)

    datamodule.setup = setup_once
