"""LightningDataModule for future-link prediction on a temporal interaction graph.

Input schema (``path=``): a CSV in the DyGLib layout ``u, i, ts, label, idx[, feature columns...]`` or the
SNAP layout ``src, dst, timestamp[, rating]`` (see :func:`.data.read_events`). ``u``/``i`` are integer node
ids, ``ts`` a number (Unix seconds in the shipped files). A malformed row raises ``DataError("file:line: ...")``, in
the recipe check before torch is imported for a user's file (``data.EVENTS``).

Every batch is a dict of tensors, already holding the recent-K neighbourhoods, so the model never sees the
graph (and cannot look past an event's time): for the roles ``src``, ``dst`` and ``neg`` (the sampled
negative destination) it holds ``<role>_nbr`` (neighbour ids), ``<role>_nbr_t`` (their times),
``<role>_nbr_eid`` (event ids, -1 = padding), ``<role>_nbr_valid`` (bool), ``<role>_nbr_seen`` (bool,
ground truth: that neighbour interaction repeated an earlier one) and, with edge features,
``<role>_nbr_msg``; all ``(B, K[, F])``. Evaluation batches add ``is_new`` (inductive subset), ``ind_rows``
``(B',)`` (its rows) and ``ind_neg`` ``(B', 1)`` with the ``ind_nbr*`` blocks ``(B', 1, K)``: negatives for the
inductive events drawn by a separate sampler over the nodes unseen in training. With ``mrr_negatives = M > 0``
they add ``mrr_neg`` ``(B, M)`` (TGB ``hist_rnd`` negatives) and ``indmrr_neg`` ``(B', M)`` (uniform over unseen
nodes), each with its ``<role>_nbr*`` blocks ``(·, M, K)``.

Evaluation negatives (fixed per split, drawn once in ``setup``):

* transductive AP/AUC: one collision-checked negative per event, uniform over all destinations (DyGLib's random);
* transductive MRR: M negatives per event, TGB's ``hist_rnd``: ⌊mrr_hist_ratio·M⌋ historical destinations of the
  source (training edges for validation, training + validation edges for test) and the rest uniform
  (:class:`.negatives.HistoricalRandomNegatives`);
* inductive AP/AUC (1 negative) and MRR (M negatives): the events touching a node unseen in training, against
  destinations drawn from the nodes unseen in training that occur after the training period, with their own
  random stream (seed ``neg_seed + 2``), as DyGLib keeps a separate negative sampler for the new-node sets.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import lightning as L
import torch
from torch.utils.data import DataLoader

from zoo.core.constraints import Fraction, NonNegativeInt, OpenUnit, PositiveInt, Probability
from zoo.core.data import repo_root
from zoo.methods.st_tgexplainer.data import (
    EVENTS,
    RecentNeighborSampler,
    TemporalGraph,
    chronological_split,
    pair_seen_before,
    read_events,
)
from zoo.methods.st_tgexplainer.negatives import CollisionCheckedNegatives, HistoricalRandomNegatives, unseen_nodes

DEFAULT_PATH = "data/temporal-graphs/collegemsg.csv"
_log = logging.getLogger("zoo")


def resolve_path(path: str) -> Path:
    """A data path as given, or relative to the repository root when it does not exist as given."""
    p = Path(path)
    return p if p.exists() or p.is_absolute() else repo_root() / p


class TemporalLinkDataModule(L.LightningDataModule):
    """Chronological link prediction batches with collision-checked negatives.

    Args:
        path: event CSV (default: the shipped CollegeMsg).
        batch_size: events per batch (B); each batch also carries B negatives.
        num_neighbors: K, recent neighbours per endpoint; must equal the model's ``num_neighbors``.
        val_ratio, test_ratio: chronological fractions (0.15 / 0.15 as in DyGLib).
        new_node_ratio: fraction of nodes held out of training for the inductive test (DyGLib: 0.1).
        split_seed: seed of the held-out node draw.
        neg_seed: seed of the fixed validation/test negatives. Training negatives are redrawn every batch from the
            global torch RNG, which ``zoo train`` seeds per batch position (``zoo.core.resumable``), so a resumed run
            draws the negatives the uninterrupted run drew.
        mrr_negatives: M negatives per test event for MRR (0 = no MRR).
        mrr_hist_ratio: fraction of the M MRR negatives that are historical destinations (TGB ``hist_rnd``: 0.5).
        shuffle: shuffle training batches (the authors' default ``--shuffle True``; order does not leak
            because neighbours are chosen by timestamp).
        max_train_events: use only the first this-many training events (tiny overlays; ``None`` = all).
        max_eval_events: evaluate on only the first this-many val/test events (``None`` = all).
        num_workers: DataLoader workers.
    """

    def __init__(
        self,
        path: Annotated[str, EVENTS] = DEFAULT_PATH,
        batch_size: PositiveInt = 200,
        num_neighbors: PositiveInt = 20,
        val_ratio: OpenUnit = 0.15,
        test_ratio: OpenUnit = 0.15,
        new_node_ratio: Fraction = 0.1,
        split_seed: NonNegativeInt = 2020,
        neg_seed: NonNegativeInt = 0,
        mrr_negatives: NonNegativeInt = 0,
        mrr_hist_ratio: Probability = 0.5,
        shuffle: bool = True,
        max_train_events: PositiveInt | None = None,
        max_eval_events: PositiveInt | None = None,
        num_workers: NonNegativeInt = 0,
    ):
        super().__init__()
        if batch_size < 1 or num_neighbors < 1 or mrr_negatives < 0:
            raise ValueError(
                f"data: batch_size={batch_size}, num_neighbors={num_neighbors} must be >= 1 and "
                f"mrr_negatives={mrr_negatives} >= 0"
            )
        self.path = str(path)
        self.batch_size, self.num_neighbors = int(batch_size), int(num_neighbors)
        self.val_ratio, self.test_ratio, self.new_node_ratio = val_ratio, test_ratio, new_node_ratio
        self.split_seed, self.neg_seed, self.mrr_negatives = split_seed, neg_seed, int(mrr_negatives)
        self.mrr_hist_ratio = float(mrr_hist_ratio)
        self.shuffle, self.num_workers = shuffle, num_workers
        self.max_train_events, self.max_eval_events = max_train_events, max_eval_events
        self.graph: TemporalGraph | None = None

    # ------------------------------------------------------------------ setup
    def setup(self, stage: str | None = None) -> None:
        """Read the file, split it, build both neighbour samplers and the fixed evaluation negatives."""
        if self.graph is not None:
            return
        self.graph = read_events(resolve_path(self.path))
        d = self.graph.data
        self.split = chronological_split(d, self.val_ratio, self.test_ratio, self.new_node_ratio, self.split_seed)
        eid = torch.arange(d.num_events)
        tr = self.split.train
        self.train_sampler = RecentNeighborSampler(d.src[tr], d.dst[tr], d.t[tr], eid[tr], self.num_nodes)
        self.full_sampler = RecentNeighborSampler(d.src, d.dst, d.t, eid, self.num_nodes)
        self.train_negatives = CollisionCheckedNegatives(d.dst[tr], d.src, d.dst, d.t)
        self.eval_negatives = CollisionCheckedNegatives(d.dst, d.src, d.dst, d.t)
        self.seen = pair_seen_before(d.src, d.dst, d.t)
        self.train_idx = eid[tr][: self.max_train_events]
        self.val_idx = eid[self.split.val][: self.max_eval_events]
        self.test_idx = eid[self.split.test][: self.max_eval_events]
        sp = self.split
        unseen = unseen_nodes(d.src, d.dst, tr, d.t > sp.val_time)
        if unseen.numel() < 2:  # a tiny graph: too few new nodes to draw from, fall back to every destination
            _log.warning(
                "%s: %d node(s) unseen in training; inductive negatives are drawn from all destinations",
                self.path,
                unseen.numel(),
            )
            unseen = d.dst
        self.inductive_negatives = CollisionCheckedNegatives(unseen, d.src, d.dst, d.t)
        g, g_ind = torch.Generator().manual_seed(self.neg_seed), torch.Generator().manual_seed(self.neg_seed + 2)
        self.fixed_neg, self.fixed_mrr_neg, self.fixed_ind_neg, self.fixed_ind_mrr_neg = {}, {}, {}, {}
        for name, idx, hist in (("val", self.val_idx, tr), ("test", self.test_idx, tr | sp.val)):
            src, t = d.src[idx], d.t[idx]
            self.fixed_neg[name] = self.eval_negatives.sample(src, t, 1, g)[:, 0]
            new = (sp.new_node_val | sp.new_node_test)[idx]
            self.fixed_ind_neg[name] = self.inductive_negatives.sample(src[new], t[new], 1, g_ind)
            if self.mrr_negatives:
                hist_rnd = HistoricalRandomNegatives(
                    d.dst, d.src[hist], d.dst[hist], self.eval_negatives, self.mrr_hist_ratio
                )
                self.fixed_mrr_neg[name] = hist_rnd.sample(src, t, self.mrr_negatives, g)
                self.fixed_ind_mrr_neg[name] = self.inductive_negatives.sample(
                    src[new], t[new], self.mrr_negatives, g_ind
                )

    @property
    def num_nodes(self) -> int:
        """N (read from the file in ``setup``)."""
        if self.graph is None:
            raise RuntimeError("TemporalLinkDataModule.setup() has not run yet")
        return self.graph.num_nodes

    @property
    def edge_feat_dim(self) -> int:
        """F, the number of edge-feature columns (0 for the shipped SNAP files)."""
        return int(self.graph.data.msg.shape[1])

    # ------------------------------------------------------------ batching
    def neighbours(self, sampler: RecentNeighborSampler, nodes: torch.Tensor, t: torch.Tensor, role: str) -> dict:
        """The ``<role>_nbr*`` block of a batch for query nodes ``(...,)`` at times ``(...,)``."""
        ids, tt, ee, valid = sampler.sample(nodes, t, self.num_neighbors)
        out = {
            f"{role}_nbr": ids,
            f"{role}_nbr_t": tt,
            f"{role}_nbr_eid": ee,
            f"{role}_nbr_valid": valid,
            f"{role}_nbr_seen": self.seen[ee.clamp(min=0)] & valid,
        }
        if self.edge_feat_dim:
            msg = self.graph.data.msg[ee.clamp(min=0)]
            out[f"{role}_nbr_msg"] = msg * valid.unsqueeze(-1)
        return out

    def make_batch(
        self,
        idx: torch.Tensor,
        neg: torch.Tensor,
        sampler: RecentNeighborSampler,
        mrr_neg: torch.Tensor | None = None,
        ind_neg: torch.Tensor | None = None,
        ind_mrr_neg: torch.Tensor | None = None,
    ) -> dict:
        """Assemble one batch for events ``idx`` ``(B,)`` with negatives ``neg`` ``(B,)``; evaluation adds the MRR
        negatives ``(B, M)`` and the inductive rows' negatives ``(B', 1)`` and ``(B', M)``."""
        d = self.graph.data
        src, dst, t = d.src[idx], d.dst[idx], d.t[idx]
        batch = {
            "eid": idx,
            "src": src,
            "dst": dst,
            "neg": neg,
            "t": t,
            "is_new": self.split.new_node_val[idx] | self.split.new_node_test[idx],
            "pos_seen": self.seen[idx],
        }
        for role, nodes in (("src", src), ("dst", dst), ("neg", neg)):
            batch.update(self.neighbours(sampler, nodes, t, role))
        rows = torch.nonzero(batch["is_new"]).squeeze(1)
        for role, negs, tt in (("mrr", mrr_neg, t), ("ind", ind_neg, t[rows]), ("indmrr", ind_mrr_neg, t[rows])):
            if negs is not None:
                batch[f"{role}_neg"] = negs
                batch.update(self.neighbours(sampler, negs, tt.unsqueeze(1).expand_as(negs), role))
        if ind_neg is not None:
            batch["ind_rows"] = rows
        return batch

    def _train_collate(self, idx: list) -> dict:
        idx = torch.as_tensor(idx, dtype=torch.long)
        d = self.graph.data
        neg = self.train_negatives.sample(d.src[idx], d.t[idx], 1)[:, 0]  # the global RNG (per worker: its own)
        return self.make_batch(idx, neg, self.train_sampler)

    def _eval_collate(self, name: str):
        split_idx = getattr(self, f"{name}_idx")
        pos_of = {int(e): k for k, e in enumerate(split_idx)}
        new = (self.split.new_node_val | self.split.new_node_test)[split_idx]
        ind_pos = torch.cumsum(new.long(), 0) - 1  # row of each inductive event in the fixed inductive negatives

        def collate(idx: list) -> dict:
            rows = torch.as_tensor([pos_of[int(e)] for e in idx], dtype=torch.long)
            ind = ind_pos[rows[new[rows]]]
            mrr = self.fixed_mrr_neg[name][rows] if name in self.fixed_mrr_neg else None
            ind_mrr = self.fixed_ind_mrr_neg[name][ind] if name in self.fixed_ind_mrr_neg else None
            return self.make_batch(
                torch.as_tensor(idx, dtype=torch.long),
                self.fixed_neg[name][rows],
                self.full_sampler,
                mrr,
                self.fixed_ind_neg[name][ind],
                ind_mrr,
            )

        return collate

    def train_dataloader(self) -> DataLoader:
        """Shuffled (by default) batches of training events, negatives redrawn every batch."""
        return DataLoader(
            self.train_idx.tolist(),
            batch_size=self.batch_size,
            shuffle=self.shuffle,
            collate_fn=self._train_collate,
            num_workers=self.num_workers,
        )

    def val_dataloader(self) -> DataLoader:
        """Chronological validation batches with fixed negatives; neighbours from the full history."""
        return DataLoader(
            self.val_idx.tolist(),
            batch_size=self.batch_size,
            shuffle=False,
            collate_fn=self._eval_collate("val"),
            num_workers=self.num_workers,
        )

    def test_dataloader(self) -> DataLoader:
        """Chronological test batches (transductive; ``is_new`` marks the inductive subset)."""
        return DataLoader(
            self.test_idx.tolist(),
            batch_size=self.batch_size,
            shuffle=False,
            collate_fn=self._eval_collate("test"),
            num_workers=self.num_workers,
        )
