"""The whole post-hoc pipeline on a trained CLIP: decompose val and test, locate on val, correct and score test,
with every baseline; returns table rows (WG, Avg, Gap in %) and the state ``zoo predict`` needs."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from zoo.methods.ltc import baselines as B
from zoo.methods.ltc import prompts
from zoo.methods.ltc.decompose import Decomposition, decompose
from zoo.methods.ltc.locate import Located, correct, locate, logits, text_directions
from zoo.methods.ltc.metrics import wg_avg_gap


@dataclass
class TextState:
    """Text-side tensors: ``T (D, 2)`` classifier, ``U_accept (k, D)``, ``U_reject (m, D)`` orthonormal,
    Ortho-Cali's calibrated classifier ``T_oc (D, 2)``, TextSpan pool ``span (p, D)`` with ``span_place``."""

    T: torch.Tensor
    U_accept: torch.Tensor
    U_reject: torch.Tensor
    T_oc: torch.Tensor
    span: torch.Tensor
    span_place: list[bool] = field(default_factory=list)


@torch.no_grad()
def text_state(encode_text, ps: prompts.PromptSet) -> TextState:
    """Embed every prompt of ``ps`` with ``encode_text(list[str]) -> (n, D)`` (unnormalised)."""
    T = torch.stack(
        [F.normalize(F.normalize(encode_text(ps.class_prompts(y)), dim=-1).mean(0), dim=0) for y in (0, 1)], 1
    )
    a, b = ps.accept_pairs()
    r1, r2 = ps.reject_pairs()
    span, place = ps.textspan_pool()
    U_acc = text_directions(encode_text(a), encode_text(b))
    U_rej = text_directions(encode_text(r1), encode_text(r2))
    spurious = F.normalize(encode_text(list(ps.place_phrases)), dim=-1)
    T_oc = B.ortho_cali(T, spurious, F.normalize(encode_text(r1), dim=-1), F.normalize(encode_text(r2), dim=-1))
    return TextState(T, U_acc, U_rej, T_oc, F.normalize(encode_text(span), dim=-1), place)


@torch.no_grad()
def decompose_set(visual, x: torch.Tensor, batch_size: int = 256, dtype=torch.float32) -> Decomposition:
    """:func:`decompose` over ``x (n, 3, S, S)`` in batches (CPU tensors out)."""
    parts = [decompose(visual, x[i : i + batch_size].to(dtype)) for i in range(0, len(x), batch_size)]
    return Decomposition(torch.cat([p.heads for p in parts]).cpu(), torch.cat([p.others for p in parts]).cpu())


def _row(method: str, logit_or_pred: torch.Tensor, y: torch.Tensor, group: torch.Tensor, **extra) -> dict:
    pred = logit_or_pred.argmax(1) if logit_or_pred.dim() == 2 else logit_or_pred
    return {"method": method, **wg_avg_gap(pred, y, group), **extra}


def run_pipeline(
    val: Decomposition,
    test: Decomposition,
    ts: TextState,
    y_val,
    g_val,
    y_test,
    g_test,
    train_emb: torch.Tensor | None = None,
    y_train=None,
    g_train=None,
    random_draws: int = 20,
    seed: int = 0,
) -> tuple[list[dict], dict]:
    """Locate on ``val``, correct and score ``test``; every baseline too.

    Returns:
        ``(rows, state)``: rows ``{method, wg, avg, gap, ...}``; state ``{located, located_full, test_means,
        textspan}`` (``located*`` :class:`~zoo.methods.ltc.locate.Located`).
    """
    L = val.heads.shape[1]
    H = val.heads.shape[2]
    late = list(range(L // 2, L))
    loc = locate(val.heads, val.others, ts.T, y_val, g_val)
    loc_full = locate(val.heads, val.others, ts.T, y_val, g_val, conflicting=None)
    T, hd, ot = ts.T, test.heads, test.others
    rows = [_row("zero-shot", logits(hd, ot, T), y_test, g_test)]
    rows.append(_row("roboshot", B.roboshot(test.embedding(), T, ts.U_reject, ts.U_accept), y_test, g_test))
    rows.append(_row("ortho-cali", test.embedding() @ ts.T_oc, y_test, g_test))
    span_heads = B.textspan_heads(val.heads, ts.span, ts.span_place, late)
    rows.append(_row("textspan", B.ablate_logits(hd, ot, T, span_heads), y_test, g_test, n_heads=len(span_heads)))
    count = max(1, len(loc.spurious))
    draws = B.random_heads(late, H, count, random_draws, seed)
    scores = [wg_avg_gap(B.ablate_logits(hd, ot, T, d).argmax(1), y_test, g_test) for d in draws]
    rows.append(
        {
            "method": "random-heads",
            **{k: sum(s[k] for s in scores) / len(scores) for k in scores[0]},
            "n_heads": count,
            "wg_sd_draws": float(torch.tensor([s["wg"] for s in scores]).std()),
        }
    )
    for name, S, Y, _lc in (
        ("ltc", loc.spurious, loc.salient, loc),
        ("ltc-ablate", loc.spurious, [], loc),
        ("ltc-inject", [], loc.salient, loc),
        ("ltc-full", loc_full.spurious, loc_full.salient, loc_full),
    ):
        rows.append(
            _row(
                name, logits(correct(hd, S, Y, ts.U_accept), ot, T), y_test, g_test, n_spurious=len(S), n_salient=len(Y)
            )
        )
    if train_emb is not None:
        rows.append(_row("probe-erm", B.linear_probe(train_emb, y_train, test.embedding(), seed=seed), y_test, g_test))
        rows.append(
            _row("probe-balanced", B.linear_probe(train_emb, y_train, test.embedding(), g_train, seed), y_test, g_test)
        )
    state = {"located": loc, "located_full": loc_full, "test_means": hd.mean(0), "textspan": span_heads}
    return rows, state


def located_summary(loc: Located) -> dict:
    """Plain-JSON description of located heads."""
    return {"spurious": [list(h) for h in loc.spurious], "salient": [list(h) for h in loc.salient]}
