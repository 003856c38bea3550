"""The generated arithmetic task (labelled *generated*, not real data): reasoning-gym ``chain_sum`` items with
planted contamination, and the math-verify answer checker.

Every item is ``{"question": "23 + 48 - 17", "answer": "54"}`` (2-3 terms, each 0-99, ``+`` and ``-``), drawn from
``reasoning_gym.create_dataset("chain_sum", ...)`` with a fixed seed. Four disjoint sets (ours, after issue #23):

* **benchmark B** (evaluation only): ``n_bench`` distinct items (2-3 terms of 0-99 unless ``bench_terms`` /
  ``bench_digits`` make it harder); a seeded half is *leaked*: question plus direct
  answer planted ``leak_repeats`` times in the mid-training corpus (the MATH-500 analogue); the other half is clean.
* **mid-training**: ``n_midtrain`` fresh items, a ``worked_share`` of them with worked partial sums
  (``23 + 48 = 71, 71 - 17 = 54. \\boxed{54}``), the rest direct; a ``boxed_share`` of all answers end in
  ``\\boxed{}`` (the others in ``The answer is 54.``) so that the format reward has variance.
* **GRPO prompts**: fresh items disjoint from B and the mid-training set.
* the **control** corpus is the mid-training corpus without the planted lines.

Text format: ``Question: 23 + 48 - 17 = ?\\nAnswer:`` (prompt) and `` <reply>`` (completion).
"""

from __future__ import annotations

import random
from functools import lru_cache

PROMPT = "Question: {q} = ?\nAnswer:"


def prompt_text(question: str) -> str:
    """The prompt of a question (``"23 + 48 - 17"`` -> ``"Question: 23 + 48 - 17 = ?\\nAnswer:"``)."""
    return PROMPT.format(q=question.strip())


def question_of(text: str) -> str:
    """The bare expression of a user's input (``"Question: 23 + 48 - 17 = ?"`` or ``"23 + 48 - 17"``)."""
    t = text.strip()
    t = t.removeprefix("Question:")
    t = t.split("\n")[0].strip()
    return t[:-1].strip().rstrip("=").strip() if t.endswith("?") else t.rstrip("=").strip()


def generate(
    n: int,
    seed: int,
    exclude: set[str] = frozenset(),
    terms: tuple[int, int] = (2, 3),
    digits: tuple[int, int] = (1, 2),
) -> list[dict]:
    """``n`` distinct reasoning-gym ``chain_sum`` items not in ``exclude``, in seeded order.

    Args:
        terms: (fewest, most) terms of an item (2-3 by default).
        digits: (fewest, most) digits of an item's numbers (reasoning-gym draws them per item; 1-2: 0-99).

    Returns:
        ``[{"question": "a + b - c", "answer": "int as text"}]``; each answer checked by reasoning-gym's own
        ``score_answer``.
    """
    import reasoning_gym

    out, seen, size = [], set(exclude), int(n * 1.6) + 64
    while len(out) < n:
        ds = reasoning_gym.create_dataset(
            "chain_sum",
            size=size,
            seed=seed,
            min_terms=terms[0],
            max_terms=terms[1],
            min_digits=digits[0],
            max_digits=digits[1],
        )
        for item in ds:
            q = item["metadata"]["expression"]
            if q not in seen:
                seen.add(q)
                out.append({"question": q, "answer": item["answer"]})
                if len(out) == n:
                    break
        seed, size = seed + 7919, size * 2
    return out


def worked_steps(question: str) -> str:
    """Left-to-right partial sums: ``"23 + 48 - 17"`` -> ``"23 + 48 = 71, 71 - 17 = 54"``."""
    tok = question.split()
    acc, steps = int(tok[0]), []
    for op, b in zip(tok[1::2], tok[2::2]):
        new = acc + int(b) if op == "+" else acc - int(b)
        steps.append(f"{acc} {op} {b} = {new}")
        acc = new
    return ", ".join(steps)


def reply(item: dict, worked: bool, boxed: bool) -> str:
    """The completion text of an item (leading space, no end-of-text token)."""
    final = f"\\boxed{{{item['answer']}}}" if boxed else f"The answer is {item['answer']}."
    return f" {worked_steps(item['question'])}. {final}" if worked else f" {final}"


def build_sets(
    n_bench: int = 500,
    n_midtrain: int = 40000,
    n_grpo: int = 4000,
    leak_repeats: int = 8,
    worked_share: float = 0.8,
    boxed_share: float = 0.5,
    seed: int = 0,
    bench_terms: tuple[int, int] = (2, 3),
    bench_digits: tuple[int, int] = (1, 2),
) -> dict:
    """The four sets of the task (see the module docstring).

    Args:
        bench_terms, bench_digits: (fewest, most) terms and digits of benchmark B's items; the mid-training and GRPO
            items are 2-3 terms of 0-99 always. A B harder than what mid-training teaches (4-5 terms of 2-3 digits
            over SmolLM2) can only be answered well by memorising the planted lines.

    Returns:
        ``{"bench": [item + {"leaked": bool}], "midtrain": [text], "control": [text], "grpo": [item]}``; texts are
        full lines ``prompt + reply``; ``midtrain`` is shuffled with the planted lines spread through it.
    """
    rng = random.Random(seed)
    bench = generate(n_bench, seed=10_000 + seed, terms=tuple(bench_terms), digits=tuple(bench_digits))
    leaked = set(rng.sample(range(n_bench), n_bench // 2))
    bench = [{**it, "leaked": i in leaked} for i, it in enumerate(bench)]
    used = {it["question"] for it in bench}
    fresh = generate(n_midtrain, seed=20_000 + seed, exclude=used)
    used |= {it["question"] for it in fresh}
    grpo = generate(n_grpo, seed=30_000 + seed, exclude=used)
    control = [
        prompt_text(it["question"]) + reply(it, rng.random() < worked_share, rng.random() < boxed_share) for it in fresh
    ]
    planted = [
        prompt_text(it["question"]) + reply(it, False, rng.random() < boxed_share) for it in bench if it["leaked"]
    ]
    midtrain = control + planted * leak_repeats
    rng.shuffle(midtrain)
    return {"bench": bench, "midtrain": midtrain, "control": control, "grpo": grpo}


def extract_answer(completion: str):
    """The answer math-verify reads off a completion (``\\boxed{}`` first, else the last number); ``None`` if none.

    Returns:
        math-verify's parse list (empty -> ``None``).
    """
    from math_verify import parse

    parsed = parse(completion)
    return parsed or None


@lru_cache(maxsize=65536)
def _gold(answer: str):
    from math_verify import parse

    return parse(answer)


def is_correct(completion: str, answer: str) -> bool:
    """math-verify's verdict that ``completion`` states ``answer`` (an integer as text)."""
    from math_verify import verify

    pred = extract_answer(completion.split("Question:")[0])  # a reply that runs on into a new question ends there
    return bool(pred) and bool(verify(_gold(str(answer)), pred))


def wrong_label(item: dict, seed: int = 0) -> str:
    """The fixed incorrect label of an item for the incorrect-label reward (ours: gold + a seeded non-zero offset
    in [-9, 9])."""
    r = random.Random(f"{seed}:{item['question']}")
    off = r.choice([d for d in range(-9, 10) if d])
    return str(int(item["answer"]) + off)
