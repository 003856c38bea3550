"""The ``zoo`` command: list | info | config | train | eval | export | predict | release | results | runs.

``python train.py ARGS`` is ``zoo train ARGS``. Heavy imports (torch, lightning, method code) happen
inside the subcommands that need them, so ``zoo list`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from zoo.core.commands import cmd_eval, cmd_export, cmd_predict, cmd_release

USAGE = """usage: zoo train recipe=NAME [overlay=FILE ...] [key=value | +key=value | ~key ...]
       zoo config recipe=NAME [overrides ...]      print the resolved recipe
       zoo list                                    methods, zoo weights and pretrained bases
       zoo info NAME|ID|BASE                       a method's arguments, a zoo weight's manifest entry or a base
       zoo base fetch BASE [--force]               download, verify and convert a pretrained base once (its cache:
                                                   $ZOO_CACHE/bases, default ~/.cache/zoo/bases)
       zoo eval RUN_DIR|ID|BASE [overrides ...] [--out FILE] [--which best|last]
       zoo export RUN_DIR|ID [overrides ...] [--formats package,hf,onnx,torch_export] [--out DIR]
       zoo predict RUN_DIR|ID|BASE [overrides ...] INPUT ... [--out-dir DIR] [--json]   (--json: with metrics when
                                                   the input carries labels)
  overrides are train.py's: key=value, +key=value, ~key on the saved recipe (data.path=my.jsonl,
  model.generation.greedy=true, model.generation.max_new_tokens=32)
       zoo release RUN_DIR --id METHOD.TAG [--which best|last] [--base ID] [--force]   (--base: store only what differs)
       zoo results                                 regenerate docs/results.md and docs/benchmarks.md from results/
       zoo runs [NAME] [--out-dir runs]            status (finished/killed/running/failed), step, best metric, path"""


def _split_train_args(argv: list[str]) -> tuple[str, list[str], list[str]]:
    from zoo.core.recipe import RecipeError

    recipe, overlays, overrides = None, [], []
    for a in argv:
        if a.startswith("recipe="):
            recipe = a.split("=", 1)[1]
        elif a.startswith("overlay="):
            overlays.append(a.split("=", 1)[1])
        elif a.startswith("-"):
            raise RecipeError(f"unexpected option {a!r}; train takes recipe=NAME and key=value overrides\n{USAGE}")
        else:
            overrides.append(a)
    if not recipe:
        raise RecipeError(f"no recipe given; write recipe=NAME (see recipes/)\n{USAGE}")
    return recipe, overlays, overrides


def compose_and_validate(argv: list[str], check_files: bool = True) -> dict:
    """Resolve ``recipe=``, ``overlay=`` and overrides into a validated plain-dict recipe."""
    from zoo.core.recipe import load_recipe, validate

    recipe, overlays, overrides = _split_train_args(argv)
    cfg = load_recipe(recipe, overrides, overlays)
    validate(cfg, check_files=check_files)
    from zoo.core.userdata import record_user_data

    record_user_data(cfg)  # a user's data.path is named (file, sha256, rows) in config, card and manifest
    return cfg


def cmd_train(argv: list[str]) -> Path:
    import logging

    cfg = compose_and_validate(argv)  # before torch and Lightning are imported: a bad recipe fails in a blink
    print(
        f"zoo train: {cfg['_recipe']} checked; importing torch, Lightning and {cfg['method']} ...",
        file=sys.stderr,
        flush=True,
    )
    from zoo.core.training import train

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    run_dir = train(cfg)
    from zoo.core.run import is_child_rank

    if not is_child_rank():  # one line per run, not one per DDP process
        print(f"run: {run_dir}")
    return run_dir


def _not_ready(method: str, seen: dict | None = None) -> str:
    """``  (not ready: pip install -e ".[privacy]"; missing opacus)`` for a method whose extra is not installed, else
    ''. ``seen`` memoises the answer per extra within one command (many methods share an extra)."""
    from zoo.core.registry import install_hint, method_extra, missing_requirements

    extra = method_extra(method)
    if not extra:
        return ""
    seen = {} if seen is None else seen
    if extra not in seen:
        seen[extra] = missing_requirements(extra)
    missing = seen[extra]
    return f"  (not ready: {install_hint(method)}; missing {', '.join(missing)})" if missing else ""


def cmd_list(_args) -> None:
    import zoo
    from zoo.core import hub

    seen: dict[str, list[str]] = {}
    manifest = hub.read_manifest()
    print("methods:")
    for m in zoo.list_methods():
        print(f"  {m}{_not_ready(m, seen)}")
    print("zoo weights:")
    for i in sorted(manifest):
        print(f"  {i}{_not_ready(manifest[i].get('method') or i.split('.')[0], seen)}")
    from zoo.core.bases import BASES, describe

    print("pretrained bases (model.arch=NAME; zoo predict|eval NAME):")
    for name in BASES:
        print(f"  {describe(name)}")


def cmd_base(args) -> None:
    """``zoo base fetch NAME``: the converted directory's path on stdout (the work is logged on stderr)."""
    import logging

    from zoo.models.bases import fetch_base

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    print(fetch_base(args.name, force=args.force))


