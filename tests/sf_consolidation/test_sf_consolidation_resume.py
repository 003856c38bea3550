"""Resume (#40): training is one pass of ``data.steps`` environment steps; a checkpoint holds the step reached, so a
finished pass resumes as finished (no second pass from a fresh environment), and a pass stopped half-way is refused
(its environment and replay buffer are not in checkpoints)."""

import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("minigrid")

SMALL = {
    "steps": 40,
    "warmup": 8,
    "batch_size": 4,
    "buffer_size": 50,
    "learn_every": 4,
    "grid_size": 11,
    "task_period": 0,
    "max_episode_steps": 20,
}


def _dm():
    from zoo.methods.sf_consolidation.datamodule import DriftDataModule

    dm = DriftDataModule(**SMALL)
    dm.policy = lambda obs, t: 0
    return dm


def test_a_finished_pass_stays_finished_after_a_resume():
    dm = _dm()
    assert list(dm.train_dataloader())  # batches from env step 8 on, one every 4 steps
    assert dm.state_dict() == {"env_steps": 40}
    assert list(dm.train_dataloader()) == []  # a second epoch of the same run yields nothing
    resumed = _dm()
    resumed.load_state_dict(dm.state_dict())
    assert list(resumed.train_dataloader()) == []  # and so does the resumed run's (not a new pass)


def test_a_pass_stopped_half_way_is_refused_naming_the_step():
    from zoo.core.recipe import RecipeError

    with pytest.raises(
        RecipeError,
        match=r"^sf-consolidation: this checkpoint was written at environment step 12 "
        r"of data.steps=40; .* start it again without resume$",
    ):
        _dm().load_state_dict({"env_steps": 12})
