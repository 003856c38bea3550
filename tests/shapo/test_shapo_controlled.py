"""The controlled task's oracle (VADER, checked against hand-known signs) and the tie-aware win rate by hand."""

import pytest

from zoo.methods.shapo.controlled import ARMS, oracle_reward, win_rate


def test_win_rate_by_hand():
    assert win_rate([0.5, 0.0, -0.2, 0.1], [0.1, 0.0, 0.3, 0.1]) == pytest.approx((1 + 0.5 + 0 + 0.5) / 4)
    with pytest.raises(ValueError):
        win_rate([0.1], [])


def test_oracle_is_vader_compound():
    pytest.importorskip("vaderSentiment")
    good, bad, flat = oracle_reward(["I love this, it is wonderful!", "This is terrible and I hate it.", "A table."])
    assert good > 0.5 and bad < -0.5 and flat == 0.0
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    assert good == SentimentIntensityAnalyzer().polarity_scores("I love this, it is wonderful!")["compound"]


def test_arms_cover_the_issue_baselines():
    assert set(ARMS) == {"dpo", "ipo", "rdpo", "simpo", "drdpo", "shapo-token", "shapo-reward"}
