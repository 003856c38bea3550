"""TGN baseline (Rossi et al. 2020) as in torch_geometric's ``examples/tgn.py``, on our splits and negatives.

The network is the example's: ``TGNMemory`` (identity message, last aggregator, GRU memory), a one-layer
``TransformerConv`` graph-attention embedding over the ``LastNeighborLoader`` neighbourhood (size 10) and the
example's link predictor; sizes ``memory_dim = time_dim = embedding_dim = 100``, Adam lr 1e-4, batches of 200
chronological events. What differs from the example (*ours*): negatives are the datamodule's
collision-checked ones (the example draws ``randint(min_dst, max_dst)``), evaluation uses the same fixed
negatives as ST-TGExplainer, and times are shifted to start at 0.
"""

from __future__ import annotations

import math
import time

import torch
from torch import nn
from torch_geometric.nn import TransformerConv
from torch_geometric.nn.models.tgn import IdentityMessage, LastAggregator, LastNeighborLoader, TGNMemory

from zoo.methods.st_tgexplainer.datamodule import TemporalLinkDataModule
from zoo.methods.st_tgexplainer.metrics import link_metrics, reciprocal_ranks


class GraphAttentionEmbedding(nn.Module):
    """The example's embedding: TransformerConv(memory -> embedding, 2 heads) with ``[φ(Δt) ; msg]`` edges."""

    def __init__(self, in_channels: int, out_channels: int, msg_dim: int, time_enc: nn.Module):
        super().__init__()
        self.time_enc = time_enc
        self.conv = TransformerConv(
            in_channels, out_channels // 2, heads=2, dropout=0.1, edge_dim=msg_dim + time_enc.out_channels
        )

    def forward(self, x, last_update, edge_index, t, msg):
        """``x`` ``(n, in)`` memories; ``edge_index`` ``(2, m)``; ``t``/``msg`` per edge -> ``(n, out)``."""
        rel_t = self.time_enc((last_update[edge_index[0]] - t).to(x.dtype))
        return self.conv(x, edge_index, torch.cat([rel_t, msg], -1))


class LinkPredictor(nn.Module):
    """The example's predictor ``lin_final(relu(lin_src(z_u) + lin_dst(z_v)))`` (logits)."""

    def __init__(self, channels: int):
        super().__init__()
        self.lin_src, self.lin_dst = nn.Linear(channels, channels), nn.Linear(channels, channels)
        self.lin_final = nn.Linear(channels, 1)

    def forward(self, z_src, z_dst):
        """``(B, C), (B, C) -> (B,)`` logits."""
        return self.lin_final(torch.relu(self.lin_src(z_src) + self.lin_dst(z_dst))).squeeze(-1)


