"""``PraxisModule``: the LightningModule shell around PRAXIS (Heile et al., ICML 2026).

There is no gradient training: ``fit`` runs one training step that builds the approximate Rashomon set of
the whole training split (``rashomon.fit_rashomon``), logs its size, best objective, time and peak memory, and keeps
the best ``max_saved_trees`` trees (best-first) in buffers so that a checkpoint or release package can predict.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, ClassVar

import numpy as np
import torch

from zoo.core.constraints import NonNegative, NonNegativeInt, PositiveInt, Range
from zoo.core.measure import measure
from zoo.core.module import ZooModule
from zoo.core.registry import register_method
from zoo.methods.praxis.datamodule import BinaryCSVDataModule
from zoo.methods.praxis.encoding import decode_tree, encode_trees, predict_encoded
from zoo.methods.praxis.enumerate import count_trees, feature_usage, histogram, iter_trees
from zoo.methods.praxis.plots import plot_importance, plot_size_vs_eps, plot_tree, size_vs_eps, tree_text
from zoo.methods.praxis.predict import as_json, predict_files, report
from zoo.methods.praxis.rashomon import fit_rashomon
from zoo.methods.praxis.rid import rashomon_importance, variable_groups

_BUFFERS = ("tree_feature", "tree_value", "tree_objective", "hist_objective", "hist_count", "meta_json")


@register_method("praxis", datamodule=BinaryCSVDataModule)
class PraxisModule(ZooModule):
    """Approximate Rashomon set of sparse decision trees.

    Args:
        lam: per-leaf penalty ``lambda`` (``gamma = round(lambda * n)`` misclassifications per leaf).
        depth: depth budget, PRAXIS convention (root-only tree = 0; TreeFARMS' ``depth_budget`` = depth + 1).
        eps: Rashomon multiplier; budget ``round((1 + eps)(1 + slack) Proxy(D, depth))``.
        lookahead_k: proxy lookahead (``-1`` leaf, ``0`` greedy, ``1`` LicketySPLIT, ``>= depth - 1`` exact).
        slack: extra multiplicative slack on the reference objective.
        root_budget: absolute budget in integer units instead of the proxy-based one.
        majority_leaf_only: keep only majority-class leaves.
        max_saved_trees: how many of the best trees (best-first) are stored for prediction.
        eps_grid: epsilons of the size-vs-epsilon plot (re-thresholded relative to the best tree).
        rid_bootstraps: bootstrap resamples of the Rashomon importance distribution computed at fit (0: none).
        rid_trees: trees sampled per bootstrap set when it holds more (``rid.rashomon_importance``).
        rid_seed: seed of the bootstrap and the sampling.
    """

    export_formats = ("package",)
    fit_sized_buffers = _BUFFERS  # the stored set's size is only known after fit

    def __init__(
        self,
        lam: NonNegative = 0.01,
        depth: NonNegativeInt = 5,
        eps: NonNegative = 0.03,
        lookahead_k: Annotated[int, Range(-1)] = 1,
        slack: NonNegative = 0.0,
        root_budget: NonNegativeInt | None = None,
        majority_leaf_only: bool = False,
        max_saved_trees: PositiveInt = 10000,
        eps_grid: list[NonNegative] | None = None,
        rid_bootstraps: NonNegativeInt = 10,
        rid_trees: PositiveInt = 200,
        rid_seed: NonNegativeInt = 0,
    ):
        super().__init__()
        for key, value, low in (
            ("lam", lam, 0.0),
            ("depth", depth, 0),
            ("eps", eps, 0.0),
            ("lookahead_k", lookahead_k, -1),
            ("slack", slack, 0.0),
            ("max_saved_trees", max_saved_trees, 1),
            ("rid_bootstraps", rid_bootstraps, 0),
            ("rid_trees", rid_trees, 1),
        ):
            if value < low:
                raise ValueError(f"model.{key}: must be >= {low}, got {value}")
        self.save_hyperparameters()
        self.automatic_optimization = False  # no gradients: fit is one enumeration; zoo writes its checkpoint
        size = 2 ** (depth + 1) - 1
        self.register_buffer("tree_feature", torch.zeros(0, size, dtype=torch.int16))
        self.register_buffer("tree_value", torch.zeros(0, size, dtype=torch.int16))
        self.register_buffer("tree_objective", torch.zeros(0, dtype=torch.int64))
        self.register_buffer("hist_objective", torch.zeros(0, dtype=torch.int64))
        self.register_buffer("hist_count", torch.zeros(0, dtype=torch.float64))
        self.register_buffer("meta_json", torch.zeros(0, dtype=torch.uint8))
        self.rashomon = None
        self._artifacts: dict[str, str] = {}

    # ---- state ------------------------------------------------------------------------------------------------
    @property
    def meta(self) -> dict:
        """Feature names, binarisation spec, classes, exact tree count and the run's settings (from the buffer)."""
        return json.loads(bytes(self.meta_json.tolist()).decode()) if self.meta_json.numel() else {}

    def _set_meta(self, meta: dict) -> None:
        self.meta_json = torch.tensor(list(json.dumps(meta).encode()), dtype=torch.uint8)

    # ---- fit --------------------------------------------------------------------------------------------------
    def configure_optimizers(self):
        """No optimiser: PRAXIS is not trained by gradient descent."""
        return

    def training_step(self, batch, batch_idx):
        """Build the Rashomon set of the batch (the whole training split) once; later steps do nothing."""
        if self.rashomon is not None:
            return
        X, y = (t.detach().cpu().numpy() for t in batch)
        hp = self.hparams

        def run():
            rs = fit_rashomon(
                X.astype(np.uint8),
                y.astype(np.int64),
                hp.lam,
                hp.depth,
                hp.eps,
                hp.lookahead_k,
                hp.slack,
                hp.root_budget,
                hp.majority_leaf_only,
            )
            histogram(rs.root)  # counting is part of the method's cost
            return rs

        m = measure(run)
        rs, seconds, peak_mib, how = m.result, m.seconds, m.peak_mib, m.how
        self.rashomon = rs
        n_trees = count_trees(rs.root)
        saved = [(o, t) for _, (o, t) in zip(range(hp.max_saved_trees), iter_trees(rs.root))]
        feat, val = encode_trees([t for _, t in saved], hp.depth)
        self.tree_feature, self.tree_value = torch.from_numpy(feat), torch.from_numpy(val)
        self.tree_objective = torch.tensor([o for o, _ in saved], dtype=torch.int64)
        objs, counts = histogram(rs.root)
        self.hist_objective = torch.from_numpy(objs.astype(np.int64))
        self.hist_count = torch.tensor([float(c) for c in counts.tolist()], dtype=torch.float64)
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        names = list(getattr(dm, "feature_names", [f"x{j}" for j in range(X.shape[1])]))
        spec = getattr(dm, "spec", None)
        usage = feature_usage(rs.root, len(names))
        rid = None
        if hp.rid_bootstraps:
            variables, groups = variable_groups(names, spec)
            rid = rashomon_importance(
                X,
                y,
                hp.lam,
                hp.depth,
                hp.eps,
                groups,
                variables,
                hp.rid_bootstraps,
                hp.rid_trees,
                hp.rid_seed,
                hp.lookahead_k,
            ).summary()
        self._set_meta(
            {
                "feature_names": names,
                "spec": spec,
                "label": getattr(dm, "label", None),
                "usage": [str(u) for u in usage],
                "rid": rid,
                "rid_bootstraps": hp.rid_bootstraps,
                "classes": list(getattr(dm, "classes", [str(c) for c in range(int(y.max()) + 1)])),
                "n_trees": str(n_trees),
                "n_within_best": str(rs.n_within_best),
                "eps": hp.eps,
                "min_objective": rs.min_objective,
                "gamma": rs.problem.gamma,
                "bound": rs.bound,
                "reference": rs.reference,
                "n": len(y),
                "seconds": seconds,
                "peak_mib": peak_mib,
                "memory_measure": how,
                "or_nodes": rs.n_or_nodes,
            }
        )
        best_acc = float((self(torch.from_numpy(X[:, :]))[0].numpy() == y).mean()) if saved else float("nan")
        for key, value in {
            "n_trees": float(n_trees),
            "n_within_best": float(rs.n_within_best),
            "log10_n_trees": math.log10(max(n_trees, 1)),
            "min_objective": float(rs.min_objective),
            "bound": float(rs.bound),
            "seconds": seconds,
            "cpu_seconds": m.cpu_seconds,
            "peak_mem_mib": peak_mib,
            "or_nodes": float(rs.n_or_nodes),
            "best_tree_accuracy": best_acc,
        }.items():
            self.log(f"train/{key}", value, batch_size=1, on_step=True, on_epoch=False)
        return

    def on_train_end(self) -> None:
        """Write the best tree (text, PNG), size-vs-epsilon and Rashomon importance into ``<run>/praxis/``."""
        if self.rashomon is None or self.tree_feature.shape[0] == 0:
            return
        self._artifacts = self.write_artifacts(self.artifact_dir("praxis"))

    def write_artifacts(self, out: Path) -> dict[str, str]:
        """Files people look at; returns ``{name: path}``. Needs the set built by ``fit`` in this process."""
        out.mkdir(parents=True, exist_ok=True)
        meta, rs = self.meta, self.rashomon
        names, classes = meta["feature_names"], meta["classes"]
        best = decode_tree(self.tree_feature[0].numpy(), self.tree_value[0].numpy())
        files = {
            "best_tree.txt": out / "best_tree.txt",
            "best_tree.png": out / "best_tree.png",
            "size_vs_eps.png": out / "size_vs_eps.png",
            "size_vs_eps.json": out / "size_vs_eps.json",
            "importance.png": out / "importance.png",
            "importance.json": out / "importance.json",
        }
        obj = int(self.tree_objective[0])
        files["best_tree.txt"].write_text(
            f"# objective {obj} (gamma {meta['gamma']} per leaf + mistakes), "
            f"one of {meta['n_trees']} trees\n" + tree_text(best, names, classes)
        )
        plot_tree(best, names, str(files["best_tree.png"]), classes, title=f"best tree, objective {obj}")
        grid = self.hparams.eps_grid or [0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1]
        rows = size_vs_eps(rs.root, [e for e in grid if e <= self.hparams.eps + 1e-12] or [0.0])
        files["size_vs_eps.json"].write_text(json.dumps([{"eps": e, "n_trees": c} for e, c in rows], indent=1))
        plot_size_vs_eps(rows, str(files["size_vs_eps.png"]), title=f"Rashomon set size (bound {rs.bound})")
        self.write_importance(files["importance.json"], files["importance.png"])
        return {k: str(v) for k, v in files.items()}

    def importance_doc(self) -> dict:
        """Both Rashomon importances from the stored meta: ``{"usage": [{"feature", "trees_using", "share"}], "rid":
        [per-variable summary] or None, "rid_bootstraps"}``."""
        meta = self.meta
        names, usage, total = meta["feature_names"], [int(u) for u in meta["usage"]], int(meta["n_trees"])
        return {
            "usage": [{"feature": n, "trees_using": u, "share": u / total} for n, u in zip(names, usage)],
            "rid": meta.get("rid"),
            "rid_bootstraps": meta.get("rid_bootstraps"),
        }

    def write_importance(self, json_path: Path, png_path: Path) -> None:
        """:meth:`importance_doc` as JSON and as a PNG (usage bars beside RID box plots)."""
        meta = self.meta
        json_path.write_text(json.dumps(self.importance_doc(), indent=1))
        plot_importance(
            [int(u) for u in meta["usage"]],
            int(meta["n_trees"]),
            meta["feature_names"],
            str(png_path),
            rid=meta.get("rid"),
        )

    def importance_lines(self) -> list[str]:
        """``zoo predict``'s text of both importances: usage share per feature, RID summary per variable."""
        meta = self.meta
        if "usage" not in meta:
            return ["# (a checkpoint from before the importance tables: refit to get them)"]
        total = int(meta["n_trees"])
        lines = [
            "## Rashomon importance by usage: share of the set's trees that split on the feature",
            "feature\tshare",
        ]
        usage = sorted(zip(meta["feature_names"], (int(u) for u in meta["usage"])), key=lambda t: -t[1])
        lines += [f"{n}\t{u / total:.3f}" for n, u in usage]
        if meta.get("rid"):
            lines += [
                (
                    f"## Rashomon importance distribution: model reliance (permuted - original misclassification "
                    f"rate) over {meta['rid_bootstraps']} bootstrap Rashomon sets"
                ),
                "variable\tmean\tq05\tq25\tmedian\tq75\tq95\tP(>0)",
            ]
            lines += [
                f"{r['variable']}\t{r['mean']:.4f}\t{r['q05']:.4f}\t{r['q25']:.4f}\t{r['q50']:.4f}\t"
                f"{r['q75']:.4f}\t{r['q95']:.4f}\t{r['p_positive']:.3f}"
                for r in sorted(meta["rid"], key=lambda r: -r["mean"])
            ]
        return lines

    def package_extras(self) -> dict[str, str]:
        return dict(self._artifacts)

    # ---- inference --------------------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Predictions of every stored tree: ``x (N, F)`` 0/1 -> ``(T, N)`` int64 classes."""
        preds = predict_encoded(self.tree_feature.numpy(), self.tree_value.numpy(), x.detach().cpu().numpy())
        return torch.from_numpy(preds).to(x.device)

    def spread(self, X: np.ndarray) -> dict[str, np.ndarray]:
        """Spread of predictions across the stored set: per sample, the share of trees voting each class.

        Returns:
            ``{"votes": (N, C) float shares, "best": (N,) best tree's class, "agree": (N,) share agreeing with it}``.
        """
        preds = self(torch.from_numpy(np.asarray(X, dtype=np.uint8))).numpy()
        n_classes = len(self.meta.get("classes", [])) or int(preds.max()) + 1
        votes = np.stack([(preds == c).mean(0) for c in range(n_classes)], axis=1)
        best = preds[0]
        return {"votes": votes, "best": best, "agree": (preds == best[None]).mean(0)}

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """``zoo predict praxis.<tag> rows.csv``: the set's two sizes, per row how its trees split their votes (and the
        accuracy when the rows carry the label column), both Rashomon importances; with ``out_dir``, also
        ``importance.json|png`` and ``spread.tsv`` there (:func:`~zoo.methods.praxis.predict.report`).

        Raises:
            DataError: see :func:`~zoo.methods.praxis.predict.predict_files`.
        """
        return report(self, predict_files(self, inputs), out_dir)

    predict_schema: ClassVar = {
        "n_trees": int,
        "n_within_best": (int, None),
        "stored_trees": int,
        "classes": [str],
        "label": (str, None),
        "files": [{"file": str, "rows": [{"row": int, "best_tree": str, "agree": float, "votes": {str: float}}]}],
        "importance": ({"usage": [{"feature": str, "trees_using": int, "share": float}]}, None),
    }

    def predict_json(self, inputs: list[str], out_dir: str | None = None) -> dict:
        """``zoo predict --json``: per-row predictions and, for labelled rows, accuracy
        (:func:`~zoo.methods.praxis.predict.as_json`); ``out_dir`` as :meth:`predict_cli`."""
        files = predict_files(self, inputs)
        if out_dir:
            report(self, files, out_dir)
        return as_json(self, files)

    def evaluate(self, datamodule) -> dict[str, float]:
        """Set size and best objective, plus accuracy of the best stored tree and of the vote on train/val."""
        datamodule.setup("validate")
        meta = self.meta
        out = {
            "n_trees": float(meta.get("n_trees", 0)),
            "n_within_best": float(meta.get("n_within_best", "nan")),
            "min_objective": float(self.tree_objective[0]) if len(self.tree_objective) else float("nan"),
            "stored_trees": float(self.tree_feature.shape[0]),
        }
        for split in ("train", "val"):
            X, y = getattr(datamodule, f"X_{split}"), getattr(datamodule, f"y_{split}")
            if X is None or len(y) == 0 or self.tree_feature.shape[0] == 0:
                continue
            s = self.spread(X)
            out[f"{split}/best_tree_accuracy"] = float((s["best"] == y).mean())
            out[f"{split}/vote_accuracy"] = float((s["votes"].argmax(1) == y).mean())
            out[f"{split}/mean_agreement"] = float(s["agree"].mean())
        return out
