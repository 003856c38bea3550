"""CRH on a pretrained chat LM, on a tiny random Llama: the instructed pairs (cached, resumed), the LM judge, the
residual-norm length grid, states reused across split seeds, and the driver end to end (tables, hand-label sample,
agreement)."""

import json

import pytest
import torch

from zoo.methods.crh import pretrained, pretrained_tables
from zoo.methods.crh.datamodule import CRHPairsDataModule
from zoo.methods.crh.instructed import SHORT_DIRECTIVE, directive_text, instructed_pairs, question_pools
from zoo.methods.crh.judge import answer_ids, judge_scores
from zoo.methods.crh.pipeline import Settings, difference_vectors, directions, pair_states, steer_concept
from zoo.models.causal_lm import build_causal_lm, load_tokenizer


@pytest.fixture(scope="module")
def lm():
    torch.manual_seed(0)
    return build_causal_lm("zoo-lm-tiny").eval(), load_tokenizer()


@pytest.fixture(scope="module")
def batch():
    dm = CRHPairsDataModule(concepts=2, n_questions=8)
    dm.setup()
    return dm.batch


def test_directive_and_pools(batch):
    c = batch["concepts"][0]
    assert directive_text(c, "short") == SHORT_DIRECTIVE.format(concept=c["concept"])
    assert directive_text(c, "authors") == c["instruction"] and len(c["instruction"]) > 50
    with pytest.raises(ValueError, match="no instruction"):
        directive_text({**c, "instruction": ""}, "authors")
    pools = question_pools(list(batch["questions"]), batch["concepts"], 5)
    assert pools == question_pools(list(batch["questions"]), batch["concepts"], 5)  # fixed across calls
    assert all(len(set(p)) == 5 and set(p) <= set(batch["questions"]) for p in pools.values())
    assert pools[batch["concepts"][0]["cid"]] != pools[batch["concepts"][1]["cid"]]
    with pytest.raises(ValueError, match="pair_questions 9"):
        question_pools(list(batch["questions"]), batch["concepts"], 9)


class _NoGenerate(torch.nn.Module):
    """A model that fails if asked to generate: the cache must answer everything."""

    device = torch.device("cpu")

    def generate(self, **kwargs):
        raise AssertionError("generate called although every answer is cached")


def test_instructed_pairs_are_cached_and_resume(lm, batch, tmp_path):
    model, tok = lm
    pools = question_pools(list(batch["questions"]), batch["concepts"], 3)
    cache = tmp_path / "pairs.json"
    pairs = instructed_pairs(
        model, tok, batch["questions"], batch["concepts"], pools, str(cache), "tiny", temperature=1.0
    )
    assert len(pairs) == 6 and {(p.cid, p.qid) for p in pairs} == {(c, q) for c, qs in pools.items() for q in qs}
    no = {}
    for p in pairs:  # one r_no per question, shared by every concept
        assert no.setdefault(p.qid, p.resp_no) == p.resp_no
    again = instructed_pairs(
        _NoGenerate(), tok, batch["questions"], batch["concepts"], pools, str(cache), "tiny", temperature=1.0
    )
    assert again == pairs
    store = json.loads(cache.read_text())
    assert len(store) == 1 and len(next(iter(store.values()))) == len(no) + 6


class _FixedLogits(torch.nn.Module):
    """Next-token logits that put ``p_yes`` on the first 'Yes' token and the rest on the first 'No' token."""

    def __init__(self, tok, p_yes: float):
        super().__init__()
        self.ids, self.p_yes, self.vocab = answer_ids(tok), p_yes, len(tok)
        self.device = torch.device("cpu")

    def forward(self, input_ids, attention_mask=None, logits_to_keep=0):
        logits = torch.full((len(input_ids), 1, self.vocab), -1e9)
        logits[:, :, self.ids["yes"][0]] = torch.tensor(self.p_yes).log()
        logits[:, :, self.ids["no"][0]] = torch.tensor(1 - self.p_yes).log()
        return type("Out", (), {"logits": logits})()


def test_judge_score_is_the_yes_share(lm):
    _, tok = lm
    ids = answer_ids(tok)
    assert ids["yes"] and ids["no"] and not set(ids["yes"]) & set(ids["no"])
    for p in (0.1, 0.8):
        got = judge_scores(_FixedLogits(tok, p), tok, ["a text", "another"], ["roots", "maths"])
        assert torch.allclose(got, torch.full((2,), p), atol=1e-5)
    real = judge_scores(lm[0], tok, ["a", "b b", "c c c"], ["x"] * 3, batch_size=2)
    assert real.shape == (3,) and bool(((real >= 0) & (real <= 1)).all())
    with pytest.raises(ValueError, match="2 texts but 1 concepts"):
        judge_scores(lm[0], tok, ["a", "b"], ["x"])


