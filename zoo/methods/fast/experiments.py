"""FAST vs block training on zoo-lm.chat: the tables of docs/results.md and the figures.

``python -m zoo.methods.fast.experiments`` trains, for each pipeline (``fast``, ``bt_pretrain`` = BT(P),
``bt_chat`` = BT(F)), SAE (Standard, JumpReLU) and seed, the recipe ``fast-sae.yaml`` through ``zoo.core.build.train``
(equal token budgets, the same LM layer), then measures on the validation conversations (each alone): log₂ MSE and
log₂ MSE_st (eq. 7), L0, explained variance, dead/dense features, Delta loss (*ours*), GSNR at the start and end of
training (*ours*); ``--quality`` adds the high-quality feature fraction (*ours*, MiniLM; run for the JumpReLU grid,
the paper's interpretability protocol). Rows are saved as they come (``runs/fast-exp/<name>.jsonl``), so a stopped
run resumes. ``--layer1`` adds layer 1 with one seed;
``--steer`` the steering sweep. Results: ``results/fast/*.json``, figures ``results/fast/figures/*.png``.
"""
from __future__ import annotations

import argparse
import math
import time

import lightning as L
import torch

from zoo.core.results import summarise, write_result
from zoo.methods.fast.metrics import POSITION_EDGES, delta_loss, error_by_position, gsnr
from zoo.methods.fast.pipelines import truncated_lm

PAPER = {"log2_mse_st": "Qwen2.5-7B-Instruct L18 8x Standard: FAST 0.6468, BT(P) 5.1985, BT(F) 1.5093; JumpReLU: "
                        "FAST -9.7604, BT(P) -4.0005, BT(F) -8.0743 (log2 MSE_st, paper Table)",
         "log2_mse": "Llama-3.2-3B-Instruct L20 8x Standard: FAST -0.9527, BT(P) -0.6926, BT(F) -0.9186",
         "high_quality": "Llama-3.2-3B-Instruct 8x JumpReLU, GPT-4o score 4-5: FAST 21.1%, BT(P) 7.0%, BT(F) 10.2%",
         "delta_loss": "FAST -0.51% to +0.37% (ICML abstract; definition not given)",
         "gsnr": "FAST higher than BT (ICML abstract; no number)"}
METRICS = ["log2_mse", "log2_mse_st", "delta_loss", "l0", "explained_variance", "dead", "dense", "gsnr",
           "high_quality", "seconds"]


class Probe(L.Callback):
    """Keeps the fitted module and datamodule, and measures GSNR (*ours*) at ``points`` steps: per-minibatch SAE loss
    gradients over ``n_batches`` fixed minibatches of ``batch`` activations from the pipeline's own stream."""

    def __init__(self, points: int = 1, n_batches: int = 32, batch: int = 256, seed: int = 0):
        self.points, self.n_batches, self.batch, self.seed = points, n_batches, batch, seed
        self.curve: list[tuple[int, float]] = []

    def on_train_start(self, trainer, pl_module):
        self.module, self.datamodule = pl_module, trainer.datamodule
        sample = trainer.datamodule.sample(self.n_batches * self.batch, seed=10_000 + self.seed)
        self.batches = sample.split(self.batch)
        total = int(trainer.estimated_stepping_batches)
        self.at = {0, *[round(total * (i + 1) / self.points) - 1 for i in range(self.points)]}
        self.measure(pl_module, 0)

    def measure(self, module, step: int):
        grads = []
        for b in self.batches:
            module.sae.zero_grad()
            module.sae_loss(b, step).loss.backward()
            grads.append(torch.cat([p.grad.flatten() for p in module.sae.parameters()]))
        module.sae.zero_grad()
        self.curve.append((step, gsnr(torch.stack(grads))))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step - 1 in self.at and trainer.global_step > 1:
            self.measure(pl_module, trainer.global_step)


def padded(ids, size: int = 16):
    """``(input_ids, attention_mask)`` batches of ``size`` right-padded sequences."""
    out = []
    for start in range(0, len(ids), size):
        group = ids[start:start + size]
        batch = torch.zeros(len(group), max(map(len, group)), dtype=torch.long)
        mask = torch.zeros_like(batch)
        for i, s in enumerate(group):
            batch[i, : len(s)], mask[i, : len(s)] = torch.tensor(s), 1
        out.append((batch, mask))
    return out


