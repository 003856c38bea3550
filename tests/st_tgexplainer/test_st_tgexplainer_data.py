"""Reading, splitting, neighbour sampling (no future leakage) and negative sampling on small known cases."""

import pytest
import torch

from zoo.core.data import DataError
from zoo.methods.st_tgexplainer.data import (
    RecentNeighborSampler,
    chronological_split,
    max_inter_event_gap,
    pair_seen_before,
    read_events,
)
from zoo.methods.st_tgexplainer.negatives import CollisionCheckedNegatives, HistoricalRandomNegatives, unseen_nodes


def write(tmp_path, text, name="g.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_dyglib_layout_with_features_and_sorting(tmp_path):
    p = write(tmp_path, ",u,i,ts,label,idx,f0,f1\n0,7,9,30,0,1,0.5,1.0\n1,9,4,10,1,2,2.0,3.0\n\n2,7,4,20,0,3,4.0,5.0\n")
    g = read_events(p)
    d = g.data
    assert d.t.tolist() == [10.0, 20.0, 30.0]
    # remapped in order of first appearance after sorting by time: 9 -> 1, 4 -> 2, 7 -> 3
    assert g.raw_node_ids.tolist() == [-1, 9, 4, 7]
    assert d.src.tolist() == [1, 3, 3] and d.dst.tolist() == [2, 2, 1]
    assert d.msg.tolist() == [[2.0, 3.0], [4.0, 5.0], [0.5, 1.0]]
    assert d.label.tolist() == [1.0, 0.0, 0.0]
    assert g.node_index(7) == 3
    with pytest.raises(KeyError):
        g.node_index(5)


def test_snap_layout_rating_becomes_sign_label(tmp_path):
    g = read_events(write(tmp_path, "src,dst,rating,timestamp\n1,2,-3,5\n2,3,4,6\n"))
    assert g.data.label.tolist() == [0.0, 1.0] and g.data.msg.shape == (2, 0)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("u,i,ts,label,idx\n1,2,3,0,1\n1,x,4,0,2\n", ":3: column 'i': 'x' is not an integer"),
        ("u,i,ts,label,idx\n1,2,3,0,1\n1,2,nan,0,2\n", ":3: column 'ts': 'nan' is not a finite number"),
        ("u,i,ts,label,idx\n1,2,3,0,1\n\n1,2,4,0\n", ":4: 4 fields, header has 5"),
        ("a,b,c\n1,2,3\n", ":1: header"),
    ],
)
def test_malformed_rows_name_their_line(tmp_path, text, needle):
    with pytest.raises(DataError, match=needle.replace("(", r"\(")):
        read_events(write(tmp_path, text))


