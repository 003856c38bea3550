"""The zoo commands that load a trained model or package: ``zoo eval``, ``zoo export``, ``zoo predict`` and
``zoo release`` (argument parsing and dispatch live in :mod:`zoo.cli`). Each takes the parsed ``argparse``
namespace; user errors are raised as the zoo's own exceptions, which the CLI prints as one line with exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def cmd_eval(args) -> dict:
    from zoo.core.evaluation import evaluate
    from zoo.core.loading import load_module

    module, cfg = load_module(args.ref, args.which, args.overrides)
    print(
        f"zoo eval: measuring {args.ref} {_eval_source(args.ref, args.which).removeprefix('zoo eval ')}; the "
        "metrics follow when it is done",
        file=sys.stderr,
        flush=True,
    )
    metrics = evaluate(module, cfg)
    out = (
        Path(args.out)
        if args.out
        else (
            Path(args.ref) / "metrics.json"
            if Path(args.ref).is_dir() and (Path(args.ref) / "checkpoints").is_dir()
            else None
        )
    )
    doc = {"ref": args.ref, "method": cfg["method"], "source": _eval_source(args.ref, args.which), "metrics": metrics}
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(_merged(doc, out) if not args.out else doc, indent=2))
    print(json.dumps(doc, indent=2))
    return doc


def _merged(doc: dict, path: Path) -> dict:
    """A run's metrics.json updated by ``zoo eval``: the measured keys replace their training values, the others
    (``train/*``, costs) stay, and ``source`` says which came from where."""
    old = json.loads(path.read_text()) if path.is_file() else {}
    if not old.get("metrics"):
        return doc
    kept = sorted(set(old["metrics"]) - set(doc["metrics"]))
    trained = old.get("training_source") or old.get("source", "end of training")
    source = doc["source"] + (f"; {', '.join(kept)}: {trained}" if kept else "")
    return {**old, **doc, "source": source, "training_source": trained, "metrics": {**old["metrics"], **doc["metrics"]}}


def _eval_source(ref: str, which: str) -> str:
    """What ``zoo eval`` measured: a package, or which checkpoint of a run (saying when best fell back to last)."""
    from zoo.core.bases import BASES
    from zoo.core.run import find_checkpoint

    if ref in BASES and not Path(ref).exists():
        return f"zoo eval (pretrained base, as released: recipes/{BASES[ref].recipe} untrained)"
    if not (Path(ref).is_dir() and (Path(ref) / "checkpoints").is_dir()):
        return "zoo eval (package)"
    ckpt = find_checkpoint(Path(ref), which)
    if which == "best" and ckpt.name == "last.ckpt":
        return "zoo eval (last.ckpt: the run has no best checkpoint, it never validated with a monitor)"
    return f"zoo eval ({'best' if ckpt.name != 'last.ckpt' else 'last'} checkpoint {ckpt.name})"


def cmd_export(args) -> None:
    from zoo.core.export import ExportError, export_module
    from zoo.core.registry import format_not_ready

    supported = _export_formats(args.ref)
    for fmt in (args.formats or "").split(","):  # an unsupported format or a missing extra fails before torch
        if fmt and supported is not None and fmt not in supported:
            raise ExportError(f"{args.ref}: its method cannot export {fmt!r}; it supports {', '.join(supported)}")
        if why := format_not_ready(fmt):
            raise ExportError(why)
    print(f"zoo export: loading {args.ref} (torch, the method, its weights) ...", file=sys.stderr, flush=True)
    from zoo.core.loading import load_module

    module, cfg = load_module(args.ref, args.which, args.overrides)
    formats = args.formats.split(",") if args.formats else (cfg.get("export") or {}).get("formats") or ["package"]
    out = Path(args.out) if args.out else (Path(args.ref) / "export" if Path(args.ref).is_dir() else Path("export"))
    for fmt, path in export_module(module, cfg, formats, out).items():
        print(f"{fmt}: {path}")


def _export_formats(ref: str) -> tuple[str, ...] | None:
    """The export formats of the method of ``ref`` (a run directory, a package folder or a zoo id) read without
    loading it: its config's (or manifest entry's) ``method``, then the method's stored table (``zoo/core/schemas/``)
    or, for a plug-in without one, its class; None when ``ref`` names no method (loading it then says why)."""
    import yaml

    from zoo.core import hub
    from zoo.core.schema import method_schema

    config = Path(ref) / "config.yaml"
    method = (
        (yaml.safe_load(config.read_text()) or {}).get("method")
        if config.is_file()
        else (hub.read_manifest().get(ref) or {}).get("method")
    )
    if not method:
        return None
    if (table := method_schema(method)) is not None:
        return tuple(table["export_formats"])
    from zoo.core.registry import get_method

    return tuple(get_method(method).module_cls.export_formats)


def cmd_predict(args) -> None:
    from zoo.core.data import DataError
    from zoo.core.loading import load_module

    module, cfg = load_module(args.ref, args.which, args.overrides)
    args.inputs = [_shipped_or_given(x) for x in args.inputs]
    try:  # --json: the method's structured prediction, with metrics when the input carried its labels
        out = (module.predict_json if args.json else module.predict_cli)(args.inputs, args.out_dir)
    except (ValueError, TypeError) as e:  # wrong or missing inputs: the method's message, without a traceback
        raise DataError(f"zoo predict {args.ref}: {e}") from e
    if args.json:
        print(
            json.dumps(
                {"ref": args.ref, "method": cfg["method"], "overrides": args.overrides, "inputs": args.inputs, **out},
                indent=2,
            )
        )
    else:
        print(out)


def _shipped_or_given(token: str) -> str:
    """An input naming a shipped file (``data/...``) that is not under the current directory: its path in the
    project, so cards' examples run from anywhere; anything else unchanged (user files stay relative to the cwd)."""
    from zoo.core.data import repo_root

    if token.startswith("data/") and not Path(token).exists() and (repo_root() / token).exists():
        return str(repo_root() / token)
    return token


def cmd_release(args) -> None:
    from zoo.core import hub
    from zoo.core.release import release

    if args.id in hub.read_manifest() and not args.force:
        raise hub.HubError(
            f"{args.id} is already released (checkpoints/manifest.yaml): pass --force to replace it, "
            "or release under a new tag"
        )
    print(f"released {args.id} -> {release(Path(args.run_dir), args.id, args.which, args.base)}")
