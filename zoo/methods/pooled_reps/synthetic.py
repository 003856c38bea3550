"""The known-answer task: a generated scene world (notes §4, CPU re-implementation; *ours*, labelled generated data).

A scene latent ``z`` = (shape, colour, place, size) yields a short caption that only *implies* each attribute through
a cue word (a "cherry-coloured dice near the window") and an elaboration that spells the attributes out ("The object
is a red cube. It is small. It sits on the left."). zoo-lm.chat gets a LoRA (r = 16) on caption -> elaboration
chats; at measurement it sees the caption only and the reference space is the one-hot latent. A faithful pipeline
must then find mean pool > last token > prompt pool.
"""

from __future__ import annotations

import random

import torch

ATTRIBUTES: dict[str, dict[str, list[str]]] = {
    "shape": {
        "cube": ["dice", "box", "block"],
        "ball": ["orb", "sphere", "marble"],
        "cone": ["funnel", "horn", "spike"],
        "ring": ["hoop", "loop", "band"],
    },
    "colour": {
        "red": ["cherry", "ruby", "brick"],
        "blue": ["sky", "ocean", "sapphire"],
        "green": ["grass", "leaf", "lime"],
        "yellow": ["lemon", "sun", "banana"],
    },
    "place": {
        "left": ["by the window", "near the west wall", "beside the lamp"],
        "right": ["by the door", "near the east wall", "beside the shelf"],
        "top": ["under the ceiling", "up on the beam", "near the skylight"],
        "bottom": ["on the floor", "down on the rug", "under the table"],
    },
    "size": {"small": ["tiny", "little", "miniature"], "large": ["huge", "giant", "massive"]},
}
"""Attribute -> value -> cue phrases a caption may use (three each)."""

INSTRUCTION = "Describe the scene in plain words: {caption}"


def sample_scene(rng: random.Random) -> dict:
    """One scene: ``{"latent": [4 value indices], "caption": str, "elaboration": str}``."""
    values = {a: rng.choice(list(v)) for a, v in ATTRIBUTES.items()}
    cue = {a: rng.choice(ATTRIBUTES[a][values[a]]) for a in ATTRIBUTES}
    caption = f"a {cue['size']} {cue['colour']}-coloured {cue['shape']} {cue['place']}"
    elaboration = (
        f"The object is a {values['colour']} {values['shape']}. It is {values['size']}. "
        f"It sits at the {values['place']}."
    )
    latent = [list(ATTRIBUTES[a]).index(values[a]) for a in ATTRIBUTES]
    return {"latent": latent, "caption": caption, "elaboration": elaboration}


def scenes(n: int, seed: int) -> list[dict]:
    """``n`` scenes from ``random.Random(seed)``."""
    rng = random.Random(seed)
    return [sample_scene(rng) for _ in range(n)]


def answer_accuracy(replies: list[str], latents: list[list[int]]) -> dict[str, float]:
    """Share of replies that name each attribute's true value as a word (``{"shape": ..., ...}``): whether the LoRA
    learned the world (chance is 1/4 for shape, colour, place and 1/2 for size)."""
    out = {}
    for j, (attr, values) in enumerate(ATTRIBUTES.items()):
        names = list(values)
        hits = [names[z[j]] in r.replace(".", " ").split() for r, z in zip(replies, latents)]
        out[attr] = sum(hits) / max(1, len(hits))
    return out


def one_hot(latents: list[list[int]]) -> torch.Tensor:
    """Concatenated one-hot codes of the latents: ``[n, 4 + 4 + 4 + 2]`` float32 (the reference space)."""
    sizes = [len(v) for v in ATTRIBUTES.values()]
    out = torch.zeros(len(latents), sum(sizes))
    for i, z in enumerate(latents):
        offset = 0
        for value, size in zip(z, sizes):
            out[i, offset + value] = 1.0
            offset += size
    return out


def world_items(n: int, seed: int) -> list[dict]:
    """Measurement items of the world domain (captions only; the reference is the latent)."""
    return [
        {
            "domain": "world",
            "messages": [{"role": "user", "content": INSTRUCTION.format(caption=s["caption"])}],
            "latent": s["latent"],
        }
        for s in scenes(n, seed)
    ]


def world_chats(n: int, seed: int) -> list[list[dict]]:
    """LoRA training conversations (caption -> elaboration)."""
    return [
        [
            {"role": "user", "content": INSTRUCTION.format(caption=s["caption"])},
            {"role": "assistant", "content": s["elaboration"]},
        ]
        for s in scenes(n, seed)
    ]


def fit_lora(
    model,
    tokenizer,
    chats: list[list[dict]],
    r: int = 16,
    alpha: int = 32,
    steps: int = 300,
    batch_size: int = 16,
    lr: float = 2e-3,
    seed: int = 0,
    log=None,
):
    """Fit a LoRA (peft, all attention and MLP projections) on assistant tokens of ``chats``; return the *merged*
    model (``merge_and_unload``) and the adapter's state dict (``{name: tensor}``, for a later adapter package).

    Raises:
        ValueError: ``r < 1`` or ``steps < 1``.
    """
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict

    from zoo.models.chat import IGNORE_INDEX, encode_chat

    if r < 1 or steps < 1:
        raise ValueError(f"LoRA needs r >= 1 and steps >= 1, got r={r}, steps={steps}")
    torch.manual_seed(seed)
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    peft_model = get_peft_model(model, LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0, target_modules=targets))
    encoded = [encode_chat(tokenizer, c) for c in chats]
    opt = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=lr)
    g = torch.Generator().manual_seed(seed)
    peft_model.train()
    for step in range(steps):
        batch = [encoded[i] for i in torch.randint(0, len(encoded), (batch_size,), generator=g).tolist()]
        width = max(len(e["input_ids"]) for e in batch)
        ids = torch.full((batch_size, width), tokenizer.pad_token_id, dtype=torch.long)
        labels = torch.full((batch_size, width), IGNORE_INDEX, dtype=torch.long)
        mask = torch.zeros(batch_size, width, dtype=torch.long)
        for i, e in enumerate(batch):
            n = len(e["input_ids"])
            ids[i, :n], labels[i, :n], mask[i, :n] = torch.tensor(e["input_ids"]), torch.tensor(e["labels"]), 1
        loss = peft_model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if log is not None and (step % 50 == 0 or step == steps - 1):
            log(step, float(loss.detach()))
    adapter = {k: v.detach().clone() for k, v in get_peft_model_state_dict(peft_model).items()}
    merged = peft_model.merge_and_unload()
    merged.eval()
    for p in merged.parameters():
        p.requires_grad_(False)
    return merged, adapter
