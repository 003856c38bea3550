"""A controlled preference task with a known true reward (GENERATED labels, ours; issue 15).

Real prompts, generated replies, generated preferences:

* prompts: instructions of the shipped Alpaca subset (``data/alpaca-subset/alpaca_5000.json``: train, validation and
  an in-domain test part) and first turns of HH-RLHF harmless ``preference_eval`` conversations (the shifted test
  domain: never trained on);
* replies: two samples per prompt from the model that is aligned (zoo-lm.chat, or SmolLM2-135M-Instruct for
  ``--model smollm2-135m-instruct``; temperature 1, :data:`NEW_TOKENS` tokens);
* preference: the **oracle** r(y) = VADER compound sentiment of the reply (Hutto & Gilbert 2014, the
  ``vaderSentiment`` package, extra ``oracle``); the reply with the higher r is ``chosen``; pairs with
  |r_1 - r_2| < :data:`~zoo.methods.shapo.controlled_data.MIN_GAP` are dropped (no preference). "More positive wording" is a rule a 5M model can
  learn, and its true reward is known for any reply, so a trained policy's replies can be scored exactly.

``python -m zoo.methods.shapo.controlled build`` writes ``data/shapo-controlled/{train,val}.jsonl`` (pairs, the
:mod:`zoo.data.preference` schema plus ``reward_chosen``/``reward_rejected``) and ``test_prompts.json``;
``build --model smollm2-135m-instruct --out data/shapo-controlled-smollm2 --train-pairs 96 --val-pairs 48
--oversample 3`` the same
task with SmolLM2's own replies. Label noise (``data.flip_rate``) and training are the recipe's
(``recipes/shapo-controlled.yaml``, ``recipes/shapo-controlled-smollm2.yaml``); the oracle only scores.
``python -m zoo.methods.shapo.controlled sweep [--recipe R]`` trains every arm (:data:`ARMS`) x flip rate x seed and
writes ``results/shapo/controlled[-SUFFIX].json``: true-reward win rate against the reference (the starting policy)
and KL, in and out of the training domain.

The oracle, the prompts and the builder live in :mod:`zoo.methods.shapo.controlled_data`; this module holds the
win-rate statistics, the sweep and the command line of both (one experiment read top to bottom: run an arm, score
it, tabulate; ~430 lines).

Kept as one module: the controlled task's command; its win rates, intervals and arms all
read the same generated task.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import torch

from zoo.core.data import repo_root
from zoo.core.results import summarise, write_result
from zoo.methods.shapo.controlled_data import (
    NEW_TOKENS,
    OUT_DIR,
    SIZES,
    build,
    decode,
    oracle_reward,
    sample_replies,
)


def win_rate(policy_rewards: list[float], reference_rewards: list[float]) -> float:
    """Share of prompts where the policy's reply has the higher true reward than the reference's, a tie counting
    0.5 (one reply each per prompt, paired by position).

    Raises:
        ValueError: the lists differ in length or are empty.
    """
    wins = prompt_wins(policy_rewards, reference_rewards)
    return sum(wins) / len(wins)


def prompt_wins(policy_rewards: list[float], reference_rewards: list[float]) -> list[float]:
    """Per prompt: 1 if the policy's reply has the higher true reward, 0.5 on a tie, else 0 (paired by position).

    Raises:
        ValueError: the lists differ in length or are empty.
    """
    if len(policy_rewards) != len(reference_rewards) or not policy_rewards:
        raise ValueError("prompt_wins needs two non-empty lists of the same length")
    return [1.0 if a > b else 0.5 if a == b else 0.0 for a, b in zip(policy_rewards, reference_rewards)]


def paired_win_ci(
    arm_runs: list[dict], dpo_runs: list[dict], domain: str, reference: list[float]
) -> dict[str, float] | None:
    """Win-rate difference arm - DPO with a 95% percentile bootstrap CI that resamples test prompts.

    For each test prompt, ``win(arm) - win(DPO)`` (:func:`prompt_wins` against the same reference replies) is
    averaged over the seeds present for both; the prompts are the resampled units (a cluster bootstrap: the same
    prompts recur in every seed, so seeds are not independent items). The pairing removes the prompt's difficulty.

    Args:
        arm_runs, dpo_runs: run records holding ``seed`` and ``rewards_<domain>`` (one true reward per prompt).
        reference: the reference's true reward per prompt of ``domain``.
    Returns:
        ``{"mean", "lo", "hi", "n"}`` (``n`` = prompts), or None when no seed has both runs.
    """
    from zoo.core.stats import bootstrap_ci

    dpo = {r["seed"]: r for r in dpo_runs if f"rewards_{domain}" in r}
    per_seed = []
    for r in arm_runs:
        if r["seed"] in dpo and f"rewards_{domain}" in r:
            a = prompt_wins(r[f"rewards_{domain}"], reference)
            b = prompt_wins(dpo[r["seed"]][f"rewards_{domain}"], reference)
            per_seed.append([x - y for x, y in zip(a, b)])
    if not per_seed:
        return None
    per_prompt = [sum(d) / len(d) for d in zip(*per_seed)]
    lo, hi = bootstrap_ci(per_prompt)
    return {"mean": sum(per_prompt) / len(per_prompt), "lo": lo, "hi": hi, "n": len(per_prompt)}


# ----------------------------------------------------------------------------------------------- the sweep
#: arm -> overrides of recipes/shapo-controlled.yaml (the reward arm also gets its cost model, see :func:`run_arm`)
ARMS = {
    "dpo": ["model.variant=dpo"],
    "ipo": ["model.variant=dpo", "model.loss=ipo"],
    "rdpo": ["model.variant=dpo", "model.loss=rdpo"],
    "simpo": ["model.variant=dpo", "model.loss=simpo"],
    "drdpo": ["model.variant=dpo", "model.aggregation=drdpo"],
    "shapo-token": ["model.variant=token"],
    "shapo-reward": ["model.variant=reward"],
}
METRICS = ("win_rate_alpaca", "win_rate_hh", "reward_alpaca", "reward_hh", "kl_alpaca", "kl_hh", "val_accuracy")
PAPER = (
    "ShaPO 'consistently improves safety robustness over popular preference optimization methods' under noisy "
    "preferences and distribution shift (abstract; per-setting numbers not available to us)"
)


def evaluate_policy(
    policy,
    reference,
    tokenizer,
    prompts: dict[str, list[str]],
    reference_rewards: dict,
    seed: int = 0,
    new_tokens: int = NEW_TOKENS,
) -> dict[str, float]:
    """True-reward win rate against the reference's replies, mean true reward and mean KL(pi || pi_ref) per reply
    (nats, summed over reply tokens) on each test domain; one seeded sampled reply (temperature 1) per prompt.
    ``rewards_<domain>`` keeps the true reward of each reply (for paired comparisons).

    Args:
        reference_rewards: ``{domain: [r(reference reply) per prompt]}`` (same prompts, same sampling seed).
    """
    from zoo.methods.shapo.lm import completion_kl

    out = {}
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    for domain, texts in prompts.items():
        ids, replies = sample_replies(policy, tokenizer, texts, seed, max_new_tokens=new_tokens)
        rewards = oracle_reward(decode(tokenizer, replies))
        with torch.no_grad():
            kl = completion_kl(
                lambda i, m: policy(input_ids=i, attention_mask=m).logits,
                lambda i, m: reference(input_ids=i, attention_mask=m).logits,
                ids,
                replies,
                pad,
                32,
            )
        out[f"win_rate_{domain}"] = win_rate(rewards, reference_rewards[domain])
        out[f"reward_{domain}"] = sum(rewards) / len(rewards)
        out[f"rewards_{domain}"] = rewards
        out[f"kl_{domain}"] = float(kl.mean())
    return out


def test_prompts(n: int, data_dir: str | Path = OUT_DIR) -> dict[str, list[str]]:
    """The first ``n`` test prompts of each domain (``alpaca``: in domain, ``hh``: shifted) in ``data_dir``."""
    tests = json.loads((repo_root() / data_dir / "test_prompts.json").read_text())
    return {"alpaca": tests["test_alpaca"][:n], "hh": tests["test_hh"][:n]}


def reference_id(cfg: dict) -> str:
    """What the arms of a resolved recipe ``cfg`` start from and are compared with: ``model.reference``, else
    ``init_from``, else the base ``model.arch`` itself (a LoRA recipe whose reference is the base with the adapters
    disabled)."""
    return cfg["model"].get("reference") or cfg.get("init_from") or cfg["model"]["arch"]


def run_arm(
    arm: str, seed: int, flip: float, work: Path, scale: list[str], n_test: int, recipe: str = "shapo-controlled.yaml"
) -> dict:
    """Train one arm (``train.py recipe=RECIPE`` + the arm's and the scale's overrides) and score it against the
    reference (:func:`reference_id`) on the test prompts next to the recipe's training pairs."""
    from zoo.cli import compose_and_validate
    from zoo.core.loading import load_module
    from zoo.core.training import train
    from zoo.models.causal_lm import load_causal_lm

    extra = list(ARMS[arm]) + ([f"+model.rdpo_epsilon={flip}"] if arm == "rdpo" and flip > 0 else [])
    if arm == "shapo-reward":
        recipe_cfg = compose_and_validate([f"recipe={recipe}", *scale])
        extra.append(f"model.cost_model={train_cost_model(flip, work, scale, recipe_cfg)}")
    cfg = compose_and_validate(
        [
            f"recipe={recipe}",
            f"seed={seed}",
            f"data.flip_rate={flip}",
            f"out_dir={work / 'runs'}",
            "logger.kind=none",
            "export.formats=[]",
            *scale,
            *extra,
        ]
    )
    t0 = time.time()
    run_dir = train(cfg)
    metrics = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    module, _ = load_module(str(run_dir), "last")
    reference, tok = load_causal_lm(reference_id(cfg))
    prompts = test_prompts(n_test, Path(cfg["data"]["path"]).parent)
    res = evaluate_policy(module.policy, reference, tok, prompts, reference_rewards(reference, tok, prompts, work))
    del module, reference
    shutil.rmtree(run_dir, ignore_errors=True)  # 60 MB checkpoints per run: the numbers are what is kept
    return res | {
        "val_accuracy": metrics.get("val/accuracy"),
        "wall_s": time.time() - t0,
        "steps": metrics.get("global_step"),
    }


