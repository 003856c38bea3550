"""The judges against hand labels (CRH on a pretrained chat LM): which steered outputs a person labels
(:func:`pick_for_labelling`, the rule in :data:`HAND_RULE`) and how each judge agrees with those labels
(:func:`agreement_rows`: accuracy, Cohen's kappa, precision, recall, the LM score's AUC). The files are read and
written by ``python -m zoo.methods.crh.pretrained sample`` / ``agreement``."""

from __future__ import annotations

import random

import numpy as np

from zoo.methods.crh.labels import CONCEPT, GIBBERISH, label

HAND_RULE = (
    "1 if the output names or clearly exhibits the concept as described (its topic, terms or examples), "
    "even in passing or garbled; for concepts that are kinds of tokens (numbers, codes, symbols, HTML tags, "
    "place names) one clear instance counts; 0 otherwise, including a bare word shared with the concept in "
    "another sense, a word from the concept's domain without the concept and a digit cut off mid-number; "
    "read with the concept and the text only (the judge and keyword fields hidden)"
)


def pick_for_labelling(lines: list[dict], concepts: dict[int, dict], n: int, seed: int) -> dict:
    """``{"rule", "strata", "items"}``: ``n`` steered outputs of ``lines`` (not gibberish) to label by hand, half
    from outputs either judge calls positive, half from the rest (seeded), shuffled; each item's ``hand`` is None.
    ``concepts``: ``{cid: concept row}`` (its ``concept`` text and ``keywords``)."""
    items = [
        {
            "seed": d["seed"],
            "cid": d["cid"],
            "qid": r[0],
            "step": r[1],
            "concept": concepts[d["cid"]]["concept"],
            "text": r[4],
            "keyword": int(label(r[4], concepts[d["cid"]]["keywords"]) == CONCEPT),
            "judge_score": r[6],
            "judge": int(r[3] == CONCEPT),
        }
        for d in lines
        for r in d["rows"]
        if r[3] != GIBBERISH
    ]
    rng = random.Random(seed)
    pos = [i for i in items if i["keyword"] or i["judge"]]
    neg = [i for i in items if not (i["keyword"] or i["judge"])]
    k = min(len(pos), n // 2)
    pick = rng.sample(pos, k) + rng.sample(neg, min(len(neg), n - k))
    rng.shuffle(pick)
    strata = {
        "either_judge_positive": {"picked": k, "pool": len(pos)},
        "both_negative": {"picked": len(pick) - k, "pool": len(neg)},
    }
    return {"rule": HAND_RULE, "strata": strata, "items": [{**i, "hand": None} for i in pick]}


def kappa(a: np.ndarray, b: np.ndarray) -> float | None:
    """Cohen's kappa of two 0/1 label vectors; None when chance agreement is 1 (both constant and equal)."""
    po = float(np.mean(a == b))
    pe = float(np.mean(a) * np.mean(b) + (1 - np.mean(a)) * (1 - np.mean(b)))
    return None if pe == 1 else (po - pe) / (1 - pe)


def agreement_rows(items: list[dict]) -> list[dict]:
    """Accuracy, Cohen's kappa, precision and recall of each judge against the hand labels of ``items`` (and of the
    judges with each other), per stratum and pooled, plus the ROC AUC of the LM-judge score (in the accuracy
    column). ``items``: labelled items of :func:`pick_for_labelling` (``hand`` 0 or 1)."""
    from sklearn.metrics import roc_auc_score

    rows = []
    groups = {
        "pooled": items,
        "either_judge_positive": [i for i in items if i["keyword"] or i["judge"]],
        "both_negative": [i for i in items if not (i["keyword"] or i["judge"])],
    }
    for group, sub in groups.items():
        if not sub:
            continue
        hand = np.array([i["hand"] for i in sub])
        for pair, (x, y) in {
            "lm_vs_hand": ("judge", "hand"),
            "keyword_vs_hand": ("keyword", "hand"),
            "lm_vs_keyword": ("judge", "keyword"),
        }.items():
            a, b = np.array([i[x] for i in sub]), np.array([i[y] for i in sub])
            tp = int(((a == 1) & (b == 1)).sum())
            rows.append(
                {
                    "group": group,
                    "pair": pair,
                    "n": len(sub),
                    "accuracy": float(np.mean(a == b)),
                    "kappa": kappa(a, b),
                    "precision": tp / int(a.sum()) if a.sum() else None,
                    "recall": tp / int(b.sum()) if b.sum() else None,
                    "positives_ref": int(b.sum()),
                }
            )
        if 0 < hand.sum() < len(hand):
            rows.append(
                {
                    "group": group,
                    "pair": "lm_score_auc_vs_hand",
                    "n": len(sub),
                    "accuracy": float(roc_auc_score(hand, [i["judge_score"] for i in sub])),
                    "kappa": None,
                    "precision": None,
                    "recall": None,
                    "positives_ref": int(hand.sum()),
                }
            )
    return rows
