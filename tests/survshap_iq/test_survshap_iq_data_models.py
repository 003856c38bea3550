"""Survival data (shipped sets, user CSV validation), the nets' losses and predictions, and the sksurv wrappers."""

import numpy as np
import pytest
import torch

from zoo.core.data import DataError
from zoo.methods.survshap_iq.datamodule import SurvivalDataModule, read_survival_csv
from zoo.methods.survshap_iq.metrics import c_index
from zoo.methods.survshap_iq.networks import breslow, cox_loss, cox_survival, deephit_loss, deephit_survival
from zoo.methods.survshap_iq.survival_models import SksurvModel, SurvivalInterface, grid_hazard, step_at
from zoo.methods.survshap_iq.synthetic import scenario


@pytest.mark.parametrize(
    "name,rows,p",
    [
        ("gbsg2", 686, 8),
        ("whas500", 500, 14),
        ("veterans", 137, 6),
        ("flchain", 6524, 8),
        ("aids", 1151, 11),
        ("breast-cancer", 198, 80),
    ],
)
def test_shipped_datasets(name, rows, p):
    dm = SurvivalDataModule(dataset=name)
    n = len(dm.time_train) + len(dm.time_val) + len(dm.time_test)
    assert n == rows and dm.X_train.shape[1] == p == len(dm.feature_names)
    assert np.isfinite(dm.X_train).all() and (dm.time_train >= 0).all() and 0 < dm.event_train.mean() < 1


def _csv(tmp_path, text):
    p = tmp_path / "d.csv"
    p.write_text(text)
    return str(p)


def test_user_csv_reads_and_codes_categories(tmp_path):
    X, t, e, names = read_survival_csv(_csv(tmp_path, "time,event,age,arm\n5,1,60,b\n3.5,0,50,a\n"))
    assert names == ["age", "arm"] and X.tolist() == [[60, 1], [50, 0]] and t.tolist() == [5, 3.5]
    assert e.tolist() == [True, False]


@pytest.mark.parametrize(
    "body,needle",
    [
        ("time,event,age\n-1,1,60\n", "d.csv:2: column 'time': '-1' is not >= 0"),
        ("time,event,age\nsoon,1,60\n", "d.csv:2: column 'time': 'soon' is not a number"),
        ("time,event,age\n1,1,60\n2,2,61\n", "d.csv:3: column 'event': '2' is not one of 1, 0"),
        ("time,event,age\n1,1,60\n2,0,NA\n", "d.csv:3: column 'age': missing value"),
        ("time,status,age\n1,1,60\n", "missing column(s) ['event']"),
    ],
)
def test_user_csv_errors_name_line_and_column(tmp_path, body, needle):
    with pytest.raises(DataError, match=None) as err:
        SurvivalDataModule(path=_csv(tmp_path, body))
    assert needle in str(err.value)


def test_cox_loss_hand_value():
    # two subjects, no ties: -[(r1 - log(e^r1 + e^r2)) + 0] / 1 event
    r = torch.tensor([0.5, -0.2])
    loss = cox_loss(r, torch.tensor([1.0, 2.0]), torch.tensor([True, False]))
    assert loss.item() == pytest.approx(-(0.5 - np.log(np.exp(0.5) + np.exp(-0.2))), rel=1e-5)


def test_breslow_and_cox_survival_hand_values():
    r = torch.zeros(3)
    times, H = breslow(r, torch.tensor([1.0, 2.0, 3.0]), torch.tensor([True, True, False]))
    assert times.tolist() == [1.0, 2.0] and H.tolist() == pytest.approx([1 / 3, 1 / 3 + 1 / 2])
    S = cox_survival(torch.tensor([0.0, np.log(2.0)]), times, H, torch.tensor([0.5, 1.0, 2.5]))
    assert S[0].tolist() == pytest.approx([1.0, np.exp(-1 / 3), np.exp(-5 / 6)])
    assert S[1, 2].item() == pytest.approx(np.exp(-5 / 3))


