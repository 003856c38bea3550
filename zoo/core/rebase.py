"""Re-release a zoo package as a delta over its base (``zoo release --base``; the format is :mod:`zoo.core.delta`)."""

from __future__ import annotations

import yaml

from zoo.core import hub
from zoo.core.delta import BASE_FILE, split_over_base


def rebase_package(zoo_id: str, base_id: str) -> dict:
    """Re-release the manifest entry ``zoo_id`` as a delta over ``base_id``, in place and without retraining: its
    tensors equal to the base's are dropped from ``model.safetensors`` and named in ``base.yaml``.

    Returns:
        ``{"before": bytes, "after": bytes, "from_base": n keys, "stored": n keys}``.

    Raises:
        HubError: either id is unknown or fails verification, or the joined package does not reproduce the original
            state dict exactly.
    """
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    manifest = hub.read_manifest()
    if base_id not in manifest:
        raise hub.HubError(f"unknown base {base_id!r}")
    _, full = hub.load_package(zoo_id)
    _, base = hub.load_package(base_id)
    keys, stored = split_over_base(full, base)
    entry = manifest[zoo_id]
    folder = hub.checkpoints_dir() / entry.get("path", zoo_id)
    weights = folder / "model.safetensors"
    before = weights.stat().st_size + ((folder / BASE_FILE).stat().st_size if (folder / BASE_FILE).is_file() else 0)
    with safe_open(str(weights), "pt") as f:
        meta = dict(f.metadata() or {})
    meta["format"] = "delta"
    meta["base"] = base_id
    doc = {"base": base_id, "base_sha256": manifest[base_id]["files"]["model.safetensors"]["sha256"], "keys": keys}
    joined = {**{k: base[b] for k, b in keys.items()}, **stored}
    if set(joined) != set(full) or not all(torch.equal(joined[k], v) for k, v in full.items()):
        raise hub.HubError(f"{zoo_id}: the delta over {base_id} does not reproduce the package; left unchanged")
    save_file({k: v.contiguous() for k, v in stored.items()}, str(weights), metadata=meta)
    (folder / BASE_FILE).write_text(yaml.safe_dump(doc, sort_keys=False))
    entry = dict(entry, base=base_id)
    entry["files"] = {
        **entry["files"],
        "model.safetensors": hub.file_entry(weights),
        BASE_FILE: hub.file_entry(folder / BASE_FILE),
    }
    hub.write_manifest_entry(zoo_id, entry)
    after = weights.stat().st_size + (folder / BASE_FILE).stat().st_size
    return {"before": before, "after": after, "from_base": len(keys), "stored": len(stored)}
