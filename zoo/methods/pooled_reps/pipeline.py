"""Generate, pool and embed: items -> pooled generations -> reference spaces. Shared by the module's fit,
``experiments.py`` and ``zoo predict``.

Reference spaces (the grounded side; ours at this scale, the paper uses gold-solution embeddings): ``minilm`` =
all-MiniLM-L6-v2 of the reference answer (:func:`zoo.models.text_embedding.embed_texts`), ``tfidf`` = scikit-learn
TF-IDF + TruncatedSVD(128) fitted on the domain's references (a non-neural check), ``onehot`` = the world latent.
"""

from __future__ import annotations

import dataclasses

import torch

from zoo.models.chat import encode_rendered, encode_text
from zoo.models.generation_pool import PooledGeneration, pooled_generate

TEXT_ROLES = {"user": "User", "assistant": "Assistant"}
"""Speaker names of the plain-text transcript a tokenizer without a chat template gets (*ours*)."""


def prompt_ids(tokenizer, messages: list[dict]) -> list[int]:
    """Token ids that start a reply to ``messages``.

    With a chat template (zoo-lm, SmolLM2-Instruct): the model's own template with the generation prompt appended,
    only the template writing control tokens (:func:`zoo.models.chat.encode_rendered`). Without one (a base model
    such as Gemma-3-270M; *ours*): ``<bos>`` + the transcript ``"User: ...\n\nAssistant: ...\n\nAssistant:"``
    with special-token parsing off, so the reply is a continuation of the text.
    """
    if getattr(tokenizer, "chat_template", None):
        return encode_rendered(tokenizer, messages, add_generation_prompt=True)[1]
    text = "".join(f"{TEXT_ROLES[m['role']]}: {m['content']}\n\n" for m in messages) + "Assistant:"
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    return bos + encode_text(tokenizer, text)


def encode_prompts(tokenizer, items: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ``input_ids, attention_mask [B, S]`` of the items' prompts (:func:`prompt_ids`)."""
    ids = [prompt_ids(tokenizer, it["messages"]) for it in items]
    width = max(map(len, ids))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    input_ids = torch.full((len(ids), width), pad, dtype=torch.long)
    mask = torch.zeros(len(ids), width, dtype=torch.long)
    for i, row in enumerate(ids):
        input_ids[i, width - len(row) :], mask[i, width - len(row) :] = torch.tensor(row), 1
    return input_ids, mask


def eos_ids(tokenizer, model) -> list[int]:
    """End-of-reply ids: the tokenizer's EOS plus the model's generation-config EOS (Qwen lists several)."""
    ids = {tokenizer.eos_token_id}
    cfg = getattr(model.generation_config, "eos_token_id", None)
    ids |= set(cfg if isinstance(cfg, list) else [cfg])
    return sorted(i for i in ids if i is not None)


def generate_batch(
    model, tokenizer, items: list[dict], max_new_tokens: int, temperature: float, top_p: float, layer: int
) -> tuple[PooledGeneration, list[str]]:
    """Pooled generation of a batch and the decoded replies (cut at the first EOS)."""
    device = next(model.parameters()).device
    input_ids, mask = (t.to(device) for t in encode_prompts(tokenizer, items))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    pg = pooled_generate(
        model, input_ids, mask, max_new_tokens, eos_ids(tokenizer, model), pad, temperature, top_p, token_layer=layer
    )
    replies = [
        tokenizer.decode(row[:n], skip_special_tokens=True) for row, n in zip(pg.tokens.tolist(), pg.lengths.tolist())
    ]
    return pg, replies


def concat(parts: list[PooledGeneration]) -> PooledGeneration:
    """Join batches along the row axis (``tokens``/``states`` padded to the widest ``T``)."""
    T = max(p.tokens.shape[1] for p in parts)

    def pad(x, dim):
        if x.shape[dim] == T:
            return x
        shape = list(x.shape)
        shape[dim] = T - x.shape[dim]
        return torch.cat([x, x.new_zeros(shape)], dim)

    states = None if parts[0].states is None else torch.cat([pad(p.states, 1) for p in parts])
    return PooledGeneration(
        tokens=torch.cat([pad(p.tokens, 1) for p in parts]),
        lengths=torch.cat([p.lengths for p in parts]),
        mean=torch.cat([p.mean for p in parts], 1),
        prompt=torch.cat([p.prompt for p in parts], 1),
        last=torch.cat([p.last for p in parts], 1),
        states=states,
        token_layer=parts[0].token_layer,
    )


def select(pg: PooledGeneration, idx: list[int]) -> PooledGeneration:
    """Rows ``idx`` of a pooled generation."""
    t = torch.tensor(idx, dtype=torch.long)
    return dataclasses.replace(
        pg,
        tokens=pg.tokens[t],
        lengths=pg.lengths[t],
        mean=pg.mean[:, t],
        prompt=pg.prompt[:, t],
        last=pg.last[:, t],
        states=None if pg.states is None else pg.states[t],
    )


def tfidf_svd(texts: list[str], dim: int = 128, seed: int = 0) -> torch.Tensor:
    """TF-IDF (scikit-learn defaults, English stop words) + TruncatedSVD to ``min(dim, n_terms - 1, n - 1)``: ``[n, d]``."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    X = TfidfVectorizer(stop_words="english").fit_transform([t if t.strip() else "empty" for t in texts])
    d = max(1, min(dim, X.shape[1] - 1, X.shape[0] - 1))
    return torch.from_numpy(TruncatedSVD(d, random_state=seed).fit_transform(X)).float()


def reference_spaces(
    items: list[dict], spaces: list[str], tfidf_dim: int = 128, encoder: str | None = None
) -> dict[str, torch.Tensor]:
    """The reference spaces of one domain's items: ``{name: [n, d]}`` (the world gets ``onehot`` only)."""
    from zoo.methods.pooled_reps.synthetic import one_hot

    if "latent" in items[0]:
        return {"onehot": one_hot([it["latent"] for it in items])}
    texts = [it["reference"] for it in items]
    out = {}
    if "minilm" in spaces:
        from zoo.models.text_embedding import embed_texts

        out["minilm"] = embed_texts(texts, model=encoder)
    if "tfidf" in spaces:
        out["tfidf"] = tfidf_svd(texts, tfidf_dim)
    return out
