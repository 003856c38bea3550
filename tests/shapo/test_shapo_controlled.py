"""The controlled task's oracle (VADER, checked against hand-known signs) and the tie-aware win rate by hand."""

import pytest

from zoo.methods.shapo.controlled import ARMS, win_rate
from zoo.methods.shapo.controlled_data import oracle_reward


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


def test_paired_win_ci_by_hand():
    from zoo.methods.shapo.controlled import paired_win_ci, prompt_wins

    reference = [0.0, 0.5, -0.5]
    assert prompt_wins([0.1, 0.5, -0.9], reference) == [1.0, 0.5, 0.0]
    arm = [{"seed": 0, "rewards_hh": [0.1, 0.9, 0.0]}, {"seed": 1, "rewards_hh": [-0.1, 0.5, -0.6]}]
    dpo = [{"seed": 0, "rewards_hh": [-0.1, 0.9, -0.6]}, {"seed": 2, "rewards_hh": [0.3, 0.3, 0.3]}]
    # only seed 0 is paired: arm wins [1, 1, 1], DPO wins [0, 1, 0] -> differences [1, 0, 1]
    ci = paired_win_ci(arm, dpo, "hh", reference)
    assert ci["n"] == 3 and ci["mean"] == pytest.approx(2 / 3)
    assert 0.0 <= ci["lo"] <= 2 / 3 <= ci["hi"] <= 1.0
    assert paired_win_ci(arm, [], "hh", reference) is None


def test_reference_is_the_recipes_starting_policy():
    from zoo.cli import compose_and_validate
    from zoo.methods.shapo.controlled import reference_id

    assert reference_id(compose_and_validate(["recipe=shapo-controlled.yaml"])) == "zoo-lm.chat"
    assert reference_id(compose_and_validate(["recipe=shapo-controlled-smollm2.yaml"])) == "smollm2-135m-instruct"


def test_reward_arm_cost_model_reads_the_policys_tokens():
    from zoo.cli import compose_and_validate
    from zoo.methods.shapo.controlled import cost_model_recipe

    assert cost_model_recipe(compose_and_validate(["recipe=shapo-controlled.yaml"])) == "shapo-cost-model.yaml"
    smol = compose_and_validate(["recipe=shapo-controlled-smollm2.yaml"])
    assert cost_model_recipe(smol) == "shapo-cost-model-smollm2.yaml"


def test_hh_sweep_on_smollm2_refuses_the_reward_arm_without_a_cost_model(capsys):
    from zoo.methods.shapo.experiments import main

    with pytest.raises(SystemExit) as e:
        main(["--base", "smollm2", "--work", "/nonexistent/never-created"])
    assert e.value.code == 2 and "needs --cost-model" in capsys.readouterr().err