class TGN(nn.Module):
    """Memory + attention embedding + predictor, with the streaming state (memory, last neighbours).

    Args:
        num_nodes: N (ids ``1..N``).
        msg_dim: raw message size (edge features; 1 zero column when the data has none).
        memory_dim, time_dim, embedding_dim: 100 in the example. neighbors: LastNeighborLoader size (10).
        num_events: capacity of the event-history buffer (the whole stream).
    """

    def __init__(
        self,
        num_nodes: int,
        msg_dim: int,
        memory_dim: int = 100,
        time_dim: int = 100,
        embedding_dim: int = 100,
        neighbors: int = 10,
        num_events: int = 0,
    ):
        super().__init__()
        self.memory = TGNMemory(
            num_nodes + 1,
            msg_dim,
            memory_dim,
            time_dim,
            message_module=IdentityMessage(msg_dim, memory_dim, time_dim),
            aggregator_module=LastAggregator(),
        )
        self.gnn = GraphAttentionEmbedding(memory_dim, embedding_dim, msg_dim, self.memory.time_enc)
        self.link_pred = LinkPredictor(embedding_dim)
        self.loader = LastNeighborLoader(num_nodes + 1, size=neighbors)
        self.register_buffer("assoc", torch.empty(num_nodes + 1, dtype=torch.long), persistent=False)
        self.register_buffer("hist_t", torch.zeros(num_events, dtype=torch.long), persistent=False)
        self.register_buffer("hist_msg", torch.zeros(num_events, msg_dim), persistent=False)
        self.inserted = 0

    def reset_state(self) -> None:
        """Empty memory and neighbourhoods (start of a pass over the stream)."""
        self.memory.reset_state()
        self.loader.reset_state()
        self.inserted = 0

    def score(self, src: torch.Tensor, cands: torch.Tensor) -> torch.Tensor:
        """Logits of ``src`` ``(B,)`` against every column of ``cands`` ``(B, C)`` -> ``(B, C)``."""
        n_id = torch.cat([src, cands.reshape(-1)]).unique()
        n_id, edge_index, e_id = self.loader(n_id)
        self.assoc[n_id] = torch.arange(n_id.numel(), device=n_id.device)
        z, last_update = self.memory(n_id)
        z = self.gnn(z, last_update, edge_index, self.hist_t[e_id], self.hist_msg[e_id])
        zs = z[self.assoc[src]].unsqueeze(1).expand(-1, cands.shape[1], -1)
        return self.link_pred(zs, z[self.assoc[cands]])

    def observe(self, src, dst, t, msg) -> None:
        """Write the true events of a batch into memory and the neighbour loader (after scoring it)."""
        self.memory.update_state(src, dst, t, msg)
        self.loader.insert(src, dst)
        n = src.numel()
        self.hist_t[self.inserted : self.inserted + n] = t
        self.hist_msg[self.inserted : self.inserted + n] = msg
        self.inserted += n


def tgn_inputs(dm: TemporalLinkDataModule, idx: torch.Tensor):
    """``(src, dst, t, msg)`` of events ``idx`` for TGN: times shifted to start at 0 and cast to int64."""
    d = dm.graph.data
    t = (d.t[idx] - d.t[0]).round().long()
    msg = d.msg[idx] if d.msg.shape[1] else torch.zeros(idx.numel(), 1)
    return d.src[idx], d.dst[idx], t, msg


def build_tgn(dm: TemporalLinkDataModule, **kw) -> TGN:
    """A TGN sized for ``dm``'s graph (``kw``: ``memory_dim``, ``time_dim``, ``embedding_dim``, ``neighbors``)."""
    return TGN(dm.num_nodes, max(1, dm.edge_feat_dim), num_events=dm.graph.data.num_events, **kw)


def train_epoch(
    model: TGN,
    dm: TemporalLinkDataModule,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
    batch_size: int = 200,
    max_batches: int | None = None,
) -> float:
    """One chronological pass over the training events (the example's ``train()``); returns the mean loss."""
    model.train()
    model.reset_state()
    idx_all = dm.train_idx
    total, count = 0.0, 0
    for k, start in enumerate(range(0, idx_all.numel(), batch_size)):
        if max_batches is not None and k >= max_batches:
            break
        idx = idx_all[start : start + batch_size]
        src, dst, t, msg = tgn_inputs(dm, idx)
        neg = dm.train_negatives.sample(src, dm.graph.data.t[idx], 1, generator)
        optimizer.zero_grad()
        logits = model.score(src, torch.stack([dst, neg[:, 0]], 1))
        y = torch.zeros_like(logits)
        y[:, 0] = 1
        loss = nn.functional.binary_cross_entropy_with_logits(logits, y) * 2  # = BCE(pos) + BCE(neg)
        model.observe(src, dst, t, msg)
        loss.backward()
        optimizer.step()
        model.memory.detach()
        total, count = total + float(loss.detach()) * idx.numel(), count + idx.numel()
    return total / max(1, count)


