"""The Benna-Fusi beaker update on small cases worked by hand."""

import pytest
import torch
from torch import nn

pytest.importorskip("gymnasium")
from zoo.methods.sf_consolidation.beakers import BeakerChain, capacities, consolidate, recall_mask, storage_timescales


def scalar_chain(K, u0=1.0, rest=0.0):
    return [[torch.tensor([u0])]] + [[torch.tensor([rest])] for _ in range(K - 1)]


def test_constants_and_timescales():
    assert capacities(5) == [1, 2, 4, 8, 16, 32]
    assert storage_timescales(5, 0.05) == [20, 40, 80, 160, 320]  # tau_k = ceil(C_k / g)


def test_g_zero_leaves_chain_inert():
    b = [[torch.tensor([3.0])], [torch.tensor([-1.0])], [torch.tensor([7.0])]]
    for _ in range(50):
        consolidate(b, 0.0, capacities(3), [True] * 3, leak=True)
    assert [float(x[0]) for x in b] == [3.0, -1.0, 7.0]


def test_k2_without_leak_is_an_ema_at_rate_g_over_c2():
    seq = [1.0, 0.0, 2.0, -1.0, 0.5, 3.0, 3.0, 0.0]
    b = scalar_chain(2, rest=0.0)
    ema = 0.0
    for x in seq:  # mask [1, 0]: no recall into u_0 yet
        b[0][0].fill_(x)
        consolidate(b, 0.05, capacities(2), [True, False], leak=False)
        ema = ema + 0.0125 * (x - ema)  # last beaker fed at g / C_K = 0.05 / 4
        assert float(b[1][0]) == pytest.approx(ema, abs=1e-7)
        assert float(b[0][0]) == x


def test_k2_with_leak_hand_sequence():
    # u0 = 1 held, u1 = 0: leak x (1 - g/C_2) = x 0.9875, then inflow at g/C_2 = 0.0125 (the authors' JAX order)
    b = scalar_chain(2)
    consolidate(b, 0.05, capacities(2), [True, False], leak=True)
    assert float(b[1][0]) == pytest.approx(0.0125, abs=1e-8)
    consolidate(b, 0.05, capacities(2), [True, False], leak=True)
    assert float(b[1][0]) == pytest.approx(0.024689453125, abs=1e-8)  # 0.0125 * 0.9875 + 0.0125 * (1 - that)


def test_recall_pulls_u0_towards_u1_at_g_over_c1():
    b = [[torch.tensor([1.0])], [torch.tensor([0.0])]]
    consolidate(b, 0.05, capacities(2), [True, True], leak=False)
    assert float(b[0][0]) == pytest.approx(0.975)  # 1 + 0.025 (0 - 1)
    assert float(b[1][0]) == pytest.approx(0.0125 * 0.975)  # then storage sees the updated u_0


def test_each_flow_is_clipped_to_norm_10_over_the_whole_beaker():
    # u_1 <- u_1 + 0.0125 (u_0 - u_1): displacement (7.5, 10) has norm 12.5 over both tensors -> scaled to (6, 8)
    b = [[torch.tensor([600.0]), torch.tensor([800.0])], [torch.tensor([0.0]), torch.tensor([0.0])]]
    consolidate(b, 0.05, capacities(2), [True, False], leak=False)
    assert [float(t) for t in b[1]] == pytest.approx([6.0, 8.0], abs=1e-5)
    b = [[torch.tensor([600.0]), torch.tensor([800.0])], [torch.tensor([0.0]), torch.tensor([0.0])]]
    consolidate(b, 0.05, capacities(2), [True, False], leak=False, max_norm=1e9)
    assert [float(t) for t in b[1]] == pytest.approx([7.5, 10.0])


def test_constant_u0_converges_in_timescale_order():
    net = nn.Linear(1, 1, bias=False)
    nn.init.zeros_(net.weight)
    chain = BeakerChain(net, num_beakers=5, g=0.05, leak=False)
    net.weight.data.fill_(1.0)
    half = {}
    for n in range(5000):
        chain.n_updates.zero_()  # keep recall off: u_0 held constant
        chain.step(net)
        net.weight.data.fill_(1.0)
        for k in range(1, 5):
            if k not in half and float(chain.beaker(net, k)[0]) >= 0.5:
                half[k] = n
    assert sorted(half) == [1, 2, 3, 4]
    assert half[1] < half[2] < half[3] < half[4]  # slower beakers fill later
    assert chain.tau[1:] == [40, 80, 160, 320]
    assert all(abs(float(chain.beaker(net, k)[0]) - 1.0) < 1e-2 for k in range(1, 5))


