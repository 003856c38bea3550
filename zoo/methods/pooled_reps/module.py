"""``PooledRepsModule``: a frozen causal LM whose replies are pooled and compared with grounded reference embeddings
(Wang, Isola and Cheung, "The Truth Lies Somewhere in the Middle (of the Generated Tokens)", ICML 2026).

``fit`` takes no gradient step on the LM (as praxis): each training batch of (prompt, reference) items is generated
(chat template, ``T`` tokens, nucleus sampling seeded by the recipe's seed) and pooled by hooks; at the end of the
epoch every domain's readouts are measured against its reference spaces, and ``<run>/pooled-reps/alignment.json``
and the PNGs are written. With ``lora.r > 0`` (the world recipe) a LoRA is first fitted on the generated scene world
and merged, then the same measurement runs.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import torch

from zoo.core.constraints import NonEmpty, Positive, PositiveInt, Range
from zoo.core.module import ZooModule
from zoo.core.registry import register_method
from zoo.methods.pooled_reps.datamodule import PromptReferenceDataModule
from zoo.methods.pooled_reps.measure import measure_domain
from zoo.methods.pooled_reps.pipeline import concat, generate_batch, reference_spaces, select
from zoo.methods.pooled_reps.plots import write_plots
from zoo.models.causal_lm import drop_tied_aliases, fill_tied_aliases, tied_aliases
from zoo.models.generation_pool import PooledGeneration

_LORA = {"r": 0, "alpha": 32, "steps": 300, "batch_size": 16, "lr": 2.0e-3, "chats": 2000}


@register_method("pooled-reps", datamodule=PromptReferenceDataModule)
class PooledRepsModule(ZooModule):
    """Pooled generation representations against reference embeddings.

    Args:
        arch: a zoo-lm preset (weights from ``init_from: zoo-lm.chat``) or a local HF model directory.
        tokenizer: tokenizer directory (``None``: the arch directory, else zoo-lm's).
        dtype: parameter dtype of the LM (``float32``, ``bfloat16``).
        max_new_tokens: ``T`` generated tokens per prompt. temperature, top_p: nucleus sampling.
        readout_layer: readout index of the single-token / segment readouts (``-1``: ``hidden_states[-1]``, after
            the final norm).
        k: neighbours of mutual k-NN and CKNNA. n_boot: bootstrap replicates of the CIs.
        spaces: text reference spaces (``minilm``, ``tfidf``); the world always uses ``onehot``.
        tfidf_dim: TruncatedSVD width. encoder: a local sentence-transformers directory (``None``: MiniLM).
        lora: ``{r, alpha, steps, batch_size, lr, chats}`` of the world LoRA (``r = 0``: none).
        bank_domains: domains whose mean-pool vectors ``zoo predict`` searches for nearest references.

    Raises:
        ValueError: a bad setting (named).
    """

    weight_settings: ClassVar[dict[str, str]] = {"lm.arch": "model.arch", "lm.tokenizer": "model.tokenizer"}
    head_keys = ("bank", "bank_json", "meta_json")
    fit_sized_buffers = ("bank", "bank_json", "meta_json")
    export_formats = ("package",)

    def __init__(
        self,
        arch: str = "zoo-lm-small",
        tokenizer: str | None = None,
        dtype: Literal["float32", "bfloat16", "float16"] = "float32",
        max_new_tokens: PositiveInt = 64,
        temperature: Positive = 0.7,
        top_p: Annotated[float, Range(0, 1, min_open=True)] = 0.95,
        readout_layer: int = -1,
        k: PositiveInt = 10,
        n_boot: PositiveInt = 200,
        spaces: Annotated[list[Literal["minilm", "tfidf"]], NonEmpty] | None = None,
        tfidf_dim: PositiveInt = 128,
        encoder: str | None = None,
        lora: dict | None = None,
        bank_domains: list[str] | None = None,
    ):
        super().__init__()
        self.save_hyperparameters()
        for key, value, low in (
            ("max_new_tokens", max_new_tokens, 1),
            ("k", k, 1),
            ("n_boot", n_boot, 10),
            ("tfidf_dim", tfidf_dim, 2),
        ):
            if value < low:
                raise ValueError(f"model.{key}: must be >= {low}, got {value}")
        if not 0 < top_p <= 1 or temperature < 0:
            raise ValueError(f"model.top_p must be in (0, 1] and temperature >= 0, got {top_p}, {temperature}")
        bad = [s for s in (spaces or []) if s not in ("minilm", "tfidf")]
        if bad:
            raise ValueError(f"model.spaces: unknown {bad}; choose from minilm, tfidf")
        unknown = sorted(set(lora or {}) - set(_LORA))
        if unknown:
            raise ValueError(f"model.lora: unknown keys {unknown}; known {sorted(_LORA)}")
        self.lora_cfg = {**_LORA, **(lora or {})}
        from zoo.models.causal_lm import build_causal_lm, check_tokenizer_fits, load_tokenizer, tokenizer_for

        self.lm = build_causal_lm(arch, dtype=getattr(torch, dtype))
        self.tokenizer = load_tokenizer(tokenizer_for(arch, tokenizer))
        check_tokenizer_fits(self.tokenizer, self.lm, f"model.arch {arch!r}", "the tokenizer")
        self.lm.requires_grad_(False)
        self._tied = tied_aliases(self.lm, "lm.")
        self.register_state_dict_post_hook(drop_tied_aliases)
        self.register_load_state_dict_pre_hook(fill_tied_aliases)
        self.register_buffer("bank", torch.zeros(0, self.lm.config.hidden_size))
        self.register_buffer("bank_json", torch.zeros(0, dtype=torch.uint8))
        self.register_buffer("meta_json", torch.zeros(0, dtype=torch.uint8))
        self.automatic_optimization = False  # no optimiser step on the LM; the world LoRA has its own loop
        self._parts: list = []
        self._metrics: dict[str, float] = {}
        self.result: dict = {}

    # ---- settings --------------------------------------------------------------------------------------------
    @property
    def layer(self) -> int:
        """The readout index of single-token readouts (``readout_layer`` resolved against ``L`` readouts)."""
        return self.hparams.readout_layer % self.lm.config.num_hidden_layers

    @staticmethod
    def _json(buf: torch.Tensor):
        return json.loads(bytes(buf.tolist()).decode()) if buf.numel() else {}

    @staticmethod
    def _encode(obj) -> torch.Tensor:
        return torch.tensor(list(json.dumps(obj).encode()), dtype=torch.uint8)

    def _out_dir(self) -> Path:
        return self.artifact_dir("pooled-reps")

    # ---- fit -------------------------------------------------------------------------------------------------
    def configure_optimizers(self):
        """No optimiser on the LM: pooled-reps measures a frozen model."""
        return

    def on_fit_start(self) -> None:
        """With ``lora.r > 0``: fit the world LoRA (generated scene chats, seed 1000 + recipe seed is never a
        measurement scene seed), merge it, and keep the adapter's tensors next to the run."""
        cfg = self.lora_cfg
        self._parts = []
        if cfg["r"] <= 0:
            return
        from safetensors.torch import save_file

        from zoo.methods.pooled_reps.synthetic import fit_lora, world_chats

        def log(step, loss):
            print(f"pooled-reps world LoRA step {step}: loss {loss:.3f}", flush=True)

        self.lm, adapter = fit_lora(
            self.lm,
            self.tokenizer,
            world_chats(cfg["chats"], seed=1000),
            r=cfg["r"],
            alpha=cfg["alpha"],
            steps=cfg["steps"],
            batch_size=cfg["batch_size"],
            lr=cfg["lr"],
            seed=0,
            log=log,
        )
        out = self._out_dir()
        out.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in adapter.items()}, str(out / "world-lora-adapter.safetensors"))

    def training_step(self, batch: list[dict], batch_idx: int):
        """Generate and pool one batch of items (kept on the CPU until the epoch ends)."""
        hp = self.hparams
        pg, replies = generate_batch(
            self.lm, self.tokenizer, batch, hp.max_new_tokens, hp.temperature, hp.top_p, self.layer
        )
        self._parts.append((batch, pg, replies))

    def _gathered_parts(self) -> tuple[list[dict], list[str], PooledGeneration]:
        """This epoch's items, replies and pooled states; under DDP every rank's, put back in dataset order (the
        distributed sampler deals item ``j`` to rank ``j % W`` and pads the last round with repeats, dropped here)."""
        items = [it for b, _, _ in self._parts for it in b]
        replies = [r for _, _, rs in self._parts for r in rs]
        pg = concat([p for _, p, _ in self._parts])
        world = self.trainer.world_size
        if world == 1:
            return items, replies, pg
        import torch.distributed as dist

        every: list = [None] * world
        dist.all_gather_object(every, (items, replies, pg))
        offsets = [0, *itertools.accumulate(len(e[0]) for e in every)][:-1]
        order = [offsets[j % world] + j // world for j in range(len(self.trainer.datamodule.items))]
        items = [it for e in every for it in e[0]]
        replies = [r for e in every for r in e[1]]
        return [items[i] for i in order], [replies[i] for i in order], select(concat([e[2] for e in every]), order)

    def on_train_epoch_end(self) -> None:
        """Measure every domain, write ``alignment.json`` + PNGs, fill the predict bank and log the headline."""
        if not self._parts:
            return
        items, replies, pg = self._gathered_parts()
        self._parts = []
        hp, out = self.hparams, self._out_dir()
        if not self.trainer.is_global_zero:  # every rank measures the same gathered set; only rank 0 writes files
            out = Path(tempfile.mkdtemp(prefix="pooled-reps-rank"))
        out.mkdir(parents=True, exist_ok=True)
        result = {"domains": {}}
        bank, bank_meta = [], []
        for domain in dict.fromkeys(it["domain"] for it in items):
            idx = [i for i, it in enumerate(items) if it["domain"] == domain]
            sub = [items[i] for i in idx]
            spaces = reference_spaces(sub, hp.spaces or ["minilm", "tfidf"], hp.tfidf_dim, hp.encoder)
            res = measure_domain(select(pg, idx), spaces, self.layer, hp.k, hp.n_boot, seed=0)
            res["files"] = write_plots(res, out, domain)
            res["examples"] = [
                {"prompt": sub[i]["messages"][-1]["content"][:300], "reply": replies[idx[i]]}
                for i in range(min(5, len(sub)))
            ]
            result["domains"][domain] = {k: v for k, v in res.items() if k not in ("curves", "simplex")}
            (out / f"{domain}-curves.json").write_text(json.dumps({"curves": res["curves"], "simplex": res["simplex"]}))
            if (not hp.bank_domains or domain in hp.bank_domains) and "reference" in sub[0]:
                bank.append(pg.mean[self.layer][idx])
                bank_meta += [{"domain": domain, "reference": it["reference"][:240]} for it in sub]
            self._log_domain(domain, res)
        (out / "alignment.json").write_text(json.dumps(result, indent=1))
        (out / "replies.jsonl").write_text(
            "".join(json.dumps({"domain": it["domain"], "reply": r}) + "\n" for it, r in zip(items, replies))
        )
        self.result = result
        if bank:
            self.bank, self.bank_json = torch.cat(bank), self._encode(bank_meta)
        self.meta_json = self._encode({"metrics": self._metrics, "layer": self.layer})

    def _log_domain(self, domain: str, res: dict) -> None:
        space = next(iter(res["curves"]))
        for r in res["rows"]:
            if r["space"] == space and r["readout"] in (
                "mean",
                "last",
                "prompt",
                "best_single",
                "mix_best",
                "token_shuffle",
                "shuffled_pairing",
                "layer_avg",
            ):
                for metric in ("cka", "mknn"):
                    self._metrics[f"train/{domain}/{metric}_{r['readout']}"] = r[metric]
        for d in res["delta"]:
            if d["space"] == space:
                self._metrics[f"train/{domain}/delta_cka_{d['pairing']}"] = d["delta_cka"]
        for key, value in self._metrics.items():
            if key.startswith(f"train/{domain}/"):
                self.log(key, float(value), batch_size=1)

    # ---- use -------------------------------------------------------------------------------------------------
    def evaluate(self, datamodule) -> dict[str, float]:
        """The headline alignments measured at fit (stored with the weights; re-measuring means re-generating:
        train again)."""
        return dict(self._json(self.meta_json).get("metrics", {}))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """LM logits ``[B, S, V]``."""
        return self.lm(input_ids=input_ids, attention_mask=attention_mask).logits

    predict_schema: ClassVar = {
        "reply": str,
        "tokens": int,
        "vectors": (str, None),
        "nearest": [{"cosine": float, "domain": str, "reference": str}],
    }

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> dict:
        """``zoo predict RUN "instruction" [--out-dir D]``: the reply and its length in tokens, the 5 held-out
        references nearest to the reply's mean pool (cosine) and, with ``out_dir``, the pooled vectors written as
        ``D/pooled-reps-predict.safetensors`` (``vectors``: that path, else None).

        Raises:
            ValueError: no instruction given.
        """
        from safetensors.torch import save_file

        from zoo.core.data import set_seed
        from zoo.methods.pooled_reps.readouts import segment_means

        if not inputs:
            raise ValueError('give one instruction, e.g. "How do I bake bread?"')
        hp = self.hparams
        set_seed(0)
        items = [{"domain": "user", "messages": [{"role": "user", "content": " ".join(inputs)}]}]
        pg, replies = generate_batch(
            self.lm.eval(), self.tokenizer, items, hp.max_new_tokens, hp.temperature, hp.top_p, self.layer
        )
        seg = segment_means(pg.states, pg.lengths)
        vectors = {
            "mean": pg.mean[self.layer][0],
            "last": pg.last[self.layer][0],
            "prompt": pg.prompt[self.layer][0],
            "segments": seg[:, 0],
            "mean_per_layer": pg.mean[:, 0],
        }
        out = {"reply": replies[0], "tokens": int(pg.lengths[0]), "vectors": None, "nearest": []}
        if out_dir:  # files only where asked (never the current directory)
            path = Path(out_dir) / "pooled-reps-predict.safetensors"
            path.parent.mkdir(parents=True, exist_ok=True)
            save_file({k: v.float().clone().contiguous() for k, v in vectors.items()}, str(path))  # no shared storage
            out["vectors"] = str(path)
        meta = self._json(self.bank_json)
        if self.bank.shape[0]:
            sims = (
                torch.nn.functional.normalize(self.bank.float(), dim=1)
                @ torch.nn.functional.normalize(vectors["mean"][None], dim=1).T
            )
            top = sims[:, 0].topk(min(5, len(meta)))
            out["nearest"] = [
                {"cosine": s, "domain": meta[i]["domain"], "reference": meta[i]["reference"]}
                for s, i in zip(top.values.tolist(), top.indices.tolist())
            ]
        return out

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record` as text: the reply, where the vectors went, the nearest references."""
        out = self.predict_record(inputs, out_dir)
        lines = [f"reply ({out['tokens']} tokens): {out['reply']}"]
        lines += [f"pooled vectors: {out['vectors']}"] if out["vectors"] else []
        if out["nearest"]:
            lines.append("nearest held-out references by mean pool (cosine):")
            lines += [f"  {n['cosine']:.3f}  [{n['domain']}] {n['reference'][:120]!r}" for n in out["nearest"]]
        return "\n".join(lines)