def random_stream(n_nodes=12, n_events=300, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(1, n_nodes + 1, (n_events,), generator=g)
    dst = torch.randint(1, n_nodes + 1, (n_events,), generator=g)
    t = torch.sort(torch.randint(0, 60, (n_events,), generator=g).double()).values  # many ties
    return src, dst, t


def test_recent_neighbors_are_strictly_past_and_the_k_most_recent():
    src, dst, t = random_stream()
    eid = torch.arange(src.numel())
    sampler = RecentNeighborSampler(src, dst, t, eid, 12)
    k = 5
    q_nodes = torch.arange(0, 13).repeat_interleave(7)
    q_times = torch.linspace(-1, 70, q_nodes.numel()).double()
    ids, tt, ee, valid = sampler.sample(q_nodes, q_times, k)
    for row in range(q_nodes.numel()):
        n, qt = int(q_nodes[row]), float(q_times[row])
        # brute force: all interactions of n strictly before qt, in (time, event id) order; a self-loop is in
        # the undirected history twice, as in the authors' adjacency lists
        hist = [(float(t[e]), e, int(dst[e])) for e in range(src.numel()) if src[e] == n and t[e] < qt]
        hist += [(float(t[e]), e, int(src[e])) for e in range(src.numel()) if dst[e] == n and t[e] < qt]
        hist.sort()
        want = hist[-k:] if n > 0 else []
        got_e = ee[row][valid[row]].tolist()
        assert (tt[row][valid[row]] < qt).all()
        assert sorted(got_e) == sorted(e for _, e, _ in want)
        assert sorted(ids[row][valid[row]].tolist()) == sorted(x for _, _, x in want)
        assert (ids[row][~valid[row]] == 0).all() and (ee[row][~valid[row]] == -1).all()
        assert valid[row].tolist() == sorted(valid[row].tolist())  # left-padded


def test_split_is_chronological_and_hides_new_nodes():
    src, dst, t = random_stream(n_nodes=40, n_events=600, seed=1)
    from torch_geometric.data import TemporalData

    sp = chronological_split(TemporalData(src=src, dst=dst, t=t), new_node_ratio=0.1, seed=3)
    assert (t[sp.train] <= sp.val_time).all() and (t[sp.test] > sp.test_time).all()
    assert not (sp.val & sp.test).any() and (sp.new_node_test <= sp.test).all()
    seen = set(src[sp.train].tolist()) | set(dst[sp.train].tolist())
    for e in torch.nonzero(sp.test).squeeze(1).tolist():
        has_new = int(src[e]) not in seen or int(dst[e]) not in seen
        assert has_new == bool(sp.new_node_test[e])
    assert sp.new_node_test.any()


def test_negatives_never_collide_with_real_events():
    src = torch.tensor([1, 1, 2, 3])
    dst = torch.tensor([2, 3, 3, 4])
    t = torch.tensor([5.0, 5.0, 6.0, 7.0])
    neg = CollisionCheckedNegatives(torch.tensor([2, 3, 4]), src, dst, t)
    out = neg.sample(torch.tensor([1] * 50), torch.tensor([5.0] * 50), 3, torch.Generator().manual_seed(0))
    assert (out == 4).all()  # 2 and 3 interact with 1 at t=5
    assert neg.is_real(torch.tensor([4, 1]), torch.tensor([3, 4]), torch.tensor([7.0, 7.0])).tolist() == [True, False]


def test_pair_seen_before_and_gap_by_hand():
    src = torch.tensor([1, 2, 1, 3, 2])
    dst = torch.tensor([2, 1, 3, 1, 1])
    t = torch.tensor([1.0, 1.0, 4.0, 9.0, 10.0])
    assert pair_seen_before(src, dst, t).tolist() == [False, False, False, True, True]
    # node 1: times 1,1,4,9,10 -> largest gap 5; node 3: 4,9 -> 5; node 2: 1,1,10 -> 9
    assert max_inter_event_gap(src, dst, t) == 9.0


def hand_stream():
    """Events (u, v, t): 1 sent to 3 and 4 in the history; (1, 2, 10) is the positive, (1, 7, 10) a real event too."""
    src = torch.tensor([1, 1, 5, 1, 1])
    dst = torch.tensor([3, 4, 6, 2, 7])
    t = torch.tensor([1.0, 2.0, 3.0, 10.0, 10.0])
    return src, dst, t


def test_hist_rnd_negatives_by_hand():
    src, dst, t = hand_stream()
    real = CollisionCheckedNegatives(torch.arange(1, 9), src, dst, t)
    hist = HistoricalRandomNegatives(torch.tensor([2, 3, 4, 5, 6, 7]), src[:3], dst[:3], real, hist_ratio=0.5)
    rng = torch.Generator().manual_seed(0)
    # 4 negatives for (1, t=10): 2 historical = {3, 4}; 2 random from {5, 6} (2 and 7 are real at t=10)
    neg = hist.sample(torch.tensor([1, 1]), torch.tensor([10.0, 10.0]), 4, rng)
    assert neg.shape == (2, 4)
    for row in neg.tolist():
        assert sorted(row[:2]) == [3, 4] and sorted(row[2:]) == [5, 6]
    # source 5 has one historical destination (6): 1 historical + 2 random from the other candidates
    row = hist.sample(torch.tensor([5]), torch.tensor([10.0]), 3, rng)[0].tolist()
    assert row[0] == 6 and len(set(row)) == 3 and set(row[1:]) <= {2, 3, 4, 5, 7}
    # ratio 0: all uniform, none repeated, none real
    row = (
        HistoricalRandomNegatives(torch.arange(2, 8), src[:3], dst[:3], real, 0.0)
        .sample(torch.tensor([1]), torch.tensor([10.0]), 4, rng)[0]
        .tolist()
    )
    assert len(set(row)) == 4 and not {2, 7} & set(row)
    with pytest.raises(RuntimeError, match="no 5 distinct admissible destinations for source 1"):
        hist.sample(torch.tensor([1]), torch.tensor([10.0]), 5, rng)


def test_unseen_nodes_by_hand():
    src, dst, _ = hand_stream()
    train = torch.tensor([True, True, False, False, False])
    later = torch.tensor([False, False, True, True, True])
    assert unseen_nodes(src, dst, train, later).tolist() == [2, 5, 6, 7]


def test_datamodule_inductive_negatives_come_from_unseen_nodes_with_their_own_draw(tmp_path):
    from zoo.methods.st_tgexplainer.datamodule import TemporalLinkDataModule

    src, dst, _ = random_stream(n_nodes=60, n_events=1500, seed=3)  # synthetic stream, for tests only
    rows = "\n".join(f"{u},{v},{e},0,{e + 1}" for e, (u, v) in enumerate(zip(src.tolist(), dst.tolist())))
    path = write(tmp_path, "u,i,ts,label,idx\n" + rows + "\n")
    dm = TemporalLinkDataModule(path=str(path), batch_size=64, num_neighbors=4, mrr_negatives=6)
    dm.setup("fit")
    d, sp = dm.graph.data, dm.split
    cands = set(dm.inductive_negatives.candidates.tolist())
    seen = set(d.src[sp.train].tolist()) | set(d.dst[sp.train].tolist())
    assert cands and not cands & seen
    for name in ("val", "test"):
        idx = getattr(dm, f"{name}_idx")
        new = (sp.new_node_val | sp.new_node_test)[idx]
        assert dm.fixed_ind_neg[name].shape == (int(new.sum()), 1)
        assert set(dm.fixed_ind_neg[name].reshape(-1).tolist()) <= cands
        assert set(dm.fixed_ind_mrr_neg[name].reshape(-1).tolist()) <= cands
        # hist_rnd: the first M/2 negatives are historical destinations of the source whenever it has that many
        hist = sp.train | (sp.val if name == "test" else torch.zeros_like(sp.val))
        for e, row in zip(idx[:50].tolist(), dm.fixed_mrr_neg[name][:50].tolist()):
            past = set(d.dst[hist & (d.src == d.src[e])].tolist())
            if len(past - {int(d.dst[e])}) >= 3:
                assert set(row[:3]) <= past and len(set(row)) == 6
    batch = next(iter(dm.test_dataloader()))
    rows = batch["ind_rows"]
    assert torch.equal(rows, torch.nonzero(batch["is_new"]).squeeze(1))
    assert batch["ind_neg"].shape == (rows.numel(), 1) and batch["ind_nbr"].shape == (rows.numel(), 1, 4)
    assert batch["indmrr_nbr"].shape == (rows.numel(), 6, 4) and batch["mrr_nbr"].shape == (64, 6, 4)