@torch.no_grad()
def evaluate(model: TGN, dm: TemporalLinkDataModule, batch_size: int = 200) -> dict[str, float]:
    """Stream validation then test events after training (memory continues from the training pass).

    Returns:
        ``val/ap``, ``val/auc`` (what early stopping watches), ``test/ap``, ``test/auc``, ``test/ap_inductive``,
        ``test/auc_inductive`` and, when the datamodule has MRR negatives, ``test/mrr`` and ``test/mrr_inductive``;
        the same fixed negatives as the other models (the inductive metrics against the datamodule's separate
        inductive negatives).
    """
    model.eval()
    out = {}
    for name in ("val", "test"):
        idx_all = getattr(dm, f"{name}_idx")
        new_all = (dm.split.new_node_val | dm.split.new_node_test)[idx_all]
        ind_pos = torch.cumsum(new_all.long(), 0) - 1
        mrr = name == "test" and name in dm.fixed_mrr_neg
        pos, neg, rr, ind_p, ind_n, ind_rr = [], [], [], [], [], []
        for start in range(0, idx_all.numel(), batch_size):
            rows = slice(start, start + batch_size)
            idx = idx_all[rows]
            src, dst, t, msg = tgn_inputs(dm, idx)
            cands = [dst.unsqueeze(1), dm.fixed_neg[name][rows].unsqueeze(1)]
            if mrr:
                cands.append(dm.fixed_mrr_neg[name][rows])
            logits = model.score(src, torch.cat(cands, 1))
            pos.append(logits[:, 0])
            neg.append(logits[:, 1])
            if mrr:
                rr.append(reciprocal_ranks(logits[:, 0], logits[:, 2:]))
            new = new_all[rows]
            if new.any():
                ind = ind_pos[rows][new]
                ind_cands = [dst[new].unsqueeze(1), dm.fixed_ind_neg[name][ind]]
                if mrr:
                    ind_cands.append(dm.fixed_ind_mrr_neg[name][ind])
                ind_logits = model.score(src[new], torch.cat(ind_cands, 1))
                ind_p.append(ind_logits[:, 0])
                ind_n.append(ind_logits[:, 1])
                if mrr:
                    ind_rr.append(reciprocal_ranks(ind_logits[:, 0], ind_logits[:, 2:]))
            model.observe(src, dst, t, msg)
        if name == "val":
            out.update({f"val/{k}": v for k, v in link_metrics(torch.cat(pos), torch.cat(neg)).items()})
        if name == "test":
            out.update({f"test/{k}": v for k, v in link_metrics(torch.cat(pos), torch.cat(neg)).items()})
            empty = torch.zeros(0)
            out.update(
                {
                    f"test/{k}_inductive": v
                    for k, v in link_metrics(torch.cat(ind_p + [empty]), torch.cat(ind_n + [empty])).items()
                }
            )
            if mrr:
                out["test/mrr"] = float(torch.cat(rr).mean())
                out["test/mrr_inductive"] = float(torch.cat(ind_rr).mean()) if ind_rr else math.nan
    return out


def train_until_converged(
    model: TGN,
    dm: TemporalLinkDataModule,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
    patience: int,
    max_epochs: int,
) -> tuple[dict[str, float], dict]:
    """Train epoch by epoch with early stopping on validation AP, as ``fitting.fit_until_converged`` does for the
    Lightning models: stop once ``patience`` epochs in a row bring no new best (or at ``max_epochs``).

    Every epoch ends with :func:`evaluate` (validation, then test, streamed after the training pass), so the test
    metrics of the best-validation epoch are kept without storing weights or memory.

    Returns:
        ``(metrics of the best epoch, info)``; ``info``: ``epochs`` trained, ``best_epoch`` (1-based),
        ``best_val_ap``, ``early_stopped``, ``train_seconds`` (training passes only, evaluation excluded).

    Raises:
        ValueError: ``patience < 1`` or ``max_epochs < 1``.
    """
    if patience < 1 or max_epochs < 1:
        raise ValueError(f"need patience >= 1 and max_epochs >= 1, got {patience}, {max_epochs}")
    best, since, train_s = None, 0, 0.0
    for epoch in range(1, max_epochs + 1):
        t0 = time.perf_counter()
        train_epoch(model, dm, optimizer, generator)
        train_s += time.perf_counter() - t0
        out = evaluate(model, dm)
        if best is None or out["val/ap"] > best[0]["val/ap"]:
            best, since = (out, epoch), 0
        else:
            since += 1
        if since >= patience:
            break
    info = {
        "epochs": epoch,
        "best_epoch": best[1],
        "best_val_ap": best[0]["val/ap"],
        "early_stopped": since >= patience,
        "train_seconds": train_s,
    }
    return best[0], info
