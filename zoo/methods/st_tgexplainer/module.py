"""``st-tgexplainer``: the LightningModule (manual optimisation: main model + discriminator).

One class over ~400 lines: its two optimisers, the loss terms' schedule and the transfer/resize of node-indexed
weights share the module's state; the network is in ``networks.py``, the losses in ``losses.py``, the data in
``datamodule.py``/``data.py``, the explanation measures in ``explain.py``."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Annotated, ClassVar

import torch
import torch.nn.functional as F

from zoo.core.constraints import NonNegative, NonNegativeInt, Positive, PositiveInt, Probability, Range
from zoo.core.module import ZooModule
from zoo.core.optim import build_optimizer
from zoo.core.registry import register_method
from zoo.core.schema import RecipeError
from zoo.methods.st_tgexplainer.data import RecentNeighborSampler, max_inter_event_gap, read_events
from zoo.methods.st_tgexplainer.datamodule import TemporalLinkDataModule, resolve_path
from zoo.methods.st_tgexplainer.explain import explanation_records, fidelity_agreement, plot_explanation
from zoo.methods.st_tgexplainer.losses import (
    bernoulli_kl,
    discriminator_loss,
    permute_within_groups,
    r_schedule,
    redundancy_loss,
)
from zoo.methods.st_tgexplainer.metrics import acc_auc, link_metrics, reciprocal_ranks, stability_agreement
from zoo.methods.st_tgexplainer.networks import STTGExplainerNet, negative_logits, pos_neg_inputs

_log = logging.getLogger("zoo")
FIDELITY_LEVELS = [0.05, 0.1, 0.15, 0.2, 0.25, 0.3]


@register_method("st-tgexplainer", datamodule=TemporalLinkDataModule)
class STTGExplainer(ZooModule):
    """ST-TGExplainer (ICML 2026): temporal link prediction explained by stability/transition token masks.

    Args:
        num_nodes: N; ``None`` = taken from the datamodule in ``setup`` (and then stored in the hparams).
        num_neighbors: K per endpoint; must equal the datamodule's.
        hidden: H (172 in the paper's code). time_dim: time-encoding size (100).
        num_layers: Mixer blocks (2). dropout: dropout rate (0.2 in the notes' defaults).
        token_factor, channel_factor: Mixer FFN expansions (0.5, 4.0).
        explainer: ``False`` trains the plain GraphMixer baseline (one unweighted pass, BCE only).
        info_weight: λ_info (0.1). dis_weight: λ_dis (0.1; 0 disables the discriminator).
        init_r, decay_interval, decay_r, final_r: the r schedule (0.7, 5, 0.1, 0.5).
        mask_temperature: τ of the training-time Gumbel-sigmoid mask (1 in the code; see the ablation in the card).
        optimizer: main optimiser dict for ``build_optimizer`` (code: Adam, lr 1e-4).
        disc_lr: the discriminator's Adam learning rate (1e-4).
        fidelity_levels: sparsity levels of the test-time fidelity curve (``None`` = 0.05..0.3 by 0.05; ``[]`` =
            skip).
        edge_feat_dim: F; ``None`` = from the datamodule.
        history_path: the event file whose past ``predict_cli`` uses (set from the datamodule in ``setup``).
    """

    # node-indexed parameters: on another graph (other node set) they are re-initialised at its size, everything else
    # (time encoding, token projection, Mixer, scorer, stability prior, predictor) transfers; see README "Transfer"
    head_keys = ("net.predictor.", "net.node_emb.", "raw_node_ids")
    export_formats = ("package", "onnx")
    weight_settings: ClassVar[dict[str, str]] = {"num_neighbors": "model.num_neighbors"}

    def __init__(
        self,
        num_nodes: PositiveInt | None = None,
        num_neighbors: PositiveInt = 20,
        hidden: PositiveInt = 172,
        time_dim: PositiveInt = 100,
        num_layers: PositiveInt = 2,
        dropout: Annotated[float, Range(0, 1, max_open=True)] = 0.2,
        token_factor: Positive = 0.5,
        channel_factor: Positive = 4.0,
        explainer: bool = True,
        info_weight: NonNegative = 0.1,
        dis_weight: NonNegative = 0.1,
        init_r: Probability = 0.7,
        decay_interval: PositiveInt = 5,
        decay_r: Probability = 0.1,
        final_r: Probability = 0.5,
        mask_temperature: Positive = 1.0,
        optimizer: dict | None = None,
        disc_lr: Positive = 1e-4,
        fidelity_levels: list[Probability] | None = None,
        edge_feat_dim: NonNegativeInt | None = None,
        history_path: str | None = None,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.net: STTGExplainerNet | None = None
        if num_nodes is not None:
            self._build(num_nodes, edge_feat_dim or 0)
        self._outputs: dict[str, list] = {}

    @classmethod
    def sizes_from_state(cls, state: dict) -> dict:
        """N from ``net.node_emb.weight`` (rows - 1) and F from ``net.token_proj.weight`` (columns - H - d): what
        ``init_from`` / ``zoo.load`` size the network with when the saved hparams leave them ``None``."""
        if "net.node_emb.weight" not in state:
            return {}
        emb, proj, omega = state["net.node_emb.weight"], state["net.token_proj.weight"], state["net.time_enc.omega"]
        return {"num_nodes": int(emb.shape[0] - 1), "edge_feat_dim": int(proj.shape[1] - emb.shape[1] - omega.numel())}

    # ------------------------------------------------------------------ build
    def _build(self, num_nodes: int, edge_feat_dim: int) -> None:
        h = self.hparams
        self.net = STTGExplainerNet(
            num_nodes,
            h.num_neighbors,
            h.hidden,
            h.time_dim,
            h.num_layers,
            h.dropout,
            h.token_factor,
            h.channel_factor,
            edge_feat_dim,
            h.explainer,
            h.get("mask_temperature", 1.0),
        )
        self.register_buffer("raw_node_ids", torch.full((num_nodes + 1,), -1, dtype=torch.long))

    def _transfer_to(self, num_nodes: int, path: str) -> None:
        """Re-initialise the node-indexed head keys (``net.node_emb``, ``raw_node_ids``) for a graph of
        ``num_nodes`` nodes, keeping every other loaded weight (fine-tuning zoo weights on another graph)."""
        old = self.net.node_emb.num_embeddings - 1
        emb = self.net.node_emb
        self.net.node_emb = torch.nn.Embedding(num_nodes + 1, emb.embedding_dim, padding_idx=0).to(emb.weight.device)
        self.raw_node_ids = torch.full((num_nodes + 1,), -1, dtype=torch.long, device=self.raw_node_ids.device)
        self.hparams.num_nodes = num_nodes
        _log.warning(
            "init_from %s: %s has %d nodes, the weights %d; re-initialised head keys "
            "['net.node_emb.weight', 'raw_node_ids'] (node embeddings do not transfer across node sets)",
            self.init_from_ref,
            path,
            num_nodes,
            old,
        )

    def setup(self, stage: str) -> None:
        """Build the network from the datamodule's graph (N, F, Δ, id map) and check K agrees; after ``init_from``
        on a graph with another node count, re-initialise the node-indexed head keys (:meth:`_transfer_to`)."""
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if dm is None:
            return
        dm.setup(stage)
        if dm.num_neighbors != self.hparams.num_neighbors:
            raise RecipeError(
                f"data.num_neighbors={dm.num_neighbors} differs from model.num_neighbors="
                f"{self.hparams.num_neighbors}; set both to the same K"
            )
        if self.net is None:
            self.hparams.num_nodes, self.hparams.edge_feat_dim = dm.num_nodes, dm.edge_feat_dim
            self._build(dm.num_nodes, dm.edge_feat_dim)
        elif self.net.node_emb.num_embeddings != dm.num_nodes + 1:
            if self.init_from_ref is None or stage != "fit":
                raise ValueError(
                    f"model.num_nodes={self.net.node_emb.num_embeddings - 1} but {dm.path} has {dm.num_nodes} nodes"
                )
            self._transfer_to(dm.num_nodes, dm.path)
        if self.net.token_proj.in_features != self.hparams.hidden + self.hparams.time_dim + dm.edge_feat_dim:
            raise ValueError(
                f"{dm.path} has {dm.edge_feat_dim} edge-feature columns; the model was built for "
                f"{self.net.token_proj.in_features - self.hparams.hidden - self.hparams.time_dim}"
            )
        if stage == "fit":
            d, tr = dm.graph.data, dm.split.train
            self.net.time_scale.fill_(max_inter_event_gap(d.src[tr], d.dst[tr], d.t[tr]))
            self.raw_node_ids.copy_(torch.as_tensor(dm.graph.raw_node_ids))
            self.hparams.history_path = dm.path

    def configure_optimizers(self):
        """Main optimiser over everything but the discriminator; Adam(disc_lr) for the discriminator."""
        # a list, not a set: the optimiser's state is restored by parameter position, and a set orders by address
        disc = list(self.net.discriminator.parameters()) if self.hparams.explainer else []
        main = [p for p in self.parameters() if p.requires_grad and all(p is not q for q in disc)]
        cfg = self.hparams.optimizer or {"name": "adam", "lr": 1e-4}
        built = build_optimizer(main, cfg, total_steps=self.trainer.estimated_stepping_batches)
        opt, sched = (built["optimizer"], [built["lr_scheduler"]]) if isinstance(built, dict) else (built, [])
        opts = [opt] + ([torch.optim.Adam(disc, lr=self.hparams.disc_lr)] if disc else [])
        return opts, sched

    # ---------------------------------------------------------------- training
    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        """One step: discriminator update (own optimiser), then BCE + λ_info·KL + λ_dis·L_dis on the model."""
        h = self.hparams
        opts = self.optimizers()
        opts = opts if isinstance(opts, list) else [opts]
        out = self.net(**pos_neg_inputs(batch))
        b = batch["src"].numel()
        y = torch.cat([torch.ones(b), torch.zeros(b)]).to(out["logit"])
        bce = F.binary_cross_entropy_with_logits(out["logit"], y)
        loss, logs = bce, {"train/bce": bce}
        if h.explainer:
            r = r_schedule(self.current_epoch + 1, h.init_r, h.decay_interval, h.decay_r, h.final_r)
            info = bernoulli_kl(out["s"][:b], r, out["valid"][:b]) + bernoulli_kl(out["s"][b:], r, out["valid"][b:])
            loss = loss + h.info_weight * info
            logs |= {"train/info": info, "train/r": float(r)}
            if h.dis_weight > 0:
                perm = permute_within_groups(y)
                hs, ht = out["h_S"], out["h_T"]
                d_loss = discriminator_loss(
                    self.net.discriminate(hs.detach(), ht.detach(), y),
                    self.net.discriminate(hs.detach(), ht[perm].detach(), y),
                )
                opts[1].zero_grad()
                self.manual_backward(d_loss)
                opts[1].step()
                dis = redundancy_loss(self.net.discriminate(hs, ht, y), self.net.discriminate(hs, ht[perm].detach(), y))
                loss = loss + h.dis_weight * dis
                logs |= {"train/disc_loss": d_loss, "train/dis": dis}
        opts[0].zero_grad()
        self.manual_backward(loss)
        opts[0].step()
        scheds = self.lr_schedulers()
        for sched in scheds if isinstance(scheds, list) else ([scheds] if scheds is not None else []):
            sched.step()
        self.log_dict(logs | {"train/loss": loss}, batch_size=b)  # one call: logging is ~5% of a CPU step
        return loss

    # -------------------------------------------------------------- evaluation
    def _levels(self) -> list[float]:
        """Fidelity sparsity levels: the hparam, the default when ``None``, none when ``[]``."""
        levels = self.hparams.fidelity_levels
        return list(FIDELITY_LEVELS if levels is None else levels)

    def _eval_step(self, batch: dict, stage: str) -> None:
        out = self.net(**pos_neg_inputs(batch))
        b = batch["src"].numel()
        rows = batch["ind_rows"]
        rec = {
            "pos": out["logit"][:b],
            "neg": out["logit"][b:],
            "ind_pos": out["logit"][:b][rows],
            "ind_neg": negative_logits(self.net, batch, "ind")[:, 0],
        }
        if stage == "test" and "mrr_neg" in batch:
            rec["rr"] = reciprocal_ranks(rec["pos"], negative_logits(self.net, batch, "mrr"))
            rec["ind_rr"] = reciprocal_ranks(rec["ind_pos"], negative_logits(self.net, batch, "indmrr"))
        if stage == "test" and self.hparams.explainer:
            if self._levels():
                rec["fid"] = fidelity_agreement(self.net, pos_neg_inputs(batch), out["s"], self._levels(), out["logit"])
            seen = torch.cat([batch["src_nbr_seen"], batch["dst_nbr_seen"]], 1)
            valid = out["valid"][:b]
            rec["rho"], rec["seen"], rec["counts"] = out["rho"][:b][valid], seen[valid], out["counts"][:b][valid]
            rec["stability"] = out["stability"][:b][valid]
        self._outputs.setdefault(stage, []).append(rec)

    def _eval_epoch_end(self, stage: str) -> dict[str, float]:
        recs = self._outputs.pop(stage, [])
        if not recs:
            return {}
        cat = {k: torch.cat([r[k] for r in recs], -1 if k == "fid" else 0) for k in recs[0]}
        metrics = {f"{stage}/{k}": v for k, v in link_metrics(cat["pos"], cat["neg"]).items()}
        metrics.update({f"{stage}/{k}_inductive": v for k, v in link_metrics(cat["ind_pos"], cat["ind_neg"]).items()})
        metrics[f"{stage}/loss"] = float(
            F.binary_cross_entropy_with_logits(
                torch.cat([cat["pos"], cat["neg"]]),
                torch.cat([torch.ones_like(cat["pos"]), torch.zeros_like(cat["neg"])]),
            )
        )
        if "rr" in cat:
            metrics[f"{stage}/mrr"] = float(cat["rr"].mean())
            metrics[f"{stage}/mrr_inductive"] = float(cat["ind_rr"].mean()) if cat["ind_rr"].numel() else math.nan
        if "rho" in cat:
            metrics.update(
                {
                    f"{stage}/{k}": v
                    for k, v in stability_agreement(cat["rho"], cat["seen"], cat["counts"], cat["stability"]).items()
                }
            )
        if "fid" in cat:
            levels = self._levels()
            accs = cat["fid"].float().mean(1).tolist()
            metrics.update({f"{stage}/fidelity@{lv:g}": a for lv, a in zip(levels, accs)})
            metrics[f"{stage}/acc_auc"] = acc_auc(levels, accs)
        self.log_dict(metrics, prog_bar=stage == "val")
        return metrics

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        """Score validation positives/negatives (deterministic masks)."""
        self._eval_step(batch, "val")

    def on_validation_epoch_end(self) -> None:
        """Log ``val/ap``, ``val/auc`` and their ``_inductive`` versions, ``val/loss``."""
        self._eval_epoch_end("val")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        """Score test events; add MRR, the fidelity curve and ρ-vs-seen statistics."""
        self._eval_step(batch, "test")

    def on_test_epoch_end(self) -> None:
        """Log AP/AUC (transductive, inductive), MRR, ``fidelity@level``, ``acc_auc``, ``rho_*``."""
        self._eval_epoch_end("test")

    # ---------------------------------------------------------------- predict
    def _history(self, path: str | None):
        """The event history for ``predict_cli``: ``path``, else the training file, else the shipped file whose
        nodes match the model's id map.

        Raises:
            ValueError: no candidate file has the model's nodes.
        """
        candidates = (
            [path]
            if path
            else [self.hparams.history_path]
            + sorted(str(p) for p in resolve_path("data/temporal-graphs").glob("*.csv"))
        )
        for cand in filter(None, candidates):
            if not resolve_path(cand).is_file():
                continue
            graph = read_events(resolve_path(cand))
            if torch.equal(torch.as_tensor(graph.raw_node_ids), self.raw_node_ids.cpu()):
                return graph
        raise ValueError(
            f"no history file with this model's nodes among {[c for c in candidates if c]}; pass "
            "history=PATH (the event CSV the model was trained on)"
        )

    def export_graph(self) -> tuple:
        """The scorer for ONNX: ``(u, v, t, u_nbr, u_nbr_t, u_valid, v_nbr, v_nbr_t, v_valid[, u_msg, v_msg])`` ->
        ``(logit (B,), s (B, 2K) importance, stability (B, 2K))`` (any batch size; example: 3 events with random
        recent-K neighbourhoods, times in float64 as the sampler gives them)."""
        from torch.export import Dim

        from zoo.core.export import Bound

        g, (B, K) = torch.Generator().manual_seed(0), (3, self.hparams.num_neighbors)
        n, dims = self.net.node_emb.num_embeddings - 1, {0: Dim("batch", min=1, max=65536)}
        side = lambda: [
            torch.randint(1, n + 1, (B, K), generator=g),
            torch.sort(torch.rand(B, K, generator=g, dtype=torch.float64) * 1e6, 1).values,
            torch.rand(B, K, generator=g) > 0.3,
        ]
        args = [
            torch.randint(1, n + 1, (B,), generator=g),
            torch.randint(1, n + 1, (B,), generator=g),
            torch.full((B,), 2e6, dtype=torch.float64),
            *side(),
            *side(),
        ]
        names = ["u", "v", "t", "u_nbr", "u_nbr_t", "u_valid", "v_nbr", "v_nbr_t", "v_valid"]
        edge_dim = self.net.token_proj.in_features - self.hparams.hidden - self.hparams.time_dim
        if edge_dim > 0:
            args += [torch.randn(B, K, edge_dim, generator=g) for _ in "uv"]
            names += ["u_msg", "v_msg"]
        outputs = ("logit", "s", "stability") if self.hparams.explainer else ("logit",)
        return Bound(self.net, None, tuple(names), outputs), tuple(args), tuple(dims for _ in args)

    predict_schema: ClassVar = {
        "src": int,
        "dst": int,
        "t": float,
        "score": float,
        "logit": float,
        "stability_threshold": float,
        "stability_share": float,
        "explanation": [
            {"endpoint": int, "neighbor": int, "time": float, "importance": float, "stability": float, "pattern": str}
        ],
    }

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record` as indented JSON text."""
        return json.dumps(self.predict_record(inputs, out_dir), indent=2)

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> dict:
        """``zoo predict st-tgexplainer.<tag> SRC DST TIME [top=10] [history=PATH]``.

        Scores the interaction ``SRC -> DST`` at ``TIME`` (file ids, file time unit) from the recent-K history
        strictly before ``TIME`` and lists the most important explanatory events with their
        stability/transition split; with ``out_dir`` it also writes ``explanation.png``.

        Returns:
            ``{"src", "dst", "t", "score", "logit", "stability_threshold", "explanation": [...],
            "stability_share", "png"}``; a token is a stability pattern when its oriented stability reaches
            ``stability_threshold`` (:meth:`STTGExplainerNet.stability_threshold`).

        Raises:
            ValueError: wrong arguments, an unknown node id, the plain GraphMixer (nothing to explain), or no
                history file whose nodes match the training file's.
        """
        if not self.hparams.explainer:
            raise ValueError("this model was trained with explainer=false (plain GraphMixer): nothing to explain")
        pos = [a for a in inputs if "=" not in a]
        kw = dict(a.split("=", 1) for a in inputs if "=" in a)
        if len(pos) != 3 or set(kw) - {"top", "history"}:
            raise ValueError(f"usage: SRC DST TIME [top=N] [history=PATH]; got {inputs}")
        graph = self._history(kw.get("history"))
        try:
            u, v = graph.node_index(int(pos[0])), graph.node_index(int(pos[1]))
        except KeyError as e:
            raise ValueError(str(e.args[0])) from None
        t = float(pos[2])
        d = graph.data
        sampler = RecentNeighborSampler(d.src, d.dst, d.t, torch.arange(d.num_events), graph.num_nodes)
        k = self.hparams.num_neighbors
        ev = {"u": torch.tensor([u]), "v": torch.tensor([v]), "t": torch.tensor([t], dtype=torch.float64)}
        for side, node in (("u", u), ("v", v)):
            ids, tt, ee, ok = sampler.sample(torch.tensor([node]), ev["t"], k)
            ev.update({f"{side}_nbr": ids, f"{side}_nbr_t": tt, f"{side}_valid": ok})
            if self.net.token_proj.in_features > self.hparams.hidden + self.hparams.time_dim:
                ev[f"{side}_msg"] = d.msg[ee.clamp(min=0)] * ok.unsqueeze(-1)
        ev = {key: val.to(self.device) for key, val in ev.items()}
        self.eval()
        with torch.no_grad():
            out = self.net(**ev)
        threshold = self.net.stability_threshold()
        recs = explanation_records(out, ev, self.raw_node_ids.cpu(), int(kw.get("top", 10)), threshold)
        score = float(torch.sigmoid(out["logit"][0]))
        result = {
            "src": int(pos[0]),
            "dst": int(pos[1]),
            "t": t,
            "score": round(score, 6),
            "logit": round(float(out["logit"][0]), 6),
            "stability_threshold": round(threshold, 4),
            "explanation": recs,
            "stability_share": round(sum(r["pattern"] == "stability" for r in recs) / max(1, len(recs)), 4),
        }
        if out_dir:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            result["png"] = plot_explanation(
                int(pos[0]), int(pos[1]), t, score, recs, str(Path(out_dir) / "explanation.png")
            )
        return result