def cmd_info(args) -> None:
    import inspect

    from zoo.core import hub
    from zoo.core.bases import BASES, describe
    from zoo.core.registry import get_method, install_hint, method_missing

    if args.name in BASES:
        print(describe(args.name))
        return
    if "." in args.name:
        entry = hub.read_manifest().get(args.name)
        if entry is None:
            raise hub.HubError(f"unknown zoo id {args.name!r}; see `zoo list`")
        import yaml

        print(yaml.safe_dump({args.name: entry}, sort_keys=False))
        return
    missing = method_missing(args.name)
    if _info_from_table(
        args.name, missing and f"{args.name} needs {install_hint(args.name)} (missing {', '.join(missing)})"
    ):
        return
    e = get_method(args.name)
    print(f"{e.name}: {e.module_cls.__module__}.{e.module_cls.__name__}")
    print((inspect.getdoc(e.module_cls) or "").split("\n\n")[0])
    for title, cls in (("model", e.module_cls), ("data", e.datamodule_cls)):
        if cls is not None:
            try:
                sig = inspect.signature(cls.__init__, eval_str=True)
            except NameError:  # an annotation that only resolves under TYPE_CHECKING
                sig = inspect.signature(cls.__init__)
            params = ", ".join(str(p) for n, p in sig.parameters.items() if n != "self")
            print(f"{title}: {params}")
    print(f"export formats: {', '.join(e.module_cls.export_formats)}; head keys: {e.module_cls.head_keys}")


def _info_from_table(name: str, note: str | None) -> bool:
    """Print method ``name``'s arguments from its stored recipe table (``zoo/core/schemas/``, without importing the
    method or torch: its extra may be missing), one per line with the values it allows and its one-line meaning (a
    dict block's keys indented below it), then its export formats; ``note`` (a missing extra) under the title. False
    (nothing printed) when the method has no table."""
    from zoo.core.recipe import recipes_dir
    from zoo.core.schema import allowed, method_schema

    table = method_schema(name)
    if table is None:
        return False
    print(
        f"{name}: {table['module']['class']} (arguments, allowed values and meanings from zoo/core/schemas/{name}.json)"
    )
    if note:
        print(note)

    def block(specs: dict, docs: dict, indent: str) -> None:
        for k, spec in specs.items():
            print(f"{indent}{k}: {allowed(spec)}" + (f"  -- {docs[k]}" if docs.get(k) else ""))
            block(spec.get("keys") or {}, {}, indent + "  ")

    for title, part in (("model", table["module"]), ("data", table["datamodule"])):
        if part is not None:
            print(f"{title}:")
            nested = part.get("nested") or {}
            specs = {
                k: dict(part["args"][k], **({"keys": nested[k]} if k in nested else {}))
                for k in part.get("order") or part["args"]
            }
            block(specs, part.get("docs") or {}, "  ")
    print(f"export formats: {', '.join(table['export_formats'])}")
    if (recipes_dir() / f"{name}.yaml").is_file():
        print(f"the recipe's values: zoo config recipe={name}.yaml")
    return True


def split_overrides(tokens: list[str]) -> tuple[list[str], list[str]]:
    """``(overrides, rest)``: a token is an override when it starts with a recipe key (``data.path=...``,
    ``+model.x=...``, ``~data.val_path``, ``seed=1``); anything else (``age=60``, a prompt) is left for the command."""
    import re

    from zoo.core.recipe import TOP_KEYS

    pat = re.compile(rf"^[+~]?({'|'.join(TOP_KEYS)})([.=]|$)")
    overrides = [t for t in tokens if pat.match(t) and ("=" in t or t.startswith("~"))]
    return overrides, [t for t in tokens if t not in overrides]