def train_one(args, pipeline: str, sae: str, seed: int, layer: int, l1: float) -> tuple[dict, Probe]:
    """Train one SAE through the recipe and measure it; returns its row and the probe (module, curves)."""
    from zoo.cli import compose_and_validate
    from zoo.core.build import train

    cfg = compose_and_validate([
        "recipe=fast-sae.yaml", f"model.sae={sae}", f"model.layer={layer}", f"data.pipeline={pipeline}",
        f"data.harvest_tokens={args.harvest}", f"data.training_tokens={args.tokens}", f"seed={seed}",
        f"model.l1_coefficient={l1}", "out_dir=runs/fast-exp", "export.formats=[]", "logger.kind=none"])
    probe = Probe(seed=seed)
    start = time.time()
    train(cfg, callbacks=[probe])
    seconds = time.time() - start
    module, dm = probe.module.eval(), probe.datamodule
    s = module.last_val
    model, tok = module.lm_and_tokenizer()
    val = dm.prepare_val()
    with torch.no_grad():
        _, _, dl = delta_loss(model, truncated_lm(model, layer), layer, padded(val["ids"][: args.delta_convs]),
                              module.forward)
    row = {"pipeline": pipeline, "sae": sae, "layer": layer, "l1": l1 if sae == "standard" else None, "seed": seed,
           "log2_mse": s["log2_mse"], "log2_mse_st": s["log2_mse_st"], "delta_loss": dl, "l0": s["l0_mean"],
           "explained_variance": float(module.trainer.callback_metrics["val/explained_variance"]),
           "dead": s["dead"], "dense": s["dense"], "gsnr": probe.curve[-1][1],
           "harvested_tokens": dm.stats["harvested_tokens"], "passes": dm.stats["passes"], "seconds": seconds,
           "gsnr_curve": probe.curve,
           "error_by_position": error_by_position(s["sq"], s["pos"], module.sae.cfg.d_in, POSITION_EDGES),
           "log10_density": torch.log10(s["freq"].clamp_min(1e-6)).tolist() if seed == 0 else None}
    if args.quality:
        from zoo.methods.fast.quality import feature_quality, random_coherence

        if args.random_sets is None:
            args.random_sets = random_coherence(val["ids"], tok)
        q = feature_quality(module, val["ids"], val["acts"], tok, args.random_sets, seed=seed)
        row["high_quality"] = q["high_quality"]
    print(f"[fast-exp] {pipeline} {sae} layer {layer} seed {seed}: " +
          ", ".join(f"{k} {row[k]:.4g}" for k in METRICS if isinstance(row.get(k), float)), flush=True)
    return row, probe


def reconstruction_metrics(reconstruct, encode, val: dict, hidden: int) -> dict:
    """Eq. 7 log2 MSE / MSE_st, L0 and dead/dense of any SAE on the validation conversations (each alone)."""
    import math

    from zoo.methods.fast.metrics import dead_dense, eq7_mse

    template = torch.tensor(val["template"])
    with torch.no_grad():
        sq = torch.cat([((a - reconstruct(a)) ** 2).sum(-1) for a in val["acts"]])
        feats = [encode(a) > 0 for a in val["acts"]]
    seq = torch.cat([torch.full((len(a),), i) for i, a in enumerate(val["acts"])])
    mask = torch.cat([torch.isin(torch.tensor(s), template) for s in val["ids"]])
    fired = torch.cat(feats)
    dead, dense = dead_dense(fired.float().mean(0))
    return {"log2_mse": math.log2(eq7_mse(sq, seq, hidden)), "log2_mse_st": math.log2(eq7_mse(sq, seq, hidden, mask)),
            "l0": float(fired.sum(-1).float().mean()), "dead": dead, "dense": dense}


