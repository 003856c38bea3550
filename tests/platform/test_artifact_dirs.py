"""A fit's tables and plots land in ``<run>/<method>/`` whatever ``logger.kind`` (#42): the cards say so, and the CSV
logger's ``logs/`` holds only its own files."""

import pytest

from zoo.cli import main
from zoo.core.data import repo_root


@pytest.mark.parametrize(
    "recipe,artefact",
    [
        ("trsp", "trsp/audit.json"),
        ("praxis", "praxis/best_tree.txt"),
        ("pulse", "pulse/alarms.json"),
        ("ltc", "ltc/rows.json"),
    ],
)
def test_artefacts_go_to_the_run_directory_with_the_csv_logger(recipe, artefact, tmp_path):
    assert (
        main(
            [
                "train",
                f"recipe={recipe}.yaml",
                f"overlay=tiny/{recipe}.yaml",
                "logger.kind=csv",
                "export.formats=[]",
                f"out_dir={tmp_path}",
            ]
        )
        == 0
    )
    run = tmp_path / f"{recipe}-tiny" / "version_0"
    assert (run / artefact).is_file() and (run / "logs" / "metrics.csv").is_file()
    assert sorted(p.name for p in (run / "logs").iterdir()) == ["hparams.yaml", "metrics.csv"]


def test_no_method_writes_its_artefacts_under_the_loggers_folder():
    """Every method asks ``ZooModule.artifact_dir`` (the run directory), none ``trainer.log_dir`` (``logs/`` with the
    CSV logger, the run directory without one)."""
    hits = [
        str(p.relative_to(repo_root()))
        for p in sorted((repo_root() / "zoo" / "methods").rglob("*.py"))
        if "trainer.log_dir" in p.read_text()
    ]
    assert not hits, hits
