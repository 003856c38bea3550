"""Export a trained module: ``package`` (safetensors + config + card), ``hf``, ``onnx`` and ``torch_export``.

Each method lists the formats it supports in ``export_formats``; asking for another fails with the list.
No TorchScript: Lightning deprecated ``to_torchscript`` and PyTorch moved to ``torch.export``.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import yaml

from zoo.core import hub
from zoo.core.bases import BASES, base_of
from zoo.core.errors import UserError
from zoo.core.registry import format_not_ready
from zoo.core.reproduce import reproduce_command


class ExportError(UserError, ValueError):
    """An export format the method does not support or whose extra is not installed, or an export whose parity check
    failed."""


class Bound:
    """An ``nn.Module`` whose ``forward`` is one method of another module (its parameters included), for graph export:
    ``Bound(cost_model, "score")(input_ids, attention_mask)`` is ``cost_model.score(input_ids, attention_mask)``;
    ``names`` turn positional inputs into keyword arguments (``Bound(net, None, ("u", "v", "t"))`` calls
    ``net(u=..., v=..., t=...)``), and ``outputs`` picks entries of a dict result, in order."""

    def __new__(cls, owner, method: str | None = None, names: tuple[str, ...] = (), outputs: tuple[str, ...] = ()):
        import torch

        class _Bound(torch.nn.Module):
            varargs = True  # forward(*args): torch.export takes dynamic shapes as {"args": (...)}

            def __init__(self):
                super().__init__()
                self.owner = owner

            def forward(self, *args):
                fn = getattr(self.owner, method) if method else self.owner
                out = fn(**dict(zip(names, args))) if names else fn(*args)
                return tuple(out[k] for k in outputs) if outputs else out

        return _Bound().eval()


def _tensor_outputs(out) -> list:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _tensor_outputs(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in _tensor_outputs(v)]
    if hasattr(out, "to_tuple"):
        return _tensor_outputs(out.to_tuple())
    return []


def _plain(value):
    """hparams as YAML-safe plain containers (tuples become lists)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def model_card(cfg: dict, metrics: dict | None, zoo_id: str | None, defaults: dict | None = None) -> str:
    """A model card: YAML front matter (license, method, data, metrics), how to load the weights and the command
    that trains them (``defaults``: the module's constructor defaults as ``{"model.<arg>": value}``, which the
    command leaves out)."""
    card = cfg.get("card") or {}
    front = {
        "zoo_id": zoo_id,
        "method": cfg["method"],
        "license": card.get("license", "see data licences"),
        "data": card.get("data", cfg.get("data")),
        "metrics": metrics or {},
        "recipe": Path(cfg.get("_recipe", "")).name or None,
    }
    lines = [
        "---",
        yaml.safe_dump(front, sort_keys=False).rstrip(),
        "---",
        "",
        f"# {zoo_id or cfg['method']}",
        "",
        card.get("description", f"Weights of the `{cfg['method']}` method."),
        "",
        "## Use",
        "",
        "```python",
        "import zoo",
        f"model = zoo.load({(zoo_id or 'PATH')!r})  # verifies sha256",
        "```",
        "",
        f"Reproduce: `{reproduce_command(cfg, defaults)}` (the resolved recipe is config.yaml)."
        if cfg.get("_recipe")
        else "Reproduce: no recipe file was recorded; config.yaml holds the resolved recipe.",
        "",
        f"Method card: zoo/methods/{cfg['method'].replace('-', '_')}/README.md",
        "",
    ]
    arch = base_of(cfg)
    if arch is not None:
        b = BASES[arch]
        lines += [
            "## Base",
            "",
            f"Trained on the pretrained base `{arch}` ({b.hub_name}, licence {b.licence}): its "
            f"{b.quantisation} GGUF quantisation (sha256 {b.gguf_sha256}) de-quantised to float32, close to but "
            "not equal to the original bf16 weights. This package stores only what differs from the base "
            f"(`base.yaml` names the rest); `zoo base fetch {arch}` provides the base.",
            "",
        ]
    return "\n".join(lines)