def cmd_runs(args) -> None:
    from zoo.core.runs import list_runs, render

    rows = list_runs(Path(args.out_dir), args.name)
    if not rows:
        from zoo.core.run import RunError

        raise RunError(
            f"no runs under {Path(args.out_dir) / (args.name or '')} (train.py writes "
            f"<out_dir>/<name>/version_N; pass --out-dir for another out_dir)"
        )
    print(render(rows))


def cmd_results(_args) -> None:
    from zoo.core.results import write_benchmarks, write_results

    print(f"wrote {write_results()} and {write_benchmarks()}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``zoo`` and ``train.py``; returns the exit code (2 for a user error, with its message)."""
    from zoo.core.errors import USER_ERRORS

    argv = list(sys.argv[1:] if argv is None else argv)
    if not sys.stderr.isatty():  # a log file: no tqdm bars from Hugging Face (read before transformers is imported)
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd in ("train", "config") and any(a in ("-h", "--help") for a in rest):  # python train.py --help
        print(USAGE)
        return 0
    try:
        if cmd == "train":
            cmd_train(rest)
            return 0
        if cmd == "config":
            import yaml

            cfg = compose_and_validate(rest, check_files=False)
            print(f"# resolved from {cfg.pop('_recipe')}")  # the path is kept internally for cards
            print(yaml.safe_dump(cfg, sort_keys=False))
            return 0
        p = argparse.ArgumentParser(prog=f"zoo {cmd}", usage=USAGE.removeprefix("usage: "))
        if cmd in ("eval", "export", "predict"):
            p.add_argument("ref")
            p.add_argument("--which", default="best", choices=["best", "last"])
        if cmd == "info":
            p.add_argument("name")
        elif cmd == "base":
            p.add_argument("action", choices=["fetch"])
            p.add_argument("name")
            p.add_argument("--force", action="store_true", help="convert again even when the cache has it")
        elif cmd == "eval":
            p.add_argument("--out")
        elif cmd == "export":
            p.add_argument("--formats")
            p.add_argument("--out")
        elif cmd == "predict":
            p.add_argument("inputs", nargs="*")
            p.add_argument("--out-dir")
        elif cmd == "release":
            p.add_argument("run_dir")
            p.add_argument("--id", required=True)
            p.add_argument("--which", default="best", choices=["best", "last"])
            p.add_argument("--base")
            p.add_argument("--force", action="store_true", help="replace a package already in the manifest")
        elif cmd == "runs":
            p.add_argument("name", nargs="?")
            p.add_argument("--out-dir", default="runs")
        elif cmd not in ("list", "results"):
            print(f"zoo: unknown command {cmd!r}\n{USAGE}", file=sys.stderr)
            return 2
        if cmd in ("eval", "export", "predict"):
            overrides, rest = split_overrides(rest)
        if cmd == "predict":
            p.add_argument("--json", action="store_true")
            # intermixed: `zoo predict ID --json INPUT` (argparse would otherwise bind INPUT before the flag is seen);
            # method-specific options (``--slip 0.3``) pass through to predict_cli
            args, unknown = p.parse_known_intermixed_args(rest)
            args.inputs = list(args.inputs) + unknown
        else:
            args = p.parse_args(rest)
        if cmd in ("eval", "export", "predict"):
            args.overrides = overrides
        if cmd in ("eval", "predict"):  # at once: importing torch and the method and loading weights take a while
            print(f"zoo {cmd}: loading {args.ref} (torch, the method, its weights) ...", file=sys.stderr, flush=True)
        {
            "list": cmd_list,
            "info": cmd_info,
            "base": cmd_base,
            "eval": cmd_eval,
            "export": cmd_export,
            "predict": cmd_predict,
            "release": cmd_release,
            "results": cmd_results,
            "runs": cmd_runs,
        }[cmd](args)
        return 0
    except USER_ERRORS as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def console() -> None:
    """``zoo`` console script. A reader that closes the pipe early (``zoo config ... | head``) ends it quietly."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit flush must not raise again
        code = 141  # 128 + SIGPIPE, what a shell tool reports
    sys.exit(code)


if __name__ == "__main__":
    console()