def test_recall_mask_is_the_authors_prepend_one_drop_last():
    tau = storage_timescales(3, 0.05)  # [20, 40, 80]
    assert recall_mask(0, tau) == [True, False, False]
    assert recall_mask(20, tau) == [True, False, False]  # strict: tau_0 < n
    assert recall_mask(21, tau) == [True, True, False]  # recall into u_0 from n = 21
    assert recall_mask(40, tau) == [True, True, False]
    assert recall_mask(41, tau) == [True, True, True]  # recall into u_1 after tau_1 = 40
    # K = 3, mask [1, 1, 1]: u_1 also recalls from u_2 at g/C_2, then u_2 is fed at g/C_3 (no leak)
    b = [[torch.tensor([1.0])], [torch.tensor([0.0])], [torch.tensor([2.0])]]
    consolidate(b, 0.05, capacities(3), recall_mask(41, tau), leak=False)
    u0 = 1 + 0.025 * (0 - 1)
    u1 = 0.025 * u0
    u1 = u1 + 0.0125 * (2 - u1)
    assert [float(x[0]) for x in b] == pytest.approx([u0, u1, 2 + 0.00625 * (u1 - 2)])


def test_recall_into_u0_starts_after_tau0():
    net = nn.Linear(1, 1, bias=False)
    nn.init.zeros_(net.weight)
    chain = BeakerChain(net, num_beakers=2, g=0.05, leak=False)
    for n in range(25):
        net.weight.data.fill_(1.0)
        chain.step(net)
        if n <= 20:
            assert float(net.weight) == 1.0  # m_1 = [tau_0 = 20 < n] is 0 up to n = 20
    assert float(net.weight) < 1.0
    assert chain.distances(net)[0] == pytest.approx(abs(float(net.weight) - float(chain.beaker(net, 1)[0])))


def _reference_step(beakers, g, caps, mask, leak, max_norm=10.0):
    """The update flow by flow on per-tensor lists, as the module docstring writes it (the pre-flat code path)."""

    def flow(dst, src, rate):
        delta = [-rate * d for d in dst] if src is None else [rate * (s - d) for s, d in zip(src, dst)]
        norm = float(torch.sqrt(sum((x * x).sum() for x in delta)))
        for d, x in zip(dst, delta):
            d += min(1.0, max_norm / (norm + 1e-6)) * x

    K = len(beakers)
    if mask[1]:
        flow(beakers[0], beakers[1], g / caps[1])
    for k in range(1, K - 1):
        flow(beakers[k], beakers[k - 1], g / caps[k])
        if mask[k + 1]:
            flow(beakers[k], beakers[k + 1], g / caps[k + 1])
    if leak:
        flow(beakers[K - 1], None, g / caps[K])
    flow(beakers[K - 1], beakers[K - 2], g / caps[K])


def test_flat_chain_step_matches_the_per_tensor_update_and_round_trips():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3))
    chain = BeakerChain(net, num_beakers=4, g=0.2, max_norm=0.05)  # a small clip, so some flows are clipped
    ref_net = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3))
    ref_net.load_state_dict(net.state_dict())
    ref = [[p.detach().clone() for p in net.parameters()] for _ in range(4)]
    for n in range(30):
        with torch.no_grad():  # the online net moves between steps, as training does
            for p, r in zip(net.parameters(), ref[0]):
                step = torch.randn_like(p) * 0.1
                p.add_(step)
                r.add_(step)
        _reference_step(ref, chain.g, chain.caps, recall_mask(n, chain.tau), leak=True, max_norm=0.05)
        chain.step(net)
        for k in range(4):
            for a, b in zip(chain.beaker(net, k), ref[k]):
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # saved beakers are their own tensors (safetensors refuses shared memory); loading copies into the flat rows
    state = chain.state_dict()
    keys = [k for k in state if k.startswith("u")]
    assert len({state[k].untyped_storage().data_ptr() for k in keys}) == len(keys)
    other = BeakerChain(ref_net, num_beakers=4, g=0.2, max_norm=0.05)
    other.step(ref_net)  # builds its flat storage first
    other.load_state_dict(state)
    for k in range(1, 4):
        for a, b in zip(other.beaker(ref_net, k), chain.beaker(net, k)):
            assert torch.equal(a, b)
    # a dtype change replaces the buffers: the next step rebuilds the flat storage from them
    net.double()
    chain.double()
    before = [b.clone() for b in chain.beaker(net, 3)]
    chain.step(net)
    assert chain.beaker(net, 3)[0].dtype == torch.float64
    assert not torch.equal(chain.beaker(net, 3)[0], before[0])
