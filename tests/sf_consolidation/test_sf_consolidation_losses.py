"""Targets and penalties by hand: n-step double DQN, the SF Bellman fixed point, reward regression, EWC."""

import numpy as np
import pytest
import torch
from torch import nn

pytest.importorskip("gymnasium")
from zoo.methods.sf_consolidation.baselines import OnlineEWC
from zoo.methods.sf_consolidation.losses import (
    n_step_double_dqn_target,
    n_step_return,
    reward_loss,
    sf_bellman_target,
    td3_target,
)
from zoo.methods.sf_consolidation.metrics import auc_return, bootstrap_ci, ranking


def test_n_step_double_dqn_target_by_hand():
    y = n_step_double_dqn_target(
        torch.tensor([1.0, 0.5]),
        torch.tensor([0.81, 0.0]),
        torch.tensor([[1.0, 3.0], [2.0, 0.0]]),
        torch.tensor([[10.0, 20.0], [30.0, 40.0]]),
    )
    # argmax online = [1, 0]; target net evaluates them: 1 + 0.81 * 20, 0.5 + 0 * 30
    assert y.tolist() == pytest.approx([17.2, 0.5])
    assert n_step_return([1.0, 0.0, 2.0], 0.5) == pytest.approx(1.5)


def test_td3_target_and_reward_loss():
    assert td3_target(torch.tensor([1.0]), torch.tensor([0.5]), torch.tensor([4.0]), torch.tensor([2.0])).item() == 2.0
    phi = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    assert reward_loss(phi, torch.tensor([2.0, 0.0]), torch.tensor([1.0, 1.0])).item() == pytest.approx(0.5)


def test_tabular_sf_fixed_point():
    P = np.array([[0.1, 0.9, 0.0], [0.0, 0.2, 0.8], [0.5, 0.0, 0.5]])  # P^pi of a 3-state chain
    Phi = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 2.0]])
    gamma = 0.9
    psi = torch.zeros(3, 2)
    for _ in range(600):  # expected SF Bellman backup
        psi = sf_bellman_target(
            torch.tensor(Phi, dtype=torch.float32), torch.tensor(P, dtype=torch.float32) @ psi, torch.full((3,), gamma)
        )
    assert psi.numpy() == pytest.approx(np.linalg.solve(np.eye(3) - gamma * P, Phi), abs=1e-4)


def test_ewc_penalty_and_online_fisher_by_hand():
    net = nn.Linear(1, 1, bias=False)
    net.weight.data.fill_(1.0)
    ewc = OnlineEWC(net, lam=2.0, gamma_f=0.5, period=2)
    net.weight.grad = torch.tensor([[3.0]])
    ewc.accumulate(net)
    net.weight.grad = torch.tensor([[1.0]])
    ewc.accumulate(net)  # period reached: F = 0.5*0 + (9+1)/2 = 5
    assert float(ewc.fisher__weight) == 5.0
    net.weight.data.fill_(3.0)  # anchor stayed at 1.0
    assert ewc.penalty(net).item() == pytest.approx(0.5 * 2.0 * 5.0 * (3.0 - 1.0) ** 2)


def test_auc_and_ranking():
    eps = [{"step": 10, "return": 1.0}, {"step": 30, "return": 0.5}]
    assert auc_return(eps, 40) == pytest.approx((0 * 10 + 1.0 * 20 + 0.5 * 10) / 40)
    lo, hi = bootstrap_ci([1.0, 1.0, 1.0])
    assert lo == hi == 1.0
    assert [r["variant"] for r in ranking({"a": [0.1, 0.2], "b": [0.5, 0.6]})] == ["b", "a"]
