"""WatchLog's table metrics (scikit-learn backed) on hand-worked cases, and the validation-calibrated threshold."""

from types import SimpleNamespace

import pytest
import torch

from zoo.methods.watchlog.metrics import best_f1_threshold, classification_metrics
from zoo.methods.watchlog.module import WatchLogModule


@pytest.mark.parametrize(
    ("threshold", "expected"),
    [
        # prob >= t flags; labels [1, 0, 1, 1, 0, 0]
        (0.5, {"accuracy": 4 / 6, "precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3}),  # flags 0.9, 0.8, 0.6
        (0.85, {"accuracy": 4 / 6, "precision": 1.0, "recall": 1 / 3, "f1": 0.5}),  # flags 0.9 only
        (0.6, {"accuracy": 4 / 6, "precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3}),  # the boundary is inclusive
        (0.0, {"accuracy": 0.5, "precision": 0.5, "recall": 1.0, "f1": 2 / 3}),  # everything flagged
        (0.95, {"accuracy": 0.5, "precision": 0.0, "recall": 0.0, "f1": 0.0}),  # nothing flagged: 0, not NaN
    ],
)
def test_classification_metrics_hand_values(threshold, expected):
    prob = torch.tensor([0.9, 0.8, 0.2, 0.6, 0.1, 0.4])
    lab = torch.tensor([1, 0, 1, 1, 0, 0])
    assert classification_metrics(prob, lab, threshold) == pytest.approx(expected)


def test_classification_metrics_degenerate_inputs():
    assert classification_metrics(torch.tensor([]), torch.tensor([])) == {
        "accuracy": 0.0,
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
    }
    no_pos = classification_metrics(torch.tensor([0.7, 0.2]), torch.tensor([0, 0]))
    assert no_pos == pytest.approx({"accuracy": 0.5, "precision": 0.0, "recall": 0.0, "f1": 0.0})


def test_best_f1_threshold_hand_values_and_ties():
    # labels [1, 0, 1, 1, 0]: thresholds 0.9 -> F1 0.5, 0.8 -> 0.4, 0.6 -> 2/3, 0.3 -> 6/7, 0.1 -> 0.75
    assert best_f1_threshold(torch.tensor([0.9, 0.8, 0.3, 0.6, 0.1]), torch.tensor([1, 0, 1, 1, 0])) == pytest.approx(
        0.3
    )
    # a tie in F1 between 0.7 (F1 2/3: one of two positives, no false positive) and 0.2 (F1 2/3: both positives,
    # two false positives): the lowest is returned
    prob, lab = torch.tensor([0.7, 0.5, 0.4, 0.2]), torch.tensor([1, 0, 0, 1])
    assert classification_metrics(prob, lab, 0.7)["f1"] == pytest.approx(classification_metrics(prob, lab, 0.2)["f1"])
    assert best_f1_threshold(prob, lab) == pytest.approx(0.2)
    # repeated probabilities: the threshold is one of the values; no positives: the lowest value
    assert best_f1_threshold(torch.tensor([0.5, 0.5, 0.2]), torch.tensor([1, 0, 0])) == pytest.approx(0.5)
    assert best_f1_threshold(torch.tensor([0.5, 0.3]), torch.tensor([0, 0])) == pytest.approx(0.3)
    with pytest.raises(ValueError, match="no predictions"):
        best_f1_threshold(torch.tensor([]), torch.tensor([]))


def _fake(stage: str, probs: list[float], labels: list[int]):
    """A stand-in module and datamodule with the attributes ``calibrate_threshold`` reads."""
    windows = [SimpleNamespace(label=v) for v in labels]
    ds = type("DS", (), {"windows": windows, "__len__": lambda self: len(windows)})()
    dm = SimpleNamespace(setup=lambda: None, splits={"val": ds})
    module = SimpleNamespace(
        hparams=SimpleNamespace(stage=stage),
        threshold=torch.tensor(0.5),
        predict_dataset=lambda d, explain=False: [{"prob": p} for p in probs],
    )
    return module, dm


def test_calibrate_threshold_sets_the_validation_f1_best_threshold():
    module, dm = _fake("detect", [0.9, 0.8, 0.3, 0.6, 0.1], [1, 0, 1, 1, 0])
    assert WatchLogModule.calibrate_threshold(module, dm) == pytest.approx(0.3)
    assert float(module.threshold) == pytest.approx(0.3)
    # unlabelled validation windows (label -1) or the pretraining stage leave the threshold alone
    module, dm = _fake("detect", [0.9, 0.1], [1, -1])
    assert WatchLogModule.calibrate_threshold(module, dm) == pytest.approx(0.5) and float(module.threshold) == 0.5
    module, dm = _fake("pretrain", [0.9, 0.1], [1, 0])
    assert WatchLogModule.calibrate_threshold(module, dm) == pytest.approx(0.5)
