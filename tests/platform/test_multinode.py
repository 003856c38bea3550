"""Multi-node training as README documents it: two launchers on this machine (node ranks 0 and 1, gloo over loopback
only), ``torchrun --nnodes 2 --nproc-per-node 1`` or Lightning's own (``python train.py`` with ``NODE_RANK``), train one
recipe with ``trainer.num_nodes=2``; the run directory (``ZOO_RUN_DIR``, as on a shared file
system), its config and checkpoints are written once, by global rank 0, and the run is named once."""

import os
import socket
import subprocess
import sys

import pytest
import torch
import yaml

from zoo.core.data import repo_root


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["torchrun", "lightning"])
def test_two_nodes_one_process_each_on_localhost(launcher, tmp_path):
    """``torchrun``: the README's command; ``lightning``: ``python train.py`` started on each node with ``NODE_RANK``,
    ``MASTER_ADDR`` and ``MASTER_PORT`` set (Lightning's own environment, which starts a node's devices itself)."""
    run_dir, port = tmp_path / "shared" / "zoo-lm-2nodes", _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("ZOO_RUN_DIR", "RANK", "LOCAL_RANK", "NODE_RANK")}
    env |= {"ZOO_RUN_DIR": str(run_dir), "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}

    def node(rank: int) -> subprocess.Popen:
        train = [
            *("train.py", "recipe=zoo-lm.yaml", "overlay=tiny/zoo-lm.yaml", "trainer.accelerator=cpu"),
            *("trainer.devices=1", "trainer.num_nodes=2", "trainer.strategy=ddp", "export.formats=[]"),
            f"out_dir={tmp_path / 'runs'}",
        ]
        node_env = dict(env)
        if launcher == "torchrun":
            cmd = [
                *(sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1"),
                *("--node-rank", str(rank), "--master-addr", "127.0.0.1", "--master-port", str(port), *train),
            ]
        else:
            cmd = [sys.executable, *train]
            node_env |= {"NODE_RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        return subprocess.Popen(
            cmd, cwd=repo_root(), env=node_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    nodes = [node(0), node(1)]
    outs = [p.communicate(timeout=600) for p in nodes]
    for p, (_, err) in zip(nodes, outs):
        assert p.returncode == 0, err[-4000:]
    assert sum(out.count("run: ") for out, _ in outs) == 1, [out for out, _ in outs]  # named once, by rank 0
    names = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert names[-1] == "last.ckpt" and len(names) == 2 and names[0].startswith("best-"), names  # save_top_k 1
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["trainer"]["num_nodes"] == 2
    assert torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 2
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("*.ckpt"))  # nothing elsewhere