def peer(args) -> None:
    """sae-lens' own runner on the BT(P) blocks (same tokens, width, lambda, schedule), measured like ours."""
    from zoo.methods.fast.baselines import train_runner
    from zoo.methods.fast.datamodule import FastSAEDataModule
    from zoo.models.causal_lm import load_causal_lm

    model, tok = load_causal_lm("zoo-lm.chat")
    dm = FastSAEDataModule(pipeline="bt_pretrain", empty_content="drop", harvest_tokens=args.harvest)
    dm.use_lm(model, tok, "zoo-lm.chat", 2)
    blocks = torch.stack(dm.train_sequences(tok))
    val = dm.prepare_val()
    rows = []
    for seed in args.seeds:
        start = time.time()
        sae = train_runner(blocks, training_tokens=args.tokens, l1_coefficient=args.l1[0], seed=seed)
        seconds = time.time() - start

        def recon(x, sae=sae):
            return sae.decode(sae.encode(x))

        row = {"pipeline": "bt_pretrain (sae-lens runner)", "sae": "standard", "l1": args.l1[0], "seed": seed,
               **reconstruction_metrics(recon, sae.encode, val, model.config.hidden_size), "seconds": seconds}
        with torch.no_grad():
            row["delta_loss"] = delta_loss(model, truncated_lm(model, 2), 2, padded(val["ids"][: args.delta_convs]),
                                           recon)[2]
        print("[fast-peer]", row, flush=True)
        rows.append(row)
    write_result("fast", "peer-saelens", rows,
                 summary=summarise(rows, ["log2_mse", "log2_mse_st", "delta_loss", "l0", "dead", "dense", "seconds"],
                                   by=["pipeline"]),
                 paper="the paper trains with sae_lens plus custom code; no runner-only row",
                 notes=f"sae-lens LanguageModelSAETrainingRunner (its activation store and mixing buffer, "
                       f"expected_average_only_in normalisation) on the same {len(blocks)} BT(P) 256-token blocks our "
                       f"bt_pretrain pipeline harvests, {args.tokens:,} training tokens, batch 1,024, Standard SAE 8x, "
                       f"lambda {args.l1[0]}, Adam 1e-3 -> 1e-4 (5% warm-up, cosine over the last 20%). Measured with our "
                       "eq. 7 code on the validation conversations, each alone.", packages=["sae-lens"])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--pipelines", nargs="+", default=["fast", "bt_pretrain", "bt_chat"])
    p.add_argument("--saes", nargs="+", default=["standard", "jumprelu"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--harvest", type=int, default=150_000, help="distinct tokens run through the LM per pipeline")
    p.add_argument("--tokens", type=int, default=60_000, help="SAE training tokens (equal for every pipeline)")
    p.add_argument("--l1", nargs="+", type=float, default=[2.0], help="Standard SAE lambda(s)")
    p.add_argument("--delta-convs", type=int, default=32, help="validation conversations for Delta loss")
    p.add_argument("--quality", action="store_true", help="MiniLM feature-quality fraction (*ours*)")
    p.add_argument("--layer1", action="store_true", help="also layer 1, first seed only")
    p.add_argument("--steer", action="store_true", help="steering sweep on the FAST JumpReLU SAE of the first seed")
    p.add_argument("--write-only", action="store_true", help="write the tables from the rows trained so far")
    p.add_argument("--peer", action="store_true", help="only the sae-lens runner baseline on BT(P)")
    p.add_argument("--name", default="pipelines")
    args = p.parse_args(argv)
    args.random_sets = None
    torch.set_num_threads(1)
    if args.peer:
        return peer(args)
    import json
    from pathlib import Path

    from zoo.methods.fast.render import plot_all

    log = Path("runs/fast-exp") / f"{args.name}.jsonl"  # rows so far: a killed run resumes where it stopped
    log.parent.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
    done = {(r["pipeline"], r["sae"], r["seed"], r["layer"], r["l1"]) for r in rows}
    probes = {}
    layers = [2] + ([1] if args.layer1 else [])
    grid = [(layer, sae, l1, pipeline, seed) for layer in layers
            for seed in (args.seeds if layer == 2 else args.seeds[:1])  # seeds outermost: a stopped run stays balanced
            for sae in args.saes for l1 in (args.l1 if sae == "standard" else [args.l1[0]])
            for pipeline in args.pipelines]
    for layer, sae, l1, pipeline, seed in grid:
        if (pipeline, sae, seed, layer, l1 if sae == "standard" else None) in done or args.write_only:
            continue
        row, probe = train_one(args, pipeline, sae, seed, layer, l1)
        rows.append(row)
        if args.steer and (pipeline, sae, seed, layer) == ("fast", "jumprelu", args.seeds[0], 2):
            probes[(pipeline, sae, seed, layer)] = probe  # kept for steering; others are freed (memory)
        with log.open("a") as f:
            f.write(json.dumps(row) + "\n")
    table = [{k: v for k, v in r.items() if not isinstance(v, list) and v is not None} for r in rows]
    notes = (f"zoo-lm.chat (5.26M-parameter Llama, d = 256), residual stream after block 2 (of 0-3); SAEs 8x "
             f"(2,048 features). Each pipeline harvests {args.harvest:,} distinct tokens once (FAST: deduplicated "
             f"chat conversations each alone, cut at 256 tokens; BT(F): the same conversations packed in 256-token "
             f"blocks; BT(P): zoo-lm's pre-training text packed in 256-token blocks) and trains on {args.tokens:,} "
             f"tokens (batch 1,024, passes in the `passes` column) through a 16,384-token mixing buffer. Activations "
             f"scaled to mean norm sqrt(256) for the SAE; metrics in the LM's units. Standard lambda in the `l1` "
             "column (paper 5, tuned for ~3.5k-wide models), "
             "JumpReLU lambda 0.01, bandwidth 0.001, threshold 0.001; Adam 1e-3 -> 1e-4 (5% warm-up, cosine over "
             "the last 20%), lambda warm-up 3%. Evaluation: the 562 non-empty val.jsonl conversations, each alone "
             "(eq. 7; MSE_st on <s>, </s>, <|system|>, <|user|>, <|assistant|>). Delta loss (ours): % change of "
             f"the LM's next-token CE on the first {args.delta_convs} of them with the reconstruction spliced in. "
             "GSNR (ours): median over parameters of E[g]^2/Var[g] over 32 minibatches of 256 activations of the "
             "pipeline's own stream, at the end of training. high_quality (ours): share of 128 random live "
             "features whose top-5 16-token contexts have mean pairwise MiniLM cosine above the 95th percentile of "
             "random 5-context sets; compare orderings, not levels.")
    write_result("fast", args.name, table, summary=summarise(table, [m for m in METRICS if any(m in r for r in table)],
                                                             by=["layer", "sae", "l1", "pipeline"]),
                 paper=PAPER, notes=notes, packages=["sae-lens"])
    if args.steer and ("fast", "jumprelu", args.seeds[0], 2) in probes:
        steering(args, probes)
    plot_all(rows, args.name)


def steering(args, probes) -> None:
    """Steering sweep (§4.4, *ours* at this scale) with the FAST JumpReLU SAE of the first seed."""
    from zoo.methods.fast.quality import assistant_feature, steering_nll

    probe = probes[("fast", "jumprelu", args.seeds[0], 2)]
    module, dm = probe.module, probe.datamodule
    model, tok = module.lm_and_tokenizer()
    val = dm.prepare_val()
    feature = assistant_feature(module, val["ids"], val["acts"], tok.convert_tokens_to_ids("<|assistant|>"))
    norm = float(torch.cat(val["acts"]).norm(dim=-1).mean())
    paper_alphas = [0, 15, 25, 50, 100, 150, 200]
    alphas = [a * norm / 100 for a in paper_alphas]
    held_out = dm.val_conversations[-args.delta_convs:]
    nll = steering_nll(module, model, tok, held_out, feature, alphas)
    rows = [{"alpha_paper": a, "alpha": b, "feature": feature, "seed": args.seeds[0], "reply_nll": n,
             "reply_ppl": math.exp(n)} for a, b, n in zip(paper_alphas, alphas, nll)]
    write_result("fast", "steering", rows, paper="alpha in {0, 15, 25, 50, 100, 150, 200}: moderate alpha improves "
                 "answers (GPT-4o judged), large alpha degrades them (paper §4.4, Qwen2.5-7B / Llama-3.1-8B)",
                 notes=f"z' = z + alpha * d_k at block 2 on every position, d_k the decoder row (LM units, norm "
                       f"{float(module.sae.W_dec[feature].detach().norm() / module.act_scale):.3f}) of the feature most "
                       f"active on <|assistant|> ({feature}). Our alpha = paper alpha x (our mean residual norm "
                       f"{norm:.2f}) / 100, i.e. we read the paper's alpha as a percentage of the residual norm "
                       f"(ours: the paper's norm is not given). Held-out replies: the last {args.delta_convs} "
                       "val.jsonl conversations; NLL in nats per assistant token (teacher forcing).",
                 packages=["sae-lens"])


if __name__ == "__main__":
    main()
