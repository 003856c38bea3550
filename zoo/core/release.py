"""``zoo release``: a finished run becomes a zoo package under ``checkpoints/`` and its manifest entry."""

from __future__ import annotations

import shutil
from pathlib import Path

from zoo.core import delta, hub
from zoo.core.loading import load_module


def release(run_dir: Path, zoo_id: str, which: str = "best", base: str | None = None) -> Path:
    """Turn a finished run into a zoo package ``checkpoints/<zoo_id>/`` and its manifest entry; with ``base`` (a
    manifest id) the package stores only the tensors that differ from it (:func:`zoo.core.rebase.rebase_package`:
    frozen parts, or the base layers under LoRA adapters, are taken from the verified base). A run on a pretrained
    base (``model.arch`` a base id) is always stored over it (:func:`zoo.core.export.write_package`), and its entry
    names ``base`` and ``base_sha256``.

    Raises:
        hub.HubError: a malformed id, or an id whose method differs from the run's.
    """
    import datetime as dt

    import yaml

    from zoo.core.export import write_package

    if not hub.ID_RE.match(zoo_id):
        raise hub.HubError(f"zoo id {zoo_id!r} must look like <method>.<tag>")
    module, cfg = load_module(str(run_dir), which)
    if zoo_id.split(".")[0] != cfg["method"]:
        raise hub.HubError(f"zoo id {zoo_id!r} must start with the run's method {cfg['method']!r}")
    metrics_file = Path(run_dir) / "metrics.json"
    doc = yaml.safe_load(metrics_file.read_text()) if metrics_file.is_file() else {}
    metrics = doc.get("metrics", {})
    folder = hub.checkpoints_dir() / zoo_id
    if folder.is_symlink() or folder.exists():  # a linked package (a scratch checkpoints/): drop the link only
        folder.unlink() if folder.is_symlink() else shutil.rmtree(folder)
    files = write_package(module, cfg, folder, metrics, zoo_id)
    card = cfg.get("card") or {}
    recipe = Path(cfg.get("_recipe", ""))
    try:
        from zoo.core.data import repo_root

        recipe = recipe.resolve().relative_to(repo_root())
    except ValueError:
        pass
    hub.write_manifest_entry(
        zoo_id,
        {
            "method": cfg["method"],
            "path": zoo_id,
            "files": files,
            "recipe": str(recipe),
            "data": card.get("data", cfg.get("data")),
            "metrics": metrics,
            "metrics_source": doc.get("source", "end of training")
            if metrics
            else "none (run `zoo eval RUN_DIR` first)",
            "license": card.get("license", "unspecified"),
            "created": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            **({"base": over["base"], "base_sha256": over["base_sha256"]} if (over := delta.read_base(folder)) else {}),
        },
    )
    if base:
        from zoo.core.rebase import rebase_package

        rebase_package(zoo_id, base)
    return folder
