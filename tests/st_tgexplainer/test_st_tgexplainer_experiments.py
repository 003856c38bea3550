"""The st-tgexplainer tables from raw per-seed records: one row per (model, seed), ACC-AUC by hand (issue 11)."""

import pytest
import torch

from zoo.core.results import summarise
from zoo.methods.st_tgexplainer.experiments import curve_rows, table_rows


def raw(seed, ap, mask_curve):
    fid = {"mask": mask_curve, "random": [0.5, 0.5, 0.5], "gradient": [0.6, 0.8, 1.0]}
    return {
        "seed": seed,
        "levels": [0.1, 0.2, 0.3],
        "st": {"test/ap": ap, "test/rho_auc": 0.4, "train_events_per_s": 10},
        "st_fid": fid,
        "gm": {"test/ap": ap - 0.1},
        "gm_fid": {k: fid[k] for k in ("random", "gradient")},
        "tgn": {"test/ap": 0.8},
    }


def test_table_and_curve_rows_by_hand():
    rs = [raw(0, 0.9, [0.6, 0.7, 0.8]), raw(1, 0.8, [0.7, 0.7, 0.7])]
    rows = table_rows(rs)
    assert [(r["model"], r["seed"]) for r in rows] == [
        ("ST-TGExplainer", 0),
        ("ST-TGExplainer", 1),
        ("GraphMixer (no masks)", 0),
        ("GraphMixer (no masks)", 1),
        ("TGN (PyG example)", 0),
        ("TGN (PyG example)", 1),
    ]
    # ACC-AUC = trapezoid over [0.1, 0.3] / 0.2: seed 0 mask (0.65 + 0.75) * 0.1 / 0.2 = 0.7; gradient 0.8
    assert rows[0]["ACC-AUC mask"] == pytest.approx(0.7) and rows[1]["ACC-AUC mask"] == pytest.approx(0.7)
    assert rows[2]["ACC-AUC gradient"] == pytest.approx(0.8) and "ACC-AUC mask" not in rows[2]
    assert rows[0]["rho AUC vs seen"] == 0.4 and "rho AUC vs seen" not in rows[2]
    assert rows[4]["AUC"] is None  # a metric TGN did not report stays missing, not 0
    st = summarise(rows, ["AP", "AUC"], by=["model"])[0]
    assert st["AP"]["mean"] == pytest.approx(0.85) and st["AUC"] == {"mean": None, "sd": None, "n": 0}
    curve = curve_rows(rs)
    assert len(curve) == 6 and curve[1] == {
        "sparsity": 0.1,
        "seed": 1,
        "ST mask": 0.7,
        "ST random": 0.5,
        "ST gradient": 0.6,
        "GM random": 0.5,
        "GM gradient": 0.6,
    }


TINY = ["overlay=tiny/st-tgexplainer.yaml", "trainer.max_steps=-1"]


def test_tgn_early_stopping_keeps_the_best_validation_epoch():
    from zoo.cli import compose_and_validate
    from zoo.core.build import build_datamodule
    from zoo.methods.st_tgexplainer import tgn

    cfg = compose_and_validate(["recipe=st-tgexplainer.yaml", *TINY])
    dm = build_datamodule(cfg)
    dm.setup("fit")
    model = tgn.build_tgn(dm)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with pytest.raises(ValueError, match="patience"):
        tgn.train_until_converged(model, dm, opt, torch.Generator().manual_seed(0), 0, 3)
    best, info = tgn.train_until_converged(model, dm, opt, torch.Generator().manual_seed(0), 1, 4)
    assert 1 <= info["best_epoch"] <= info["epochs"] <= 4 and info["train_seconds"] > 0
    assert best["val/ap"] == info["best_val_ap"] and 0 <= best["test/ap"] <= 1 and "test/mrr" in best
    # patience 1: it stops at the first epoch without a new best, i.e. one epoch after the best, or at the cap
    assert info["epochs"] == (info["best_epoch"] + 1 if info["early_stopped"] else 4)


def test_converged_run_resumes_then_writes_its_own_table(tmp_path, monkeypatch):
    """``run --patience`` trains in resumable calls (a record only once both models have stopped), keeps its
    records apart from the fixed-epoch ones, and ``aggregate --converged`` tables epochs and best epochs."""
    import argparse
    import json

    from zoo.methods.st_tgexplainer import experiments

    monkeypatch.setattr(experiments, "OUT", tmp_path / "results" / "st-tgexplainer")
    args = argparse.Namespace(
        recipe="st-tgexplainer.yaml", seed=0, fid_events=32, override=TINY, tgn_lr=None, only_tgn=False,
        patience=1, max_epochs=3, epochs_per_call=1, run_dir=str(tmp_path / "runs"),
    )  # fmt: skip
    calls = 1
    while not (path := experiments.run(args)).is_file():
        calls += 1
        assert calls <= 4
    assert calls >= 2 and path.parent.name == "raw-converged"
    rec = json.loads(path.read_text())
    for key in ("st", "gm", "tgn"):
        assert 1 <= rec[key]["best_epoch"] <= rec[key]["epochs"] <= 3, key
        assert str(tmp_path) not in json.dumps(rec[key]), key  # no path of this machine in a committed record
    experiments.aggregate(argparse.Namespace(converged=True))
    table = json.loads((tmp_path / "results" / "st-tgexplainer" / "collegemsg-converged.json").read_text())
    assert "--patience 1 --max-epochs 3" in table["command"] and "aggregate --converged" in table["command"]
    assert {r["model"] for r in table["rows"]} == {m for m, _, _ in experiments.MODELS}
    assert all(r["best epoch"] <= r["epochs"] for r in table["rows"])
