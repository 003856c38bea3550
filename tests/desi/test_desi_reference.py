"""DeSI against references: the FSI authors' per-fold global Fréchet errors, and a planted index direction."""

import numpy as np
import pandas as pd
import torch

from zoo.core.data import repo_root
from zoo.methods.desi.baselines import gfr
from zoo.methods.desi.datamodule import HMD, load_hmd2013
from zoo.methods.desi.index import SingleIndex, angle_degrees, fit_index
from zoo.methods.desi.spaces import Space
from zoo.methods.desi.synthetic import simulate


def gfr_fold_errors() -> np.ndarray:
    """Our global Fréchet MSPE (W2² on the quantile grid) on each of the FSI paper's 30 folds."""
    d = load_hmd2013()
    sp = Space("distribution", 101, d["support"])
    out = []
    for test in d["folds"]:
        train = np.setdiff1d(np.arange(len(d["X"])), test)
        pred = gfr(d["X"][train], d["Z"][train], d["X"][test], sp)
        out.append(sp.dist2(pred, d["Z"][test]).mean())
    return np.array(out)


def test_gfr_matches_authors_per_fold_errors():
    ours = gfr_fold_errors()
    theirs = pd.read_csv(repo_root() / HMD / "fsi2013_GF_folds.csv", index_col=0).to_numpy()[:, 0]
    assert abs(theirs.mean() - 6.23) < 0.005
    assert abs(ours.mean() / theirs.mean() - 1) < 0.02, (ours.mean(), theirs.mean())
    assert np.corrcoef(ours, theirs)[0, 1] >= 0.9


def test_planted_direction_recovered_from_a_poor_start():
    d = simulate("distribution", 1000, 10, seed=0)
    torch.manual_seed(0)
    model = SingleIndex(10, "linear")
    start = np.zeros(10)
    start[[0, 3, 4]] = 1.0  # 70.5 degrees from the planted (1, 1, 1, 0, ...)/√3
    with torch.no_grad():
        model.b.copy_(torch.as_tensor(start, dtype=torch.float32))
    assert angle_degrees(model.direction(d["X"]), d["beta"]) > 60
    fit_index(model, d["X"], d["Z"], d["space"], epochs=40, lr=0.05, batch_size=1000)
    assert angle_degrees(model.direction(torch.as_tensor(d["X"], dtype=torch.float32)), d["beta"]) < 10
