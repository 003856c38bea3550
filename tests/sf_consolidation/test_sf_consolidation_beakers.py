"""The Benna-Fusi beaker update on small cases worked by hand."""
import pytest
import torch
from torch import nn

pytest.importorskip("gymnasium")
from zoo.methods.sf_consolidation.beakers import BeakerChain, capacities, consolidate, storage_timescales


def scalar_chain(K, u0=1.0, rest=0.0):
    return [[torch.tensor([u0])]] + [[torch.tensor([rest])] for _ in range(K - 1)]


def test_constants_and_timescales():
    assert capacities(5) == [1, 2, 4, 8, 16, 32]
    assert storage_timescales(5, 0.05) == [20, 40, 80, 160, 320]          # tau_k = ceil(C_k / g)


def test_g_zero_leaves_chain_inert():
    b = [[torch.tensor([3.0])], [torch.tensor([-1.0])], [torch.tensor([7.0])]]
    for _ in range(50):
        consolidate(b, 0.0, capacities(3), [True] * 3, leak=True)
    assert [float(x[0]) for x in b] == [3.0, -1.0, 7.0]


def test_k2_without_leak_is_an_ema_at_rate_g_over_c1():
    seq = [1.0, 0.0, 2.0, -1.0, 0.5, 3.0, 3.0, 0.0]
    b = scalar_chain(2, rest=0.0)
    ema = 0.0
    for x in seq:                                                         # before tau_1 = 40: no recall into u_0
        b[0][0].fill_(x)
        consolidate(b, 0.05, capacities(2), [False, False], leak=False)
        ema = ema + 0.025 * (x - ema)                                     # g / C_1 = 0.05 / 2
        assert float(b[1][0]) == pytest.approx(ema, abs=1e-7)
        assert float(b[0][0]) == x


def test_k2_with_leak_hand_sequence():
    # u0 = 1 held, u1 = 0: inflow at g/C_1 = 0.025, then leak x (1 - g/C_2) = x 0.9875
    b = scalar_chain(2)
    consolidate(b, 0.05, capacities(2), [False, False], leak=True)
    assert float(b[1][0]) == pytest.approx(0.0246875, abs=1e-7)
    consolidate(b, 0.05, capacities(2), [False, False], leak=True)
    assert float(b[1][0]) == pytest.approx(0.04845693359375, abs=1e-7)    # (0.0246875 + 0.025 * 0.9753125) * 0.9875


def test_recall_pulls_u0_towards_u1_at_g_over_c1():
    b = [[torch.tensor([1.0])], [torch.tensor([0.0])]]
    consolidate(b, 0.05, capacities(2), [False, True], leak=False)
    assert float(b[0][0]) == pytest.approx(0.975)                         # 1 + 0.025 (0 - 1)
    assert float(b[1][0]) == pytest.approx(0.025 * 0.975)                 # then storage sees the updated u_0


def test_constant_u0_converges_in_timescale_order():
    net = nn.Linear(1, 1, bias=False)
    nn.init.zeros_(net.weight)
    chain = BeakerChain(net, num_beakers=5, g=0.05, leak=False)
    net.weight.data.fill_(1.0)
    half = {}
    for n in range(3000):
        chain.n_updates.zero_()                                           # keep recall off: u_0 held constant
        chain.step(net)
        net.weight.data.fill_(1.0)
        for k in range(1, 5):
            if k not in half and float(chain.beaker(net, k)[0]) >= 0.5:
                half[k] = n
    assert sorted(half) == [1, 2, 3, 4]
    assert half[1] < half[2] < half[3] < half[4]                          # slower beakers fill later
    assert chain.tau[1:] == [40, 80, 160, 320]
    assert all(abs(float(chain.beaker(net, k)[0]) - 1.0) < 1e-2 for k in range(1, 5))


def test_recall_mask_switches_on_at_tau1():
    net = nn.Linear(1, 1, bias=False)
    nn.init.zeros_(net.weight)
    chain = BeakerChain(net, num_beakers=2, g=0.05, leak=False)
    for n in range(45):
        net.weight.data.fill_(1.0)
        chain.step(net)
        if n < 40:
            assert float(net.weight) == 1.0                               # m_1 = 0 before tau_1 = 40 updates
    assert float(net.weight) < 1.0
    assert chain.distances(net)[0] == pytest.approx(abs(float(net.weight) - float(chain.beaker(net, 1)[0])))
