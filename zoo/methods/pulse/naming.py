"""Names for SAE features (ours; the paper names features with gpt-4.1-mini, §2.2) and the SAE's own daily series.

* Keywords: class-based TF-IDF (c-TF-IDF, Grootendorst 2022) over one document per feature made of its ``top``
  most-activating texts: ``w_{t,c} = tf_{t,c} log(1 + A / f_t)`` with ``A`` the mean words per class and ``f_t`` the
  term's count over all classes.
* Nearest paper label: the paper's 128 feature labels (from the aggregates) embedded with the same MiniLM, matched by
  cosine to the normalised mean embedding of the feature's top texts.
"""

from __future__ import annotations

import numpy as np
from sklearn.feature_extraction.text import CountVectorizer


def ctfidf_keywords(docs: list[str], n_words: int = 5) -> list[list[str]]:
    """Top ``n_words`` c-TF-IDF terms of each class document (``[]`` for an empty document)."""
    if not any(d.strip() for d in docs):
        return [[] for _ in docs]
    vec = CountVectorizer(stop_words="english", token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z]+\b")
    tf = vec.fit_transform([d if d.strip() else "" for d in docs]).toarray().astype(float)
    A = tf.sum(1).mean()
    w = tf * np.log(1.0 + A / np.maximum(tf.sum(0), 1.0))[None, :]
    vocab = np.array(vec.get_feature_names_out())
    return [[str(vocab[j]) for j in np.argsort(-row)[:n_words] if row[j] > 0] for row in w]


def top_texts(acts: np.ndarray, top: int = 20) -> list[np.ndarray]:
    """Per feature, indices of the (at most ``top``) texts with the largest non-zero activation; ``acts (N, M)``."""
    out = []
    for m in range(acts.shape[1]):
        nz = np.flatnonzero(acts[:, m] > 0)
        out.append(nz[np.argsort(-acts[nz, m])[:top]])
    return out


def name_features(
    acts: np.ndarray,
    texts: list[str],
    X: np.ndarray,
    label_emb: np.ndarray | None,
    labels: list[str] | None,
    top: int = 20,
) -> list[dict]:
    """Per feature ``{feature, n_active, keywords, nearest_label, nearest_idx, cosine}``.

    Args:
        acts: ``(N, M)`` SAE activations; texts: the N texts; X: ``(N, d)`` their embeddings.
        label_emb: ``(L, d)`` unit embeddings of the paper's labels (None: no label matching); labels: their text.
    """
    tops = top_texts(acts, top)
    keywords = ctfidf_keywords([" ".join(texts[i] for i in idx) for idx in tops])
    out = []
    for m, idx in enumerate(tops):
        row = {
            "feature": m,
            "n_active": int((acts[:, m] > 0).sum()),
            "keywords": keywords[m],
            "nearest_label": None,
            "nearest_idx": None,
            "cosine": None,
        }
        if len(idx) and label_emb is not None:
            c = X[idx].mean(0)
            c = c / max(np.linalg.norm(c), 1e-12)
            sims = label_emb @ c
            j = int(np.argmax(sims))
            row.update(nearest_label=labels[j], nearest_idx=j, cosine=float(sims[j]))
        out.append(row)
    return out


def daily_series(dates: list[str], acts: np.ndarray, errors: np.ndarray, names: list[dict]) -> dict:
    """The aggregates' schema from per-text ``dates (N,)``, activations ``(N, M)`` and reconstruction errors ``(N,)``:
    days with at least one text, ``n_posts``, ``day_error`` (mean normalised error) and per feature ``n_active``
    (texts with a non-zero activation) and ``mean`` (mean activation)."""
    days = sorted(set(dates))
    pos = {d: i for i, d in enumerate(days)}
    t = np.array([pos[d] for d in dates], dtype=np.int64)
    n = np.bincount(t, minlength=len(days))
    active = np.stack([np.bincount(t, weights=(acts[:, m] > 0), minlength=len(days)) for m in range(acts.shape[1])])
    mean = np.stack([np.bincount(t, weights=acts[:, m], minlength=len(days)) for m in range(acts.shape[1])]) / n
    err = np.bincount(t, weights=errors, minlength=len(days)) / n
    return {
        "n_observations": len(days),
        "as_of": days[-1],
        "dates": days,
        "n_posts": n.tolist(),
        "day_error": [round(float(e), 6) for e in err],
        "features": [
            {
                "idx": m,
                "label": "; ".join(names[m]["keywords"]) or f"feature {m}",
                "n_active": active[m].astype(int).tolist(),
                "mean": [round(float(v), 6) for v in mean[m]],
            }
            for m in range(acts.shape[1])
        ],
    }
