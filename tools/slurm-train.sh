#!/bin/bash
# Multi-node zoo training under SLURM: one task per GPU, every task started by srun (SLURM starts the ranks, so
# Lightning's SLURM environment reads them from SLURM_PROCID / SLURM_NODEID / SLURM_NTASKS and does not launch).
#   sbatch tools/slurm-train.sh recipe=paper/shapo-llama3.2-3b.yaml model.arch=/shared/models/Llama-3.2-3B-sft
# Edit the #SBATCH lines for your cluster; --nodes and --gpus-per-node must match trainer.num_nodes and
# trainer.devices, which this script passes from SLURM's own values. Not run here (no cluster): the same launch as
# torchrun is tested as 2 nodes x 1 process on localhost (tests/platform/test_multinode.py).
#SBATCH --job-name=zoo-train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --time=24:00:00
#SBATCH --output=zoo-train-%j.log
set -euo pipefail
# one run directory on a file system every node sees; ranks > 0 refuse to start without it
export ZOO_RUN_DIR="${ZOO_RUN_DIR:-$PWD/runs/slurm-$SLURM_JOB_ID}"
srun python train.py "$@" trainer.accelerator=gpu \
  trainer.num_nodes="$SLURM_JOB_NUM_NODES" trainer.devices="$SLURM_NTASKS_PER_NODE"
