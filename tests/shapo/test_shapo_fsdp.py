"""Stage C under FSDP2 (``fully_shard``), tested on CPU: 2 processes, gloo, the real sharded code path.

One ``torch.multiprocessing`` spawn (about 10 s) runs every case on both ranks; each case's outcome on each rank
comes back through ``all_gather_object`` and is asserted by its own test below. The single-process side of each
comparison runs in rank 0 on an unsharded copy built from the same seed, with the same global batch.
"""

import datetime
import json
import os
import socket
import traceback
from pathlib import Path

import pytest
import torch

WORLD = 2
ROWS = [
    {
        "prompt": f"\n\nHuman: question number {i}?\n\nAssistant:",
        "chosen": f"I can't help with {i}.",
        "rejected": f"Sure, here is how to do {i} and more",
    }
    for i in range(4)
]


def _batches(tmp, batch_size):
    from zoo.data.preference import PreferenceDataModule

    dm = PreferenceDataModule(
        path=tmp, val_path=tmp, batch_size=batch_size, shuffle=False, max_length=40, redteam_path=None
    )
    dm.setup("fit")
    return list(dm.train_dataloader())


def _module(perturbation, lora, variant="token"):
    from zoo.methods.shapo.module import ShaPOModule

    torch.manual_seed(0)
    m = ShaPOModule(
        arch="zoo-lm-tiny",
        variant=variant,
        shapo_every=1,
        perturbation=perturbation,
        rho=0.5,
        gamma_min=30.0,
        gamma_max=30.0,
        max_grad_norm=None,
        eval_generation=False,
        lora={"r": 2, "alpha": 4} if lora else None,
        optimizer={"name": "sgd", "lr": 1.0},
    )
    if lora:  # random adapters, so that the LoRA policy is not its own reference
        with torch.no_grad():
            for n, p in m.policy.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.05)
    m.neuron_masks[:, ::7] = True  # fixed masks: stage A is not what these tests are about
    m.neuron_masks[1, 3] = True
    m.masks_ready.fill_(True)
    m.setup("fit")
    return m


def _step(m, batches, clip, scale=1.0):
    """One ShaPO (or DPO) optimiser step, as ``training_step`` does it: backward (micro-batch losses x ``scale``),
    clip, SGD step."""
    opt = torch.optim.SGD([p for p in m.policy.parameters() if p.requires_grad], lr=1.0)
    if m.hparams.variant == "dpo":
        loss, _ = m._loss(batches[0], "train")
        loss.backward()
        size = 0.0
    else:
        _, size = m.shapo_backward(batches, scale)
    torch.nn.utils.clip_grad_norm_([p for p in m.policy.parameters() if p.requires_grad], clip)
    opt.step()
    from zoo.methods.shapo.subspace import full_weight

    return {n: full_weight(p.detach()).clone() for n, p in m.policy.named_parameters()}, size


def case_perturbation_only_selected_columns_restore_bit_exact(rank, mesh, tmp):
    from zoo.methods.shapo.subspace import MaskedPerturbation, down_projections, full_weight, local_rows
    from zoo.models.causal_lm import build_causal_lm
    from zoo.models.sharding import shard_causal_lm

    torch.manual_seed(0)
    sharded, plain = build_causal_lm("zoo-lm-tiny"), build_causal_lm("zoo-lm-tiny")
    plain.load_state_dict(sharded.state_dict())
    masks = torch.zeros(2, 176, dtype=torch.bool)
    masks[0, [0, 5, 100, 175]] = True
    masks[1, 40:50] = True
    shard_causal_lm(sharded, mesh)
    pert = MaskedPerturbation(down_projections(sharded), masks)
    ref = MaskedPerturbation(down_projections(plain), masks)
    weights = [p.weight for p in pert.projections]
    g = torch.Generator().manual_seed(1)
    sliced = [torch.randn(64, int(m.sum()), generator=g) for m in masks]  # the same on both ranks
    for mode in ("gamma", "rho"):
        before = [local_rows(w)[0].clone() for w in weights]
        size = pert.apply_masked(sliced, mode, gamma=0.01, rho=0.5)
        size_ref = ref.apply_masked(sliced, mode, gamma=0.01, rho=0.5)
        assert abs(size - size_ref) < 1e-6 * max(size_ref, 1.0) and size > 0
        for w, w_ref, old, m in zip(weights, [p.weight for p in ref.projections], before, masks):
            local, start, stop = local_rows(w)
            assert (stop - start) == 32 and start == 32 * rank and local.shape == (32, 176)
            changed = (local != old).any(0)
            assert changed[m].all() and not changed[~m].any(), "perturbation outside the selected columns"
            assert torch.equal(local, w_ref.detach()[start:stop]), "shard differs from the unsharded perturbation"
            assert torch.equal(full_weight(w.detach()), w_ref.detach())
        pert.restore()
        ref.restore()
        for w, old in zip(weights, before):
            assert torch.equal(local_rows(w)[0], old), "restore is not bit-exact"


