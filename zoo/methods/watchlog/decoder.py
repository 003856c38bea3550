"""The language side: projector into the causal LM, interleaved prompt, teacher forcing, greedy generation, parsing.

The abstract says the video is reasoned over by a multimodal LLM that generates explanations; the layout below is
ours (papers-1.md §1 reconstructs only "pool, project, decode"):

    prompt  = <bos> "#0" v_0 " #1" v_1 ... " #{T-1}" v_{T-1} " answer:"
    v_t     = MLP([mean_n Z'_t[n] ; sigmoid(event logit_t) ; sigmoid(window logit)]) + E[t]
              (one LM embedding; E[t] = the embedding of the number token of "#t")
    answer  = "verdict: ... ; technique: ... ; evidence: #i #j" <eos>

Frame markers ``#t`` are ordinary text tokens, so citing an event is copying the marker in front of the visual token
the model finds suspicious. The detection head's probabilities enter the projector (detached), which grounds the
explanation in the detection outcome.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch
from torch import nn

_FIELD = re.compile(r"(verdict|technique|evidence)\s*:\s*([^;]*)")


class Projector(nn.Module):
    """``[frame vector (D) ; event prob ; window prob] -> LM embedding (H)``: a 2-layer MLP (LLaVA-style; ours)."""

    def __init__(self, dim: int, lm_dim: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim + 2, lm_dim), nn.GELU(), nn.Linear(lm_dim, lm_dim))

    def forward(self, frames: torch.Tensor, event_prob: torch.Tensor, window_prob: torch.Tensor) -> torch.Tensor:
        """``frames (B, T, D)``, ``event_prob (B, T)``, ``window_prob (B,)`` -> ``(B, T, H)``."""
        extra = torch.stack([event_prob, window_prob[:, None].expand_as(event_prob)], -1)
        return self.net(torch.cat([frames, extra.to(frames.dtype)], -1))


class PromptBuilder:
    """Token ids of the fixed prompt pieces for ``n_frames`` frames.

    Args:
        tokenizer: a ``transformers`` tokenizer with ``bos_token_id`` / ``eos_token_id``.
        n_frames: frames per window.
    """

    def __init__(self, tokenizer, n_frames: int):
        self.tok = tokenizer
        enc = lambda s: tokenizer(s, add_special_tokens=False)["input_ids"]
        self.markers = [enc(("" if t == 0 else " ") + f"#{t}") for t in range(n_frames)]
        self.tail = enc(" answer:")
        self.eos = tokenizer.eos_token_id
        # a tokenizer without a BOS (Qwen-style) starts the prompt with the first marker; the visual slots'
        # placeholder id (overwritten by the frame embedding) is then the EOS
        self.start = [] if tokenizer.bos_token_id is None else [tokenizer.bos_token_id]
        self.slot = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        # positions of the visual tokens in the prompt
        pos, n = [], len(self.start)
        for m in self.markers:
            n += len(m)
            pos.append(n)
            n += 1
        self.visual_pos = pos
        self.prompt_len = n + len(self.tail)

    def prompt_embeds(self, embed: nn.Module, visual: torch.Tensor) -> torch.Tensor:
        """Prompt embeddings ``(B, P, H)`` with ``visual (B, T, H)`` at :attr:`visual_pos`.

        Each visual token is added to the embedding of the token just before it, its frame number (the last
        token of ``#t``; ours): with tied input/output embeddings an answer position that attends to a
        suspicious frame token can emit that frame's number directly. Without the tag the decoder learned to
        cite the number *after* the attended frame (an off-by-one seen in a 300-step SFT run).
        """
        B, T, _ = visual.shape
        ids = list(self.start)
        for m in self.markers[:T]:
            ids += m + [self.slot]  # a placeholder id, overwritten below
        ids += self.tail
        ids_t = torch.tensor(ids, device=visual.device)
        x = embed(ids_t).unsqueeze(0).expand(B, -1, -1).clone()
        tag = embed(ids_t[[p - 1 for p in self.visual_pos[:T]]])  # the frame number before each v_t
        x[:, self.visual_pos[:T]] = visual.to(x.dtype) + tag
        return x

    def answer_prefix_ids(self, prefix: str) -> list[int]:
        """Token ids of the start of an answer, tokenised as :meth:`answer_ids` tokenises whole answers."""
        return self.tok(" " + prefix, add_special_tokens=False)["input_ids"]

    def answer_ids(self, texts: Sequence[str], max_len: int) -> torch.Tensor:
        """Answer token ids ``(B, A)`` (leading space, eos appended, right-padded with -100, cut at ``max_len``)."""
        rows = [(self.tok(" " + t, add_special_tokens=False)["input_ids"] + [self.eos])[:max_len] for t in texts]
        A = max(len(r) for r in rows)
        return torch.tensor([r + [-100] * (A - len(r)) for r in rows])


def teacher_forced_loss(
    lm, builder: PromptBuilder, visual: torch.Tensor, texts: Sequence[str], max_len: int = 48
) -> torch.Tensor:
    """Next-token cross-entropy of the answers given the prompt (prompt positions are not scored).

    ``L = -(1/|y|) sum_j log p(y_j | y_<j, prompt(V))`` averaged over the answer tokens of the batch.
    """
    prompt = builder.prompt_embeds(lm.get_input_embeddings(), visual)
    ans = builder.answer_ids(texts, max_len).to(visual.device)
    ans_emb = lm.get_input_embeddings()(ans.clamp(min=0))
    x = torch.cat([prompt, ans_emb], 1)
    labels = torch.cat([torch.full(prompt.shape[:2], -100, device=visual.device, dtype=torch.long), ans], 1)
    attn = torch.cat([torch.ones(prompt.shape[:2], device=visual.device, dtype=torch.long), (ans != -100).long()], 1)
    return lm(inputs_embeds=x, attention_mask=attn, labels=labels).loss


@torch.no_grad()
def greedy_generate(
    lm, builder: PromptBuilder, visual: torch.Tensor, max_new_tokens: int = 32, prefix: str = ""
) -> list[str]:
    """Greedy decoding from the prompt with transformers' ``generate(inputs_embeds=...)`` (all prompts have the same
    length, so no padding is needed).

    Args:
        visual: ``(B, T, H)`` projected frame tokens.
        prefix: answer text forced before decoding starts (tokenised as the start of a training answer, so
            ``"verdict: malicious ;"`` continues exactly as in teacher forcing); it is part of the returned text.

    Returns:
        One answer string per window (the prefix, then the decoded tokens up to eos).
    """
    x = builder.prompt_embeds(lm.get_input_embeddings(), visual)
    if prefix:
        pre = torch.tensor(builder.answer_prefix_ids(prefix), device=x.device)
        x = torch.cat([x, lm.get_input_embeddings()(pre)[None].expand(x.shape[0], -1, -1)], 1)
    seqs: list[list[int]] = [[] for _ in range(x.shape[0])]
    if max_new_tokens > 0:
        # given only embeddings, a decoder-only model's generate returns the new tokens alone
        seqs = lm.generate(
            inputs_embeds=x,
            attention_mask=torch.ones(x.shape[:2], dtype=torch.long, device=x.device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
            eos_token_id=builder.eos,
            pad_token_id=builder.eos,
        ).tolist()
    texts = []
    for s in seqs:
        s = s[: s.index(builder.eos)] if builder.eos in s else s
        texts.append((prefix + builder.tok.decode(s, skip_special_tokens=True)).strip())
    return texts


def parse_explanation(text: str) -> dict:
    """Fields of a generated answer: ``{"verdict": str|None, "technique": str|None, "evidence": [int, ...]}``.

    Evidence indices are the ``#i`` numbers after ``evidence:``, repeats dropped (first order kept); a malformed
    answer gives ``None`` fields.
    """
    fields = {k: v.strip() for k, v in _FIELD.findall(text)}
    ev = list(dict.fromkeys(int(m) for m in re.findall(r"#\s*(\d+)", fields.get("evidence", ""))))
    return {"verdict": fields.get("verdict"), "technique": fields.get("technique"), "evidence": ev}


def evidence_precision(cited: Sequence[Sequence[int]], event_labels: Sequence[Sequence[int]]) -> tuple[float, int]:
    """Fraction of cited evidence events that are labelled attack events (micro-averaged over windows).

    Args:
        cited: per window, the cited frame indices.
        event_labels: per window, the 0/1 (or -1 padding) label of each frame.

    Returns:
        ``(precision, n_cited)``; precision is NaN when nothing was cited. A cited index outside the window counts
        as wrong.
    """
    hit = n = 0
    for c, lab in zip(cited, event_labels):
        for i in c:
            n += 1
            hit += int(0 <= i < len(lab) and lab[i] == 1)
    return (hit / n if n else float("nan")), n
