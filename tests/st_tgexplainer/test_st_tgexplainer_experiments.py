"""The st-tgexplainer tables from raw per-seed records: one row per (model, seed), ACC-AUC by hand (issue 11)."""

import pytest

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