def _compare_step(rank, mesh, tmp, perturbation, lora, accumulate=False):
    if accumulate:  # rank r: micro-batches (pair 2r) and (pair 2r + 1)
        local = _batches(tmp, 1)[2 * rank : 2 * rank + 2]
    else:  # rank r: pairs 2r, 2r + 1 in one batch
        local = [_batches(tmp, 2)[rank]]
    m = _module(perturbation, lora)
    m.shard(mesh)
    got, size = _step(m, local, clip=0.05, scale=1.0 / len(local))
    if "reference" in m._frozen:  # its no-grad forwards must not leave the root's parameters gathered
        from torch.distributed.tensor import DTensor

        ref = m._frozen["reference"]
        assert all(isinstance(p, DTensor) for p in ref.parameters()), "reference root left unsharded"
    if rank == 0:
        full = _batches(tmp, 4)
        want, size_ref = _step(_module(perturbation, lora), full, clip=0.05)
        dpo, _ = _step(_module(perturbation, lora, variant="dpo"), full, clip=0.05)
        assert abs(size - size_ref) <= 1e-4 * size_ref and size > 0, (size, size_ref)
        for n in want:
            assert torch.allclose(got[n], want[n], atol=1e-6, rtol=1e-5), (n, (got[n] - want[n]).abs().max())
        # the test can fail: the perturbed gradient moves the weights elsewhere than a plain DPO step
        gap = max((want[n] - dpo[n]).abs().max().item() for n in want)
        assert gap > 1e-4, f"ShaPO step indistinguishable from a DPO step (max gap {gap})"


def case_step_gamma(rank, mesh, tmp):
    _compare_step(rank, mesh, tmp, "gamma", lora=False)


def case_step_rho(rank, mesh, tmp):
    _compare_step(rank, mesh, tmp, "rho", lora=False)


def case_step_rho_lora(rank, mesh, tmp):
    _compare_step(rank, mesh, tmp, "rho", lora=True)


def case_step_gamma_two_micro_batches_per_rank(rank, mesh, tmp):
    _compare_step(rank, mesh, tmp, "gamma", lora=False, accumulate=True)


CASES = {n: f for n, f in globals().items() if n.startswith("case_")}


