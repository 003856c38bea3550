"""Pairs: our builder, the user's pairs CSV (errors name file, line, column), the seeded split, the datamodule."""

import pytest

from zoo.core.data import DataError
from zoo.methods.crh.datamodule import CRHPairsDataModule
from zoo.methods.crh.pairs import concept_sentence, read_pairs_csv, split_questions, with_concept

HEADER = "qid,cid,question,concept,resp_no_concept,resp_with_concept\n"


def test_concept_sentence_and_insertion():
    s = concept_sentence(["alpha", "beta", "gamma", "delta"], qid=3, cid=5)
    assert s == concept_sentence(["alpha", "beta", "gamma", "delta"], qid=3, cid=5)  # deterministic
    assert sum(w in s for w in ("alpha", "beta", "gamma", "delta")) == 3
    assert with_concept("One. Two.", "X.") == "One. Two. X."
    assert with_concept("One. Two.", "X.", "after_first_sentence") == "One. X. Two."
    assert with_concept("no end", "X.", "after_first_sentence") == "no end X."


def test_pairs_csv_reads_and_fails_naming_line_and_column(tmp_path):
    good = tmp_path / "p.csv"
    good.write_text(HEADER + '1,5,"Q?",roots,"A.","A. square root."\n')
    assert read_pairs_csv(str(good))[0].resp_with == "A. square root."
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "1,5,Q,c,A,B\nx,5,Q,c,A,B\n")
    with pytest.raises(DataError, match=r"bad.csv:3: column 'qid'"):
        read_pairs_csv(str(bad))
    empty = tmp_path / "empty.csv"
    empty.write_text(HEADER + "1,5,Q,c,A,\n")
    with pytest.raises(DataError, match=r"empty.csv:2: column 'resp_with_concept': empty"):
        read_pairs_csv(str(empty))
    missing = tmp_path / "missing.csv"
    missing.write_text("qid,cid,question\n1,2,Q\n")
    with pytest.raises(DataError, match=r"missing.csv:1: missing column"):
        read_pairs_csv(str(missing))


def test_split_is_seeded_and_disjoint():
    tr, te = split_questions(list(range(50)), cid=7, n_train=40, n_test=5, seed=0)
    assert (tr, te) == split_questions(list(range(50)), cid=7, n_train=40, n_test=5, seed=0)
    assert not set(tr) & set(te) and len(tr) == 40 and len(te) == 5
    assert split_questions(list(range(50)), 7, 40, 5, seed=1) != (tr, te)
    with pytest.raises(ValueError, match="need n_train"):
        split_questions(list(range(10)), 7, 8, 5, 0)


def test_datamodule_real_data_and_user_pairs(tmp_path):
    dm = CRHPairsDataModule(concepts=[5, 12], n_questions=20)
    dm.setup()
    assert [c["cid"] for c in dm.batch["concepts"]] == [5, 12] and len(dm.batch["questions"]) == 20
    assert all(len(c["keywords"]) >= 3 for c in dm.batch["concepts"])
    full = CRHPairsDataModule()
    full.setup()
    assert len(full.batch["concepts"]) == 100 and len(full.batch["questions"]) == 805
    pairs = tmp_path / "pairs.csv"
    pairs.write_text(HEADER + '1,5,"Q?",roots,"A.","A. root."\n2,5,"R?",roots,"B.","B. root."\n')
    user = CRHPairsDataModule(path=str(pairs))
    user.setup()
    assert [c["cid"] for c in user.batch["concepts"]] == [5] and len(user.batch["pairs"]) == 2