def test_deephit_survival_and_loss():
    cuts = torch.tensor([1.0, 2.0])
    logits = torch.log(torch.tensor([[0.2, 0.3, 0.5]]))
    S = deephit_survival(logits, cuts, torch.tensor([0.5, 1.0, 1.5, 2.0, 9.0]))
    assert S[0].tolist() == pytest.approx([1.0, 0.8, 0.8, 0.5, 0.5])
    nll = deephit_loss(logits, torch.tensor([2.0]), torch.tensor([True]), cuts, alpha=1.0, sigma=0.1)
    assert nll.item() == pytest.approx(-np.log(0.3), rel=1e-5)
    cens = deephit_loss(logits, torch.tensor([1.0]), torch.tensor([False]), cuts, alpha=1.0, sigma=0.1)
    assert cens.item() == pytest.approx(-np.log(0.8), rel=1e-5)


def test_step_function_and_grid_hazard():
    S = step_at(np.array([1.0, 3.0]), np.array([[0.9, 0.5]]), np.array([0.5, 1.0, 2.0, 3.0, 4.0]))
    assert S[0].tolist() == [1.0, 0.9, 0.9, 0.5, 0.5]
    h = grid_hazard(0.1 * np.array([[1.0, 2.0, 4.0]]), np.array([1.0, 2.0, 4.0]))
    assert h[0] == pytest.approx([0.1, 0.1, 0.1])


def test_cox_log_hazard_stays_additive_where_survival_underflows():
    """A Cox model's grid log-hazard minus x'beta is the same curve for every x, also for high-risk rows whose
    S(t|x) < 1e-12 (computing H as -log S would saturate there and leak x into the time axis)."""
    sc = scenario(1)
    X, t, e = sc.sample(500, seed=0)
    m = SksurvModel("coxph").fit(X, t, e)
    Z = np.array([[0.0, 0.0, 0.0], [3.0, -3.0, -3.0]])  # the second: x'beta ~ 5, S(69) ~ 1e-30
    times = np.linspace(1.0, 69.0, 41)
    assert m.predict_survival(Z, times)[1, -1] < 1e-12
    rest = m.predict_log_hazard(Z, times) - (Z @ m.estimator.coef_)[:, None]
    assert np.allclose(rest[0], rest[1], atol=1e-8)


@pytest.mark.parametrize("kind", ["coxph", "gbsa", "rsf"])
def test_sksurv_models_share_the_interface(kind):
    sc = scenario(1)
    X, t, e = sc.sample(300, seed=0)
    m = SksurvModel(kind, n_estimators=20) if kind != "coxph" else SksurvModel(kind)
    m.fit(X, t, e)
    times = np.array([5.0, 20.0, 50.0])
    S = m.predict_survival(X[:7], times)
    assert S.shape == (7, 3) and np.all(np.diff(S, axis=1) <= 1e-12) and np.all((S >= 0) & (S <= 1))
    assert m.predict_hazard(X[:7], times).shape == (7, 3)
    assert c_index(t, e, m.predict_risk(X)) > 0.6


def test_survival_interface_requires_predict_survival_also_on_a_lightning_module():
    import lightning as L

    class Hazardless(L.LightningModule, SurvivalInterface):  # the mix SurvShapIQModule uses: metaclasses agree
        pass

    with pytest.raises(TypeError, match="predict_survival"):
        Hazardless()

    class Flat(L.LightningModule, SurvivalInterface):
        def predict_survival(self, X, times):
            return np.full((len(X), len(times)), 0.5)

    hazard = Flat().target("hazard", np.array([1.0, 2.0]))(np.zeros((3, 2)))
    assert hazard.shape == (3, 2) and np.allclose(hazard[:, 0], -np.log(0.5)) and np.allclose(hazard[:, 1], 0.0)
