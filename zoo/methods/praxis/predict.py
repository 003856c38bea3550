"""``zoo predict`` for a fitted PRAXIS set: each CSV row through every stored tree, as text or as JSON, with the
accuracy of the best tree and of the vote when the rows carry the training label column."""

from __future__ import annotations

from pathlib import Path

from zoo.core.data import DataError
from zoo.methods.praxis.binarize import transform
from zoo.methods.praxis.datamodule import read_columns


def set_size_lines(meta: dict) -> list[str]:
    """The two sizes of a fitted set, as ``zoo predict`` prints them: what was enumerated (every tree within the
    proxy bound ``round((1 + eps) Proxy)``) and the trees within ``(1 + eps)`` of the best objective found."""
    if "n_within_best" not in meta:
        return ["# (a checkpoint from before the within-best count: refit to get it)"]
    eps, best, gamma = meta["eps"], meta["min_objective"], meta["gamma"]
    return [
        f"# trees within (1+eps) x proxy (bound {meta['bound']}, the set enumerated): {meta['n_trees']}",
        (
            f"# trees within (1+eps) x best objective found ({best}; eps {eps:g}; gamma {gamma} per leaf + "
            f"mistakes): {meta['n_within_best']}"
        ),
    ]


def predict_files(module, inputs: list[str]) -> list[dict]:
    """Per input CSV: ``{"file", "rows": [{"row", "best_tree", "agree", "votes": {class: share}[, "label"]}]}``:
    the best tree's class, the share of stored trees agreeing with it, each class's vote share and, when the file
    has the training label column (``meta["label"]``), the row's label.

    Raises:
        DataError: no input, an unfitted model, a missing file or feature column, missing or malformed values, a label
            that is not one of the model's classes (``file:line``).
    """
    if not inputs:
        raise DataError("zoo predict praxis: give one or more CSV files with the training feature columns")
    meta = module.meta
    if not meta:
        raise DataError("this praxis model holds no trees: it was never fitted")
    classes, label = meta["classes"], meta.get("label")
    spec = meta["spec"] or [{"kind": "keep", "column": c} for c in meta["feature_names"]]
    out = []
    for path in inputs:
        cols, _ = read_columns(path)
        s = module.spread(transform(spec, cols, path))
        rows = [
            {"row": i, "best_tree": classes[b], "agree": float(a), "votes": dict(zip(classes, map(float, v)))}
            for i, (b, a, v) in enumerate(zip(s["best"], s["agree"], s["votes"]))
        ]
        for i, value in enumerate((cols.get(label) or []) if label else []):
            if value.strip() not in classes:
                raise DataError(
                    f"{path}:{i + 2}: column {label!r}: {value.strip()!r} is not a class of this model "
                    f"({', '.join(classes)})"
                )
            rows[i]["label"] = value.strip()
        out.append({"file": path, "rows": rows})
    return out


def accuracy(files: list[dict]) -> dict[str, float]:
    """``{"n", "best_tree_accuracy", "vote_accuracy"}`` over the rows that carry a label; empty when none does (the
    vote is the class with the largest share, the first in class order on a tie, as ``evaluate`` takes it)."""
    rows = [r for f in files for r in f["rows"] if "label" in r]
    if not rows:
        return {}
    return {
        "n": len(rows),
        "best_tree_accuracy": sum(r["best_tree"] == r["label"] for r in rows) / len(rows),
        "vote_accuracy": sum(max(r["votes"], key=r["votes"].get) == r["label"] for r in rows) / len(rows),
    }


def report(module, files: list[dict], out_dir: str | None) -> str:
    """The text ``zoo predict`` prints: set sizes, a table per file (and its accuracy when labelled), both Rashomon
    importances. With ``out_dir`` it also writes ``importance.json``, ``importance.png`` and ``spread.tsv`` (this
    text) there; without, it writes nothing."""
    meta = module.meta
    lines = [f"# {module.tree_feature.shape[0]} stored trees of {meta['n_trees']} in the Rashomon set"]
    lines += set_size_lines(meta)
    for f in files:
        lines += [f"## {f['file']}", "row\tbest_tree\tagree\t" + "\t".join(f"P({c})" for c in meta["classes"])]
        lines += [
            f"{r['row']}\t{r['best_tree']}\t{r['agree']:.3f}\t" + "\t".join(f"{v:.3f}" for v in r["votes"].values())
            for r in f["rows"]
        ]
        if acc := accuracy([f]):
            lines.append(
                f"# accuracy against column {meta['label']!r} ({acc['n']} rows): best tree "
                f"{acc['best_tree_accuracy']:.3f}, vote {acc['vote_accuracy']:.3f}"
            )
    lines += module.importance_lines()
    if out_dir:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        if "usage" in meta:
            module.write_importance(out / "importance.json", out / "importance.png")
            lines.append(f"# importance plot: {out / 'importance.png'}")
        (out / "spread.tsv").write_text("\n".join(lines) + "\n")
    return "\n".join(lines)


def as_json(module, files: list[dict]) -> dict:
    """``zoo predict --json``: ``{"prediction": {set sizes, classes, label column, files (as
    :func:`predict_files`), importance}, "metrics": accuracy}`` (``metrics`` only when rows carry labels)."""
    meta = module.meta
    doc = {
        "n_trees": int(meta["n_trees"]),
        "n_within_best": int(meta["n_within_best"]) if "n_within_best" in meta else None,
        "stored_trees": int(module.tree_feature.shape[0]),
        "classes": meta["classes"],
        "label": meta.get("label"),
        "files": files,
        "importance": module.importance_doc() if "usage" in meta else None,
    }
    acc = accuracy(files)
    return {"prediction": doc, **({"metrics": acc} if acc else {})}