def test_states_reused_across_seeds_and_residual_lengths(lm, batch, tmp_path):
    model, tok = lm
    pools = question_pools(list(batch["questions"]), batch["concepts"], 4)
    pairs = instructed_pairs(model, tok, batch["questions"], batch["concepts"], pools, None, "tiny", temperature=1.0)
    s = Settings(
        layers=[1],
        n_train=3,
        n_test=1,
        split_seed=1,
        template="chat",
        pairs="instructed",
        length_unit="residual",
        penalty_c=0.5,
        n_steps=3,
        max_new_tokens=2,
        judge="lm",
    )
    states = pair_states(model, tok, pairs, [0, 1], "chat")
    reused = difference_vectors(model, tok, pairs, s, states)
    fresh = difference_vectors(model, tok, pairs, s)
    c = batch["concepts"][0]["cid"]
    assert reused[c]["test"] == fresh[c]["test"]
    assert torch.allclose(reused[c][1]["d"], fresh[c][1]["d"], atol=1e-5)
    acts = reused[c][1]
    res = steer_concept(
        model, tok, batch["concepts"][0], batch["questions"], reused[c]["test"], acts, directions(acts, s), 1, s
    )
    rho = float(acts["a_no"].norm(dim=1).mean())
    assert res["scale"] == pytest.approx(rho)
    lengths = [r[2] for r in res["runs"]["lambda=0"]]
    assert lengths == pytest.approx([rho * 0.5 * k / 3 for k in (1, 2, 3)], rel=1e-4)  # v(L, 0) has norm L
    assert all(r[3] in (1, 2, 3) and (r[6] is None) == (r[3] == 3) for r in res["runs"]["lambda=0"])


def test_line_points_use_each_judges_own_exclusions():
    line = {
        "cid": 5,
        "layer": 1,
        "seed": 0,
        "mu_norm": 2.0,
        "test": [1, 2],
        "sin": {"1": 0.6, "2": 0.8},
        "cos": {"1": 0.8, "2": 0.6},
        "sim": {"1": 0.1, "2": 0.2},
        "rows": [
            [1, 1, 1.0, 2, "a square root", 0.1, 0.9],
            [1, 2, 2.0, 2, "roots", 0.2, 0.8],
            [2, 1, 1.0, 1, "nothing", 0.0, 0.1],
            [2, 2, 2.0, 2, "a square root", 0.3, 0.7],
        ],
    }
    pts = pretrained_tables.line_points(line, ["square root"])
    assert [p["excluded"] for p in pts["steerability"]] == [True, False]  # LM judge: question 1 positive at step 1
    assert [p["excluded"] for p in pts["keyword_steerability"]] == [True, False]
    assert pts["steerability"][0]["steerability"] == pytest.approx(1.0)  # question 2: 0 -> 1 over steps 1, 2
    assert pts["judge_steerability"][1]["question_judge_steerability"] == pytest.approx(0.6)


def test_driver_end_to_end_on_the_tiny_overlay(tmp_path):
    common = [
        "--overlay",
        "tiny/crh-smollm2.yaml",
        "--out",
        str(tmp_path / "run"),
        "--results-dir",
        str(tmp_path / "res"),
    ]
    pretrained.main(["run", *common, "--seeds", "0", "1", "--n-perm", "5", "--geometry-layers", "0"])
    lines = (tmp_path / "run" / "lines.jsonl").read_text().splitlines()
    assert len(lines) == 3 * 2  # concepts x seeds, layer 1 only
    table = json.loads((tmp_path / "res" / "crh" / "crh-smollm2-tiny-correlation.json").read_text())
    assert {r["measure"] for r in table["rows"]} <= set(pretrained_tables.MEASURES)
    assert table["label_counts"]["lm"]["outputs"] == 3 * 2 * 2 * 3  # lines x test questions x lengths
    geo = json.loads((tmp_path / "res" / "crh" / "crh-smollm2-tiny-geometry.json").read_text())
    assert {r["layer"] for r in geo["rows"]} == {0, 1}
    pretrained.main(["run", *common, "--seeds", "0", "1", "--n-perm", "5"])  # resumes: nothing new steered
    assert len((tmp_path / "run" / "lines.jsonl").read_text().splitlines()) == 6
    labels = tmp_path / "hand.json"
    pretrained.main(["sample", *common, "--labels", str(labels), "--n", "8"])
    data = json.loads(labels.read_text())
    assert len(data["items"]) == 8 and all(i["hand"] is None for i in data["items"])
    for k, item in enumerate(data["items"]):
        item["hand"] = k % 2
    labels.write_text(json.dumps(data))
    pretrained.main(["agreement", *common, "--labels", str(labels)])
    agree = json.loads((tmp_path / "res" / "crh" / "crh-smollm2-tiny-judge-agreement.json").read_text())
    pooled = {r["pair"]: r for r in agree["rows"] if r["group"] == "pooled"}
    hand = [i["hand"] for i in data["items"]]
    kw = [i["keyword"] for i in data["items"]]
    assert pooled["keyword_vs_hand"]["accuracy"] == pytest.approx(sum(a == b for a, b in zip(kw, hand)) / 8)