def reference_rewards(reference, tokenizer, prompts: dict[str, list[str]], work: Path) -> dict[str, list[float]]:
    """True rewards of the reference's seeded replies (one per prompt, sampling seed 0), cached in ``work``."""
    path = work / f"reference-{len(prompts['hh'])}.json"
    if not path.is_file():
        rewards = {
            d: oracle_reward(decode(tokenizer, sample_replies(reference, tokenizer, t, 0)[1]))
            for d, t in prompts.items()
        }
        path.write_text(json.dumps(rewards))
    return json.loads(path.read_text())


def cost_model_recipe(recipe_cfg: dict) -> str:
    """The cost-model recipe that reads the policy's tokens: ``shapo-cost-model-smollm2.yaml`` when the arms start
    from the pretrained SmolLM2 base, ``shapo-cost-model.yaml`` (zoo-lm.base) otherwise.

    Raises:
        ValueError: the arms start from another pretrained base (no cost-model recipe for it).
    """
    from zoo.core.bases import BASES

    start = reference_id(recipe_cfg)
    if start == "smollm2-135m-instruct":
        return "shapo-cost-model-smollm2.yaml"
    if start in BASES:
        raise ValueError(f"no shapo-cost-model recipe over {start}: the shapo-reward arm cannot run on it")
    return "shapo-cost-model.yaml"