def write_package(module, cfg: dict, out_dir: Path, metrics: dict | None = None, zoo_id: str | None = None) -> dict:
    """Write ``model.safetensors``, ``config.yaml``, ``README.md`` and the method's extra files. A module on a
    pretrained base (:func:`zoo.core.bases.base_of`: ``model.arch`` or ``model.base`` a base id) stores only what differs from the base, plus ``base.yaml``
    (:func:`zoo.core.delta.split_for_package`): LoRA adapters, heads, never the base's weights.

    Returns:
        ``{file name: {sha256, size}}`` of everything written.
    """
    from safetensors.torch import save_file

    from zoo.core import delta

    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in module.state_dict().items()}
    base_doc, state = delta.split_for_package(state, cfg)
    save_file(
        state,
        str(out_dir / "model.safetensors"),
        metadata={
            "zoo_method": cfg["method"],
            "zoo_id": zoo_id or "",
            "format": "delta" if base_doc else "full",
            **({"base": base_doc["base"]} if base_doc else {}),
        },
    )
    if base_doc:
        (out_dir / delta.BASE_FILE).write_text(yaml.safe_dump(base_doc, sort_keys=False))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(out_dir / "model.safetensors", 0o666 & ~umask)  # safetensors writes 0600; readable like the others
    from zoo.core.registry import constructor_defaults, constructor_kwargs

    clean = {k: v for k, v in cfg.items() if k not in ("resume", "init_from")}
    if module.hparams:
        clean["model"] = _plain(constructor_kwargs(type(module), dict(module.hparams)))
    (out_dir / "config.yaml").write_text(yaml.safe_dump(clean, sort_keys=False))
    defaults = {f"model.{k}": v for k, v in constructor_defaults(type(module)).items()}
    (out_dir / "README.md").write_text(model_card(cfg, metrics, zoo_id, defaults))
    for name, src in module.package_extras().items():
        dst = out_dir / name
        if Path(src).is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    return {str(p.relative_to(out_dir)): hub.file_entry(p) for p in sorted(out_dir.rglob("*")) if p.is_file()}


def _check_close(ref: list, got: list, atol: float, what: str) -> float:
    import torch

    if len(ref) != len(got):
        raise ExportError(f"{what}: {len(got)} outputs, eager model gives {len(ref)}")
    worst = 0.0
    for a, b in zip(ref, got):
        b = torch.as_tensor(b)
        worst = max(worst, (a.float() - b.float()).abs().max().item() if a.numel() else 0.0)
    if worst > atol:
        raise ExportError(f"{what}: outputs differ from the eager model by {worst:.3g} > atol {atol}")
    return worst


def export_module(module, cfg: dict, formats: list[str], out_dir: Path) -> dict[str, str]:
    """Export ``module`` in each of ``formats`` under ``out_dir`` and check each round trip.

    Returns:
        ``{format: path written}``.

    Raises:
        ExportError: a format the method does not support or whose extra is not installed (before anything is
            written), or a parity check that fails.
    """

    out_dir = Path(out_dir)
    supported = tuple(module.export_formats)
    for fmt in formats:
        if fmt not in supported:
            raise ExportError(f"{cfg['method']} cannot export {fmt!r}; it supports {', '.join(supported)}")
        if missing := format_not_ready(fmt):
            raise ExportError(missing)
    module = module.eval().cpu()
    atol = float((cfg.get("export") or {}).get("onnx_atol", 1e-4))
    written = {}
    for fmt in formats:
        if fmt == "package":
            metrics_file = out_dir.parent / "metrics.json"
            metrics = yaml.safe_load(metrics_file.read_text()).get("metrics") if metrics_file.is_file() else None
            write_package(module, cfg, out_dir / "package", metrics)
            written[fmt] = str(out_dir / "package")
        elif fmt == "hf":
            module.export_hf(str(out_dir / "hf"))
            written[fmt] = str(out_dir / "hf")
        elif fmt in ("onnx", "torch_export"):
            for stem, (graph, args, *dynamic) in module.export_graphs().items():
                path = _export_graph(
                    graph,
                    tuple(args),
                    dynamic[0] if dynamic else None,
                    fmt,
                    out_dir / f"{stem}.{'onnx' if fmt == 'onnx' else 'pt2'}",
                    atol,
                )
                written.setdefault(fmt, str(path))
    return written


def _export_graph(graph, args: tuple, dynamic, fmt: str, path: Path, atol: float) -> Path:
    """Write one graph as ONNX (dynamo exporter) or ``torch.export`` ``.pt2`` and check it against eager torch."""
    import torch

    if dynamic is not None and not isinstance(dynamic, dict) and getattr(graph, "varargs", False):
        dynamic = {"args": tuple(dynamic)}
    with torch.no_grad():
        ref = _tensor_outputs(graph(*args))
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "torch_export":
        torch.export.save(torch.export.export(graph, args, dynamic_shapes=dynamic), str(path))
        with torch.no_grad():
            got = _tensor_outputs(torch.export.load(str(path)).module()(*args))
        _check_close(ref, got, atol, f"torch_export {path.name}")
    else:
        import onnxruntime as ort

        with warnings.catch_warnings():  # the exporter's notes on merged axis names; parity is checked below
            warnings.filterwarnings("ignore", message=".*The axis name: .* will not be used")
            torch.onnx.export(
                graph, args, str(path), dynamo=True, external_data=False, dynamic_shapes=dynamic, verbose=False
            )
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)}
        _check_close(ref, sess.run(None, feeds), atol, f"onnx (onnxruntime) {path.name}")
    return path
