"""``CRHModule``: the Lightning shell around the CRH analysis (arXiv 2605.01844) on a causal LM.

No gradient training (as praxis): ``fit`` runs one step that builds the pairs, the difference vectors, the four
directions per concept and layer, the steering runs, the labels and the correlation tests; the probe's 200 Adam
steps happen inside. The LM is loaded from ``lm`` and is not part of the checkpoint: buffers hold only the
directions (``[C, 4, n_layers, D]``), so a release package is small.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import torch

from zoo.core.constraints import NonEmpty, NonNegative, NonNegativeInt, Positive, PositiveInt
from zoo.core.data import DataError
from zoo.core.module import ZooModule
from zoo.core.registry import register_method
from zoo.methods.crh.analysis import implication_tests, sin_cos
from zoo.methods.crh.datamodule import CRHPairsDataModule
from zoo.methods.crh.geometry import DIRECTIONS
from zoo.methods.crh.pipeline import Settings, run_all
from zoo.methods.crh.plots import cylinder_view, label_fractions, steerability_scatter
from zoo.methods.crh.predict import predict_record, predict_text

_BUFFERS = ("directions", "concept_ids", "meta_json")
MEASURES = ("steerability", "soft_steerability", "judge_steerability")  # the paper's label slope; ours: keyword-
# probability slope, judge-score slope (LM judge only)


@register_method("crh", datamodule=CRHPairsDataModule)
class CRHModule(ZooModule):
    """Cylindrical representation hypothesis: directions, cylinder geometry, steering and the correlation tests.

    Args:
        lm: zoo id or local Hugging Face directory of the causal LM (``zoo-lm.chat``; paper: Gemma-2B-it).
        layers: residual layers (output of block l); the authors use floor(0.5 L), floor(0.75 L).
        n_train, n_test, split_seed: questions per concept for the directions and for steering (100, 5).
        baselines: directions steered prompt-only (subset of ``diffmean, mean_center, pca, probe``).
        lambdas: penalties of the v(L, lambda) runs (steered on every forward); 0 feeds the correlation.
        baseline_c, penalty_c, n_steps: lengths L_k in linspace(0, c |mu_c|, n_steps + 1)[1:] (5, 3, 25).
        hook_site: ``input`` (the authors' pre-hook on block l, one block early) or ``output`` (where read).
        pca_sign: ``none`` (the paper's unsigned PC1) or ``align`` (sign of diffmean).
        template: ``plain`` ("User: ...\\nAssistant: ") or ``chat`` (the tokenizer's chat template).
        max_new_tokens, temperature, batch_size: steered generation (32, 0.1, 128).
        reply_tokens, reply_cache: greedy reply length for r_no (64) and the JSON file caching replies.
        probe_steps: Adam steps of the probe (200). authors_escapes: the gibberish regex exactly as written upstream.
        judge: ``keyword`` (ours) or ``lm`` (ours: the steered LM asked yes/no, :mod:`.judge`; label 2 when
            P(yes) / (P(yes) + P(no)) >= ``judge_threshold``); the authors' Llama-3.3-70B judge needs an API.
        pairs: ``template`` (greedy reply + keyword sentence, for LMs that cannot follow an instruction) or
            ``instructed`` (the authors': the LM's own answers without / with the concept instruction).
        pair_questions: questions per concept of ``instructed`` pairs (``null``: all).
        directive: the concept instruction of ``instructed`` pairs, ``short`` (ours) or ``authors``.
        reply_temperature: 0 (greedy answers, the default) or a sampling temperature (random test LMs, whose greedy
            answer only repeats the prompt's last token).
        judge_threshold: the ``lm`` judge labels 2 when P(yes) / (P(yes) + P(no)) is at least this.
        length_unit: ``mu`` (lengths up to ``c |mu_c|``, the paper) or ``residual`` (up to ``c rho_l``, the layer's
            mean last-token residual norm: for LMs whose |mu_c| is far from the norm at which steering acts).
        exponents: ``{a, p, t}`` of the Implication-2 test (2, 2, -1). n_perm: permutations for the grid maximum.
    """

    export_formats = ("package",)
    fit_sized_buffers = _BUFFERS

    def __init__(
        self,
        lm: str = "zoo-lm.chat",
        layers: Annotated[list[NonNegativeInt], NonEmpty] | None = None,
        n_train: PositiveInt = 100,
        n_test: PositiveInt = 5,
        split_seed: NonNegativeInt = 0,
        baselines: list[Literal["diffmean", "mean_center", "pca", "probe"]] | None = None,
        lambdas: list[NonNegative] | None = None,
        baseline_c: Positive = 5.0,
        penalty_c: Positive = 3.0,
        n_steps: PositiveInt = 25,
        hook_site: Literal["input", "output"] = "input",
        pca_sign: Literal["none", "align"] = "none",
        template: Literal["plain", "chat"] = "plain",
        max_new_tokens: PositiveInt = 32,
        temperature: NonNegative = 0.1,
        batch_size: PositiveInt = 128,
        reply_tokens: PositiveInt = 64,
        reply_cache: str | None = "runs/crh-cache/replies.json",
        probe_steps: PositiveInt = 200,
        authors_escapes: bool = False,
        judge: Literal["keyword", "lm"] = "keyword",
        exponents: dict | None = None,
        n_perm: PositiveInt = 200,
        pairs: Literal["template", "instructed"] = "template",
        pair_questions: PositiveInt | None = None,
        directive: Literal["short", "authors"] = "short",
        reply_temperature: NonNegative = 0.0,
        length_unit: Literal["mu", "residual"] = "mu",
        judge_threshold: NonNegative = 0.5,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.settings = Settings(
            layers=list(layers or [2, 3]),
            n_train=n_train,
            n_test=n_test,
            split_seed=split_seed,
            baselines=list(baselines or []),
            lambdas=list([0.0] if lambdas is None else lambdas),
            baseline_c=baseline_c,
            penalty_c=penalty_c,
            n_steps=n_steps,
            hook_site=hook_site,
            pca_sign=pca_sign,
            template=template,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            batch_size=batch_size,
            probe_steps=probe_steps,
            authors_escapes=authors_escapes,
            pairs=pairs,
            pair_questions=pair_questions,
            directive=directive,
            reply_temperature=reply_temperature,
            length_unit=length_unit,
            judge=judge,
            judge_threshold=judge_threshold,
        )
        self.register_buffer("directions", torch.zeros(0, len(DIRECTIONS), len(self.settings.layers), 0))
        self.register_buffer("concept_ids", torch.zeros(0, dtype=torch.int64))
        self.register_buffer("meta_json", torch.zeros(0, dtype=torch.uint8))
        self._lm: list = []  # (model, tokenizer), outside the module tree so no LM weights are saved
        self._run: dict | None = None
        self._artifacts: dict[str, str] = {}

    @property
    def meta(self) -> dict:
        """Concepts (text, keywords), mean |mu_c| and the fit's correlation summary (from the buffer)."""
        return json.loads(bytes(self.meta_json.tolist()).decode()) if self.meta_json.numel() else {}

    def language_model(self):
        """``(model, tokenizer)`` of ``lm``, loaded once (not a submodule)."""
        if not self._lm:
            from zoo.models.causal_lm import load_causal_lm

            model, tok = load_causal_lm(self.hparams.lm)
            self._lm.append((model.to(self.device), tok))
        return self._lm[0]

    def configure_optimizers(self):
        """No optimiser: CRH is an analysis (the probe's Adam steps run inside ``training_step``)."""
        return

    def training_step(self, batch, batch_idx):
        """Run the whole protocol once on the datamodule's single batch; later steps do nothing."""
        if self._run is not None:
            return
        model, tok = self.language_model()
        hp = self.hparams
        run = run_all(model, tok, batch, self.settings, hp.reply_cache, hp.reply_tokens, lm_key=hp.lm)
        self._run = run
        self.directions = run["directions"].float()
        self.concept_ids = torch.tensor(run["concepts"], dtype=torch.int64)
        ex = {"a": 2.0, "p": 2.0, "t": -1.0, **(hp.exponents or {})}
        tests = (
            {
                m: implication_tests(run["points"], ex["a"], ex["p"], ex["t"], hp.n_perm, hp.split_seed, m)
                for m in MEASURES
            }
            if run["points"]
            else {}
        )
        run["tests"] = tests
        concepts = {c["cid"]: c for c in batch["concepts"]}
        meta = {
            "concepts": {
                str(c): {
                    "concept": concepts[c]["concept"],
                    "keywords": concepts[c]["keywords"],
                    "instruction": concepts[c].get("instruction", ""),
                }
                for c in run["concepts"]
            },
            "layers": self.settings.layers,
            "tests": tests,
        }
        self.meta_json = torch.tensor(list(json.dumps(meta).encode()), dtype=torch.uint8)
        metrics = {
            "n_concepts": float(len(run["concepts"])),
            "mu_norm_mean": float(run["directions"][:, 0].norm(dim=-1).mean()),
        }
        for m, tm in tests.items():
            for key in ("implication2", "lrh_partial", "implication3"):
                for stat in ("pearson_r", "spearman_rho"):
                    if tm.get(key, {}).get(stat) is not None:
                        metrics[f"{m}/{key}_{stat}"] = tm[key][stat]
        for key, value in metrics.items():
            self.log(f"train/{key}", value, batch_size=1, on_step=True, on_epoch=False)

    def on_train_end(self) -> None:
        """Write outputs, points and plots into ``<run>/crh/``."""
        if self._run is None:
            return
        root = self.artifact_dir("crh")
        self._artifacts = self.write_artifacts(root)

    def write_artifacts(self, out: Path) -> dict[str, str]:
        """``outputs.json`` (every labelled generation), ``points.json``, ``tests.json`` and the PNGs."""
        out.mkdir(parents=True, exist_ok=True)
        run, s = self._run, self.settings
        files = {
            "outputs.json": out / "outputs.json",
            "points.json": out / "points.json",
            "tests.json": out / "tests.json",
        }
        files["outputs.json"].write_text(
            json.dumps(
                [
                    {
                        "cid": c,
                        "layer": layer,
                        "run": name,
                        "qid": q,
                        "step": k,
                        "length": length,
                        "label": lab,
                        "text": text,
                        "keyword_mass": mass,
                        "judge_score": score,
                    }
                    for (c, layer), res in run["results"].items()
                    for name, rows in res["runs"].items()
                    for q, k, length, lab, text, mass, score in rows
                ],
                indent=0,
            )
        )
        files["points.json"].write_text(json.dumps(run["points"], indent=0))
        files["tests.json"].write_text(json.dumps(run["tests"], indent=1))
        if run["points"]:
            for m in MEASURES:
                kept = [p for p in run["points"] if not p["excluded"] and p[m] is not None]
                if kept:
                    x = sin_cos([p["sin"] for p in kept], [p["cos"] for p in kept])
                    y = [p[m] / p["mu_norm"] ** 2 for p in kept]
                    files[f"{m}.png"] = out / f"{m}.png"
                    steerability_scatter(
                        x,
                        y,
                        str(files[f"{m}.png"]),
                        f"{m}: {len(kept)} points, layers {s.layers}",
                        ylabel=f"{m} / |mu_c|^2",
                    )
            frac = _mean_fractions(run["summaries"])
            files["label_fractions.png"] = out / "label_fractions.png"
            label_fractions(frac, str(files["label_fractions.png"]), "label fractions vs step (mean over concepts)")
            (c, layer), res = next(iter(run["results"].items()))
            acts = run["acts"][c][layer]
            files["cylinder.png"] = out / "cylinder.png"
            cylinder_view(
                acts["d"],
                acts["d_test"],
                _outcomes(res["runs"][next(iter(res["runs"]))], run["acts"][c]["test"]),
                str(files["cylinder.png"]),
                f"concept {c}, layer {layer}",
            )
        return {k: str(v) for k, v in files.items()}

    def package_extras(self) -> dict[str, str]:
        return {k: v for k, v in self._artifacts.items() if k.endswith((".png", ".json")) and k != "outputs.json"}

    def evaluate(self, datamodule) -> dict[str, float]:
        """The fit's summary (no re-run): concepts, mean |mu_c| and the correlation coefficients."""
        tests = self.meta.get("tests", {})
        out = {"n_concepts": float(self.concept_ids.numel())}
        if self.directions.numel():
            out["mu_norm_mean"] = float(self.directions[:, 0].norm(dim=-1).mean())
        for m, tm in tests.items():
            for key in ("implication2", "lrh_partial", "implication3"):
                for stat in ("pearson_r", "pearson_p", "spearman_rho", "spearman_p"):
                    if tm.get(key, {}).get(stat) is not None:
                        out[f"{m}/{key}/{stat}"] = float(tm[key][stat])
        return out

    predict_schema: ClassVar = {
        "concept_id": int,
        "concept": str,
        "keywords": [str],
        "layer": int,
        "mu_norm": float,
        "d_norm": float,
        "theta_deg": float,
        "cos": float,
        "sin2_over_cos": float,
        "steered": [{"length": float, "label": str, "text": str}],
    }

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> dict:
        """``zoo predict crh.<tag> CONCEPT_ID "question"``: theta of the question's difference vector to the
        concept's axis and labelled generations at 5 steering lengths (:func:`.predict.predict_record`).

        Raises:
            DataError: wrong arguments, or a concept this package holds no direction for.
        """
        if len(inputs) != 2 or not inputs[0].lstrip("-").isdigit():
            raise DataError('zoo predict crh: give a concept id and a question, e.g. 5 "How do I bake bread?"')
        cid = int(inputs[0])
        ids = self.concept_ids.tolist()
        if cid not in ids:
            raise DataError(
                f"concept {cid}: no direction in this package (it holds {len(ids)} concepts: "
                f"{ids[:10]}{' ...' if len(ids) > 10 else ''})"
            )
        model, tok = self.language_model()
        return predict_record(model, tok, self, ids.index(cid), cid, inputs[1])

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record` as text; with ``out_dir`` also ``D/predict.txt``."""
        text = predict_text(self.predict_record(inputs))
        if out_dir:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            (Path(out_dir) / "predict.txt").write_text(text + "\n")
        return text


def _mean_fractions(summaries: dict) -> dict:
    names = list(next(iter(summaries.values()))["frac"])
    return {
        n: {
            lab: [float(sum(v)) / len(v) for v in zip(*[s["frac"][n][lab] for s in summaries.values()])]
            for lab in ("1", "2", "3")
        }
        for n in names
    }


def _outcomes(rows: list, test: list[int]) -> list[str]:
    """Per test question: ``concept reached`` if any step has label 2 before any gibberish, ``gibberish first`` if
    gibberish comes first, else ``never``."""
    out = []
    for q in test:
        labs = [r[3] for r in sorted(rows, key=lambda r: r[1]) if r[0] == q]
        first = next((lab for lab in labs if lab in (2, 3)), None)
        out.append({2: "concept reached", 3: "gibberish first"}.get(first, "never"))
    return out
