"""The experiment grid's non-private runs with Cond-DP's conditioning C (the split of the gain into
preconditioning and privacy)."""

import numpy as np
import pytest

from zoo.methods.cond_dp import experiments as ex
from zoo.methods.cond_dp.conditioning import psd_sqrt


def test_non_private_conditioned_runs_use_the_same_c(monkeypatch, tmp_path):
    monkeypatch.setitem(
        ex.GRIDS,
        "tiny",
        {"runs": [("diabetes", "linear")], "epsilons": [1.0], "seeds": [0, 1], "mlp_sf_epsilons": None},
    )
    seen = []
    real_fit = ex.fit

    def spy(*args, **kw):
        r = real_fit(*args, **kw)
        seen.append((kw["private"], kw.get("mode", "none"), kw.get("C")))
        if kw.get("mode") == "reparam":  # the input map is C^{1/2} of Cond-DP's C
            np.testing.assert_allclose(r.model.input_map.numpy(), psd_sqrt(kw["C"]), rtol=1e-5, atol=1e-6)
        return r

    monkeypatch.setattr(ex, "fit", spy)
    done, chosen = ex.run_grid("tiny", tmp_path / "rows.jsonl", methods=list(ex.NON_PRIVATE_MODE))
    assert {m for p, m, _ in seen} == {"none", "precondition", "reparam"} and not any(p for p, _, _ in seen)
    assert all(c is not None for _, m, c in seen if m != "none")
    rows, tuning = ex.tuned_rows(done, chosen)
    assert sorted({r["method"] for r in rows}) == ["non-private", "non-private-precondition", "non-private-reparam"]
    assert all(r["epsilon"] is None and r["epsilon_spent"] is None for r in rows) and len(rows) == 6
    plain = [r["relative_mse"] for r in rows if r["method"] == "non-private"]
    assert np.mean(plain) == pytest.approx(1.0)
    # a conditioned run is a different optimisation from plain SGD at the same step size
    assert {r["method"] for r in tuning} == set(ex.NON_PRIVATE_MODE)
    assert len({round(r["test_mse"], 6) for r in rows if r["seed"] == 0}) == 3


def test_criteo_paper_recipe_takes_the_winning_variant_and_its_tuned_lr():
    """recipes/paper/cond-dp-criteo.yaml: the Cond-DP realisation with the lower SF MLP test MSE at ε = 1, at the
    step size the grid tuned for it there (the lowest validation MSE)."""
    import json

    import yaml

    from zoo.core.data import repo_root

    root = repo_root()
    recipe = yaml.safe_load((root / "recipes" / "paper" / "cond-dp-criteo.yaml").read_text())["model"]
    doc = json.loads((root / "results" / "cond-dp" / "mse-vs-eps.json").read_text())
    test = {
        s["method"]: s["test_mse"]["mean"]
        for s in doc["summary"]
        if s["dataset"] == "commuting-sf"
        and s["model"] == "mlp"
        and s["epsilon"] == 1.0
        and s["method"].startswith("cond-dp-")
    }
    best = min(test, key=test.get)
    assert recipe["conditioning"] == best.removeprefix("cond-dp-")
    tuned = [
        t
        for t in doc["tuning"]
        if (t["dataset"], t["model"], t["method"], t["epsilon"]) == ("commuting-sf", "mlp", best, 1.0)
        and t["val_mse"] is not None
    ]
    assert recipe["lr"] == pytest.approx(min(tuned, key=lambda t: t["val_mse"])["lr"])
