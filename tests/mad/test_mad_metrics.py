"""Metrics on hand values: AUROC, BackdoorBench's DER and its detector form, thresholds."""

import pytest
import torch

from zoo.methods.mad.metrics import auroc, best_der, der_backdoorbench, detector_der, rates, threshold_at_fpr


def test_auroc_hand_values():
    # pairs (anomalous > benign): 0.5>0 yes, 0.5>1 no, 2>0 yes, 2>1 yes -> 3/4
    assert auroc(torch.tensor([0.0, 1.0]), torch.tensor([0.5, 2.0])) == pytest.approx(0.75)
    # one tie counts one half: (1 vs 1) tie, (1 vs 0) win -> (0.5 + 1) / 2
    assert auroc(torch.tensor([0.0, 1.0]), torch.tensor([1.0])) == pytest.approx(0.75)
    with pytest.raises(ValueError):
        auroc(torch.tensor([]), torch.tensor([1.0]))


def test_der_of_perfect_and_useless_detectors():
    benign, anomalous = torch.tensor([0.0, 0.1, 0.2, 0.3]), torch.tensor([1.0, 1.1, 1.2])
    assert best_der(benign, anomalous) == 1.0
    tpr, fpr = rates(benign, anomalous, 0.5)
    assert (tpr, fpr) == (1.0, 0.0) and detector_der(tpr, fpr) == 1.0
    same = torch.full((5,), 0.7)  # a useless detector: every input scores the same
    assert best_der(same, same.clone()) == 0.5
    assert detector_der(*rates(same, same.clone(), 0.0)) == 0.5  # flags everything: TPR = FPR = 1
    assert auroc(same, same.clone()) == 0.5


def test_der_backdoorbench_hand_values():
    # ASR 1.0 -> 0.1 (drop 0.9), accuracy 0.90 -> 0.85 (drop 0.05): (0.9 - 0.05 + 1) / 2
    assert der_backdoorbench(0.90, 0.85, 1.0, 0.1) == pytest.approx(0.925)
    assert der_backdoorbench(0.9, 0.9, 1.0, 1.0) == 0.5  # nothing changes
    assert der_backdoorbench(0.9, 0.95, 0.5, 0.7) == 0.5  # gains are clipped at 0
    assert der_backdoorbench(0.9, 0.9, 1.0, 0.0) == 1.0
    # on filtered sets (ACC_0 = ASR_0 = 1) it equals the detector form
    assert der_backdoorbench(1.0, 1 - 0.1, 1.0, 1 - 0.8) == pytest.approx(detector_der(0.8, 0.1))


def test_threshold_at_fpr_and_best_der_hand_case():
    held = torch.arange(100, dtype=torch.float32)  # quantile 0.95 of 0..99 = 94.05
    assert threshold_at_fpr(held, 0.05) == pytest.approx(94.05)
    # benign [0, 2], anomalous [1, 3]: best threshold between 0 and 1 gives TPR 1, FPR 0.5 -> J 0.5;
    # between 2 and 3 gives TPR 0.5, FPR 0 -> J 0.5; so DER = 0.75
    assert best_der(torch.tensor([0.0, 2.0]), torch.tensor([1.0, 3.0])) == pytest.approx(0.75)
