def test_a_users_series_does_not_replay_the_shipped_archives():
    from zoo.methods.pulse.datamodule import SHIPPED_ARCHIVES, PulseDataModule

    assert PulseDataModule().archive_dir == SHIPPED_ARCHIVES
    assert PulseDataModule(series_path="mine.json").archive_dir is None  # alarms would be r/ChatGPT's, not the user's
    assert PulseDataModule(series_path="mine.json", archive_dir="arch").archive_dir == "arch"
