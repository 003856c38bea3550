"""transfer.run_arm: both arms train the Bitcoin-OTC recipe on the same event budget; the fine-tuned arm starts from
the CollegeMsg zoo weights with the node-indexed keys re-initialised, so its test scores differ from scratch's."""

import logging

import pytest

from zoo.methods.st_tgexplainer.transfer import run_arm


@pytest.mark.slow  # ~1-2 min: two 1-epoch trainings on 200 Bitcoin-OTC events, each tested on the full test split
def test_scratch_and_fine_tuned_arms(caplog):
    with caplog.at_level(logging.WARNING):
        scratch = run_arm(None, 0, 1, 200)
    assert "re-initialised head keys" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        tuned = run_arm("st-tgexplainer.collegemsg", 0, 1, 200)
    assert "re-initialised head keys" in caplog.text  # 1,899 CollegeMsg nodes -> 5,881 Bitcoin-OTC nodes
    for row in (scratch, tuned):
        assert 0.0 <= row["test/ap"] <= 1.0 and 0.0 <= row["test/mrr"] <= 1.0 and row["train_seconds"] > 0
    assert tuned["test/ap"] != scratch["test/ap"]
