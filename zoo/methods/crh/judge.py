"""The LM judge (ours, in place of the authors' Llama-3.3-70B-Instruct judge, which needs an API): the steered LM
itself is asked whether a text is about the concept, and its next-token probabilities answer.

Score: ``P(yes) / (P(yes) + P(no))`` at the first answer position after the chat-templated question
:data:`JUDGE_PROMPT`, where ``P(yes)`` sums the probability of the first token of ``Yes``, ``yes``, `` Yes`` and
`` yes`` (``P(no)`` likewise). A text is judged to contain the concept when the score is at least a threshold (0.5:
yes more likely than no). One forward pass per text, no generation.
"""

from __future__ import annotations

import torch

from zoo.methods.crh.pairs import prompt_text

JUDGE_PROMPT = 'Text: "{text}"\n\nIs this text about {concept}? Answer yes or no.'
ANSWERS = {"yes": ("Yes", "yes", " Yes", " yes"), "no": ("No", "no", " No", " no")}


def answer_ids(tokenizer) -> dict[str, list[int]]:
    """First token ids of each spelling in :data:`ANSWERS`: ``{"yes": [...], "no": [...]}`` (deduplicated).

    Raises:
        ValueError: a yes and a no spelling share a first token (the score would be meaningless).
    """
    ids = {k: sorted({tokenizer.encode(w, add_special_tokens=False)[0] for w in words}) for k, words in ANSWERS.items()}
    if set(ids["yes"]) & set(ids["no"]):
        raise ValueError(f"yes and no share first tokens {sorted(set(ids['yes']) & set(ids['no']))}")
    return ids


@torch.no_grad()
def judge_scores(
    model, tokenizer, texts: list[str], concepts: list[str], batch_size: int = 16, template: str = "chat"
) -> torch.Tensor:
    """The judge score of each ``texts[i]`` for ``concepts[i]`` (the concept's description): ``[N]`` float in [0, 1].

    Args:
        template: ``chat`` (the tokenizer's chat template, no special tokens added) or ``plain``
            (``User: ...\\nAssistant: `` with the tokenizer's special tokens), as :func:`pairs.prompt_text`.

    Raises:
        ValueError: ``texts`` and ``concepts`` differ in length.
    """
    if len(texts) != len(concepts):
        raise ValueError(f"{len(texts)} texts but {len(concepts)} concepts")
    ids = answer_ids(tokenizer)
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    out = []
    try:
        for i in range(0, len(texts), batch_size):
            prompts = [
                prompt_text(tokenizer, JUDGE_PROMPT.format(text=t.strip(), concept=c), template)
                for t, c in zip(texts[i : i + batch_size], concepts[i : i + batch_size])
            ]
            enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=template == "plain").to(
                model.device
            )
            probs = model(**enc, logits_to_keep=1).logits[:, -1].float().softmax(-1).cpu()
            p_yes, p_no = probs[:, ids["yes"]].sum(-1), probs[:, ids["no"]].sum(-1)
            out.append(p_yes / (p_yes + p_no).clamp_min(1e-12))
    finally:
        tokenizer.padding_side = side
    return torch.cat(out) if out else torch.zeros(0)
