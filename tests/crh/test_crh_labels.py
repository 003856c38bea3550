"""Gibberish rules on a string table, the keyword judge and the steerability slope of a hand-made label table."""

import pytest

from zoo.methods.crh.labels import concept_present, gibberish_rule, label, steerability

TABLE = [  # text, rule (documented patterns), rule (the authors' literal escapes)
    ("", "empty", "empty"),
    ("   ", "empty", "empty"),
    ("@@## $$%% ^^&& **(( ))__", "non_alnum", "non_alnum"),
    ("the cat the dog the sun the end the", "top_word", "top_word"),
    ("go go go go stop stop stop stop", "unique_ratio", "unique_ratio"),
    ("well I think that the cat cat cat cat is what we saw there today", "repeat_run", None),
    ("Wait ------- for it", "symbol_run", None),
    ("Bread needs flour, water, salt and yeast; knead it well.", None, None),
    ("a b c d e f g h i j k l", None, "non_alnum"),  # upstream counts the spaces as non-alphanumeric
]


@pytest.mark.parametrize("text,rule,authors", TABLE)
def test_gibberish_rules(text, rule, authors):
    assert gibberish_rule(text) == rule
    assert gibberish_rule(text, authors_escapes=True) == authors


def test_keyword_judge_whole_words_and_symbols():
    assert concept_present("Use an INT here", ["int"])
    assert not concept_present("print it", ["int"])
    assert concept_present("it costs $5", ["$"])
    assert concept_present("written in C++ today", ["C++"])
    assert label("Use an int here.", ["int", "float", "char"]) == 2
    assert label("Use a float here.", ["int"]) == 1
    assert label("", ["int"]) == 3


def test_steerability_slope_by_hand():
    # question 1: concept at steps 2, 3; question 2: at step 3 only; question 3 positive at step 1 (excluded)
    rows = [(1, 1, 1), (1, 2, 2), (1, 3, 2), (2, 1, 1), (2, 2, 1), (2, 3, 2), (3, 1, 2), (3, 2, 2), (3, 3, 2)]
    # fractions over questions 1, 2: 0, 0.5, 1 -> slope 0.5 per step
    assert steerability(rows) == pytest.approx(0.5)
    # without the exclusion: 1/3, 2/3, 1 -> slope 1/3
    assert steerability(rows, exclude_step1=False) == pytest.approx(1 / 3)
    assert steerability([(3, 1, 2), (3, 2, 2)]) is None


def test_soft_steerability_slope_by_hand():
    from zoo.methods.crh.labels import soft_steerability

    rows = [(1, 1, 0.0), (1, 2, 0.1), (1, 3, 0.2), (2, 1, 0.2), (2, 2, 0.3), (2, 3, 0.4), (3, 1, 9.0), (3, 3, 0.0)]
    assert soft_steerability(rows, exclude={3}) == pytest.approx(0.1)
    assert soft_steerability([(1, 1, 0.5)]) is None
