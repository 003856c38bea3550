"""``zoo predict`` for CRH: one question and one concept of a released package."""

from __future__ import annotations

import math

from zoo.methods.crh.geometry import cylinder, penalty_vector, steer_lengths
from zoo.methods.crh.instructed import directive_text
from zoo.methods.crh.pairs import concept_sentence, greedy_replies, prompt_text, with_concept
from zoo.methods.crh.pipeline import label_outputs, length_scale
from zoo.methods.crh.steering import last_token_states, steered_generate

LABEL_NAMES = {1: "normal", 2: "concept", 3: "gibberish"}


def predict_record(model, tokenizer, module, index: int, cid: int, question: str, n_lengths: int = 5) -> dict:
    """The question's difference vector d_q at the package's first layer (its pairs as the package was made: the
    LM's answers without / with the concept instruction, or the greedy reply vs reply + concept sentence), its angle
    theta to the concept's axis mu_c, and generations steered with v(L, 0) = L d_q/|d_q| at ``n_lengths`` lengths up
    to ``penalty_c`` times the package's length unit (|mu_c|, or the question's own residual norm), each labelled
    by the package's judge (normal / concept / gibberish).

    Returns:
        ``{"concept_id", "concept", "keywords", "layer", "mu_norm", "d_norm", "theta_deg", "cos", "sin2_over_cos",
        "steered": [{"length", "label", "text"}]}``.
    """
    s = module.settings
    layer = s.layers[0]
    info = module.meta["concepts"][str(cid)]
    special = s.template == "plain"
    prompt = prompt_text(tokenizer, question, s.template)
    concept = {"cid": cid, **info}
    if s.pairs == "instructed":  # the LM's own answers without / with the concept instruction
        asked = prompt_text(tokenizer, f"{question}\n\n{directive_text(concept, s.directive)}", s.template)
        r_no, r_with = greedy_replies(
            model,
            tokenizer,
            [prompt, asked],
            module.hparams.reply_tokens,
            add_special_tokens=special,
            temperature=s.reply_temperature,
        )
    else:
        r_no = greedy_replies(model, tokenizer, [prompt], module.hparams.reply_tokens, add_special_tokens=special)[0]
        r_with = with_concept(r_no, concept_sentence(info["keywords"], 0, cid))
    states = last_token_states(model, tokenizer, [prompt + r_no, prompt + r_with], [layer], add_special_tokens=special)
    d = states[layer][1] - states[layer][0]
    mu = module.directions[index, 0, 0]
    geo = cylinder(d[None], mu)
    cos, sin = geo["cos"][0], geo["sin"][0]
    lengths = steer_lengths(length_scale({"a_no": states[layer][:1]}, float(mu.norm()), s), s.penalty_c, n_lengths)
    vecs = penalty_vector(lengths, cos, sin, mu / mu.norm(), geo["e_perp"][0], 0.0)
    texts = steered_generate(
        model,
        tokenizer,
        [prompt] * n_lengths,
        vecs,
        layer,
        s.hook_site,
        False,
        s.max_new_tokens,
        s.temperature,
        s.batch_size,
        0,
        add_special_tokens=special,
    )
    labels, _ = label_outputs(model, tokenizer, texts, concept, s)
    return {
        "concept_id": cid,
        "concept": info["concept"],
        "keywords": list(info["keywords"]),
        "layer": int(layer),
        "mu_norm": float(mu.norm()),
        "d_norm": float(d.norm()),
        "theta_deg": math.degrees(math.acos(max(-1.0, min(1.0, float(cos))))),
        "cos": float(cos),
        "sin2_over_cos": float(sin) ** 2 / float(cos),
        "steered": [
            {"length": length, "label": LABEL_NAMES[lab], "text": text.strip()}
            for length, lab, text in zip(lengths.tolist(), labels, texts)
        ],
    }


def predict_text(d: dict) -> str:
    """:func:`predict_record`'s record as the lines ``zoo predict`` prints."""
    lines = [
        f"concept {d['concept_id']}: {d['concept']}",
        f"keywords: {', '.join(d['keywords'])}",
        (
            f"layer {d['layer']}: |mu_c| = {d['mu_norm']:.3f}, |d_q| = {d['d_norm']:.3f}, "
            f"theta = {d['theta_deg']:.1f} deg (cos {d['cos']:.3f}, sin^2/cos {d['sin2_over_cos']:.3f})"
        ),
    ]
    lines += [f"L = {r['length']:7.3f}  [{r['label']}]  {r['text']!r}" for r in d["steered"]]
    return "\n".join(lines)