def train_cost_model(flip: float, work: Path, scale: list[str], recipe_cfg: dict) -> str:
    """A shapo-cost-model (:func:`cost_model_recipe`) trained on the same flipped training pairs as the arms of
    ``recipe_cfg`` (one epoch in batches of 32, lr 3e-4; one validation at the end, on the clean validation pairs, so
    no selection on them); reward-level ShaPO's soft labels come from it, never from the oracle. Cached per flip
    rate in ``work``."""
    from zoo.cli import compose_and_validate
    from zoo.core.training import train

    done = work / f"cost-f{flip}.txt"
    if not done.is_file() and not _claim(done.with_suffix(".lock")):
        while not done.is_file():  # another sweep process is training it
            time.sleep(10)
    if done.is_file():
        return done.read_text().strip()
    keep = [o for o in scale if o.startswith("data.max")]
    cfg = compose_and_validate(
        [
            f"recipe={cost_model_recipe(recipe_cfg)}",
            f"data.path={recipe_cfg['data']['path']}",
            f"data.val_path={recipe_cfg['data']['val_path']}",
            f"data.flip_rate={flip}",
            "data.max_length=64",
            "data.max_prompt_length=32",
            "trainer.max_epochs=1",
            "data.batch_size=32",
            "model.optimizer.lr=3.0e-4",
            f"out_dir={work / 'cost'}",
            "logger.kind=none",
            "export.formats=[]",
            *keep,
        ]
    )
    run_dir = train(cfg)
    done.write_text(str(run_dir))
    return str(run_dir)