def _worker(rank, port, tmp, out):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # a rank that fails or stops early makes the other's collectives fail after 2 min instead of hanging the suite
    dist.init_process_group("gloo", rank=rank, world_size=WORLD, timeout=datetime.timedelta(seconds=120))
    mesh = init_device_mesh("cpu", (WORLD,))
    results = {}
    for name, fn in CASES.items():
        try:
            fn(rank, mesh, tmp)
            results[name] = "ok"
        except Exception:  # noqa: BLE001 - reported per case and asserted by the parent
            results[name] = traceback.format_exc()
    gathered = [None] * WORLD
    dist.all_gather_object(gathered, results)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(gathered, f)
    dist.barrier()
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    import torch.multiprocessing as mp

    tmp = tmp_path_factory.mktemp("fsdp")
    data = tmp / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp / "outcomes.json"
    try:
        mp.spawn(_worker, args=(port, str(data), str(out)), nprocs=WORLD, join=True)
    except mp.ProcessExitedException:
        # gloo's teardown occasionally aborts a process at exit ("terminate called without an active exception");
        # the outcomes were gathered from both ranks before it, so only a missing file is a failure
        if not out.is_file():
            raise
    return json.loads(out.read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_fsdp2_on_two_gloo_ranks(outcomes, case):
    for rank, results in enumerate(outcomes):
        assert results[case] == "ok", f"rank {rank}:\n{results[case]}"


@pytest.mark.slow  # ~60 s idle, 150 s under load: two train.py processes twice; the gloo-rank cases above stay default
def test_train_py_fsdp2_two_cpu_processes_then_resume(tmp_path):
    """`train.py recipe=shapo-zoo-lm.yaml` (tiny overlay) under trainer.strategy=fsdp2 on 2 CPU processes (gloo), bf16-mixed
    and gradient checkpointing as in recipes/paper/shapo-llama3.2-3b.yaml: stage A, a DPO step and a ShaPO step,
    single-file checkpoint, export from the gathered weights; then resume=auto loads that checkpoint."""
    import subprocess
    import sys

    from zoo.core.hub import load_package

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "ZOO_RUN_DIR"}
    cmd = [
        sys.executable,
        "train.py",
        "recipe=shapo-zoo-lm.yaml",
        "overlay=recipes/tiny/shapo-zoo-lm.yaml",
        f"out_dir={tmp_path}",
        "trainer.strategy=fsdp2",
        "trainer.devices=2",
        "trainer.precision=bf16-mixed",  # as the paper recipe
        "+model.gradient_checkpointing=true",
    ]
    out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-4000:]
    assert "distributed_backend=gloo" in out.stderr and "Starting with 2 processes" in out.stderr
    assert [p.name for p in (tmp_path / "shapo-zoo-lm-tiny").iterdir()] == ["version_0"]
    run = tmp_path / "shapo-zoo-lm-tiny" / "version_0"
    metrics = json.loads((run / "metrics.json").read_text())["metrics"]
    # ||eps|| == rho only shows that a ShaPO step ran under FSDP2 (eps normalised over the all-reduced masked
    # gradient); that the step itself equals one process on the whole batch is test_fsdp2_on_two_gloo_ranks's job
    assert metrics["global_step"] == 2.0 and metrics["train/eps_norm"] == pytest.approx(0.05, rel=1e-4)  # rho
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)  # one file, plain tensors
    _, package = load_package(str(run / "export" / "package"))
    policy = {k: v for k, v in ckpt["state_dict"].items() if k.startswith("policy.")}
    assert policy and all(torch.equal(package[k], v) for k, v in policy.items())
    from safetensors.torch import load_file

    masks = load_file(str(run / "shapo_masks.safetensors"))["neuron_masks"].bool()
    assert torch.equal(package["neuron_masks"], masks) and int(masks.sum()) == int(0.01 * masks.numel())
    # resume: mark a weight in the checkpoint; the run (already at max_steps, so it trains no further) must restore
    # it through FSDP2Strategy.load_checkpoint into the shards, its step counter too, and export it
    full = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)
    key = "policy.model.norm.weight"
    full["state_dict"][key] = torch.full_like(full["state_dict"][key], 0.375)
    torch.save(full, run / "checkpoints" / "last.ckpt")
    again = subprocess.run(
        cmd + ["resume=auto"], cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert again.returncode == 0, again.stderr[-4000:]
    assert [p.name for p in (tmp_path / "shapo-zoo-lm-tiny").iterdir()] == ["version_0"]
    assert json.loads((run / "metrics.json").read_text())["metrics"]["global_step"] == 2.0
    _, package = load_package(str(run / "export" / "package"))
    assert torch.equal(package[key], full["state_dict"][key]), "resume did not load the checkpoint's weights"
    assert all(torch.equal(package[k], v) for k, v in full["state_dict"].items() if k.startswith("policy."))


def test_fsdp1_and_other_sharding_strategies_are_refused_with_a_pointer_to_fsdp2():
    from types import SimpleNamespace

    from lightning.pytorch.strategies import DeepSpeedStrategy, FSDPStrategy

    from zoo.core.recipe import RecipeError
    from zoo.methods.shapo.module import ShaPOModule

    m = ShaPOModule(arch="zoo-lm-tiny", eval_generation=False)
    m._trainer = SimpleNamespace(strategy=FSDPStrategy())
    with pytest.raises(RecipeError, match="trainer.strategy=fsdp: .*use trainer.strategy=fsdp2"):
        m.setup("fit")
    m._trainer = SimpleNamespace(strategy=DeepSpeedStrategy.__new__(DeepSpeedStrategy))
    with pytest.raises(RecipeError, match="trainer.strategy: .*fsdp2"):
        m.setup("fit")
    m.hparams.variant = "dpo"  # the baselines are not refused
    m._trainer = SimpleNamespace(strategy=FSDPStrategy())
    m.setup("fit")


def test_a_tensor_parallel_mesh_is_refused_naming_the_strategy():
    from zoo.core.recipe import RecipeError
    from zoo.methods.shapo.module import ShaPOModule

    class Dim:
        def size(self):
            return 2

    class Mesh:  # a 2-D (data, tensor) mesh with tensor-parallel size 2
        mesh_dim_names = ("data_parallel", "tensor_parallel")

        def __getitem__(self, name):
            return Dim()

    m = ShaPOModule(arch="zoo-lm-tiny", eval_generation=False)
    m._device_mesh = Mesh()
    with pytest.raises(RecipeError, match="trainer.strategy: tensor_parallel_size=2 is not supported"):
        m.configure_model()