def _claim(lock: Path) -> bool:
    try:
        lock.open("x").close()
        return True
    except FileExistsError:
        return False


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="The controlled preference task: build it, or run the sweep.")
    ap.add_argument("what", choices=["build", "sweep"])
    ap.add_argument("--model", default="zoo-lm.chat", help="build: the model whose replies make the pairs")
    ap.add_argument("--out", help=f"build: output directory (default {OUT_DIR})")
    ap.add_argument("--train-pairs", type=int, default=SIZES["train"], help="build: training pairs kept")
    ap.add_argument("--val-pairs", type=int, default=SIZES["val"], help="build: validation pairs kept")
    ap.add_argument("--oversample", type=int, default=2, help="build: prompts per kept pair (ties are dropped)")
    ap.add_argument("--recipe", default="shapo-controlled.yaml", help="sweep: the recipe every arm overrides")
    ap.add_argument("--suffix", default="", help="sweep: results/shapo/controlled<SUFFIX>.json")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--test-prompts", type=int, default=48)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--flip-rates", type=float, nargs="+", default=[0.0, 0.2, 0.4])
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra recipe override")
    ap.add_argument("--work", help="run cache (default /tmp/shapo-controlled-<recipe name>)")
    ap.add_argument("--write-only", action="store_true", help="write the table from the finished runs in --work")
    ap.add_argument("--note", default="", help="appended to the table's notes (e.g. how the grid was cut)")
    args = ap.parse_args(argv)
    if args.what == "build":
        sizes = SIZES | {"train": args.train_pairs, "val": args.val_pairs}
        print(build(args.out, model_id=args.model, sizes=sizes, oversample=args.oversample))
        return
    torch.set_num_threads(1)
    work = Path(args.work or f"/tmp/shapo-controlled-{Path(args.recipe).stem}")
    work.mkdir(parents=True, exist_ok=True)
    scale = [f"trainer.max_steps={args.steps}", *args.set]
    todo = [] if args.write_only else [(a, s, f) for s in args.seeds for f in args.flip_rates for a in args.arms]
    for arm, seed, flip in todo:  # several sweep processes may share ``work``: each run is claimed by a lock file
        out = work / f"{arm}-s{seed}-f{flip}.json"
        if out.is_file() or not _claim(out.with_suffix(".lock")):
            continue
        res = run_arm(arm, seed, flip, work, scale, args.test_prompts, args.recipe) | {
            "method": arm,
            "seed": seed,
            "flip_rate": flip,
            "recipe": args.recipe,
        }
        out.write_text(json.dumps(res))
        print(f"{arm} s{seed} f{flip}: {res}", flush=True)
    runs = [json.loads(p.read_text()) for p in sorted(work.glob("*-s*-f*.json"))]
    runs = [
        r
        for r in runs
        if r["method"] in args.arms
        and r["seed"] in args.seeds
        and r["flip_rate"] in args.flip_rates
        and r.get("recipe", args.recipe) == args.recipe  # runs cached before the recipe was recorded: as given
    ]
    dpo = {(r["flip_rate"], r["seed"]): r for r in runs if r["method"] == "dpo"}
    paired = ("win_rate_alpaca", "win_rate_hh")  # same seed, same flips, same test replies of the reference
    rows = [
        {
            "method": r["method"],
            "flip_rate": r["flip_rate"],
            "seed": r["seed"],
            **{m: r[m] for m in METRICS},
            **{
                f"{m} - DPO": r[m] - dpo[(r["flip_rate"], r["seed"])][m]
                for m in paired
                if r["method"] != "dpo" and (r["flip_rate"], r["seed"]) in dpo
            },
            "wall_s": r["wall_s"],
        }
        for r in sorted(runs, key=lambda r: (r["flip_rate"], list(ARMS).index(r["method"]), r["seed"]))
    ]
    from zoo.cli import compose_and_validate

    cfg = compose_and_validate([f"recipe={args.recipe}", *args.set])
    ref, batch = reference_id(cfg), cfg["data"]["batch_size"]
    lora = cfg["model"]["lora"]["r"]
    reference = json.loads((work / f"reference-{args.test_prompts}.json").read_text())
    summary = summarise(rows, [*METRICS, *(f"{m} - DPO" for m in paired)], by=["flip_rate", "method"])
    for row in summary:
        arm = [r for r in runs if r["method"] == row["method"] and r["flip_rate"] == row["flip_rate"]]
        base = [r for r in runs if r["method"] == "dpo" and r["flip_rate"] == row["flip_rate"]]
        for domain in ("alpaca", "hh"):
            ci = paired_win_ci(arm, base, domain, reference[domain]) if row["method"] != "dpo" else None
            if ci is not None:
                row[f"win_rate_{domain} - DPO, 95% CI"] = f"{ci['mean']:+.3f} [{ci['lo']:+.3f}, {ci['hi']:+.3f}]"
    command = (
        "python -m zoo.methods.shapo.controlled sweep "
        + (f"--recipe {args.recipe} --suffix={args.suffix} " if args.recipe != "shapo-controlled.yaml" else "")
        + f"--steps {args.steps} --test-prompts "
        f"{args.test_prompts} --seeds {' '.join(map(str, args.seeds))} --flip-rates "
        f"{' '.join(map(str, args.flip_rates))} --arms {' '.join(args.arms)}"
        + "".join(f" --set {kv}" for kv in args.set)
    )
    notes = (
        f"GENERATED preference task (labels from an oracle, not people): train {ref}"
        + (f" + LoRA r {lora}" if lora else "")
        + f" ({args.recipe}) for {args.steps} optimiser steps of {batch} oracle-labelled Alpaca pairs (two {ref} "
        "replies per prompt; chosen = higher VADER compound sentiment; a seeded flip_rate of the training pairs "
        "swapped, the same pairs for every arm and seed), then sample one reply (temperature 1, seeded, <= 32 "
        f"tokens) per test prompt: {args.test_prompts} held-out Alpaca prompts (in domain) and {args.test_prompts} "
        "HH-RLHF preference_eval first turns (shifted domain). win_rate = share of prompts where the policy's reply "
        f"has a higher oracle reward than {ref}'s reply (tie 0.5); reward = mean oracle reward; kl = mean "
        f"summed per-token KL(pi || {ref}) along the policy's replies; val_accuracy = implicit-reward "
        "accuracy on the clean (never flipped) oracle-labelled validation pairs (tie 0.5). 'win_rate_* - DPO, 95% "
        "CI' = the paired difference to DPO (same seed, same flips, same reference replies), averaged over seeds per "
        "test prompt, with a percentile bootstrap interval over prompts. rDPO's epsilon = the flip rate (0.1 at 0). shapo-reward's "
        f"soft labels come from a {cost_model_recipe(cfg)[:-5]} trained one epoch (batches of 32) on the same flipped pairs "
        "(never the oracle). ShaPO: rho = 0.05, every step a ShaPO step (shapo_every = 1), on 1% of "
        f"down-projection neurons ({args.recipe} plus the overrides in the command)."
    )
    cost_acc = {}
    for f in args.flip_rates:
        done = work / f"cost-f{f}.txt"
        if done.is_file():
            m = json.loads((Path(done.read_text().strip()) / "metrics.json").read_text())["metrics"]
            cost_acc[str(f)] = m.get("val/accuracy")
    notes += (
        (
            " Clean-val accuracy of those cost models (flip rate: accuracy): "
            + ", ".join(f"{k}: {v:.3f}" for k, v in cost_acc.items())
            + "."
        )
        if cost_acc
        else ""
    )
    notes += f" {args.note}" if args.note else ""
    print(
        write_result(
            "shapo",
            f"controlled{args.suffix}",
            rows,
            summary=summary,
            paper=PAPER,
            notes=notes,
            command=command,
            extra={"cost_model_val_accuracy": cost_acc},
        )
    )


if __name__ == "__main__":
    main()
