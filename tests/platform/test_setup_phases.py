"""Long set-up is never silent (#42): each phase before step 0 logs what it is doing when it begins (importing torch,
loading the weights ``init_from`` names, building the model (where a pretrained base's weights load), reading and
tokenising the data, the method's own set-up: ShaPO's reference, judge and stage-A probe) and its time when it took
long, and so does ShaPO's generation at validation; ``zoo predict`` / ``zoo eval`` say "loading ..." before importing
anything heavy."""

import logging

from zoo.cli import main


def test_the_quickstarts_phases_each_say_what_they_do(tmp_path, caplog, capsys):
    # the quickstart at tiny scale: ShaPO starting from zoo-lm weights (a tiny zoo-lm run's, as zoo-lm.chat at full
    # scale), so stage A computes its masks
    assert (
        main(["train", "recipe=zoo-lm.yaml", "overlay=tiny/zoo-lm.yaml", f"out_dir={tmp_path}", "export.formats=[]"])
        == 0
    )
    ckpt = tmp_path / "zoo-lm-tiny" / "version_0" / "checkpoints" / "last.ckpt"
    caplog.clear()
    capsys.readouterr()
    with caplog.at_level(logging.INFO, logger="zoo"):
        assert (
            main(
                [
                    "train",
                    "recipe=shapo-zoo-lm.yaml",
                    "overlay=tiny/shapo-zoo-lm.yaml",
                    f"out_dir={tmp_path}",
                    "export.formats=[]",
                    f"init_from={ckpt}",
                ]
            )
            == 0
        )
    assert capsys.readouterr().err.startswith(
        "zoo train: recipes/shapo-zoo-lm.yaml checked; importing torch, Lightning and shapo ..."
    )  # printed before torch is imported
    said = [r.getMessage() for r in caplog.records if r.name == "zoo"]
    phases = [
        f"loading init_from {ckpt} (checking sha256, reading the weights) ...",
        "building ShaPOModule (model: its networks; a pretrained base's weights load here) ...",
        "reading the data (PreferenceDataModule.setup: files, splits, tokenising) ...",
        "setting up the fit: ShaPOModule's own set-up (frozen models, caches, data loaders) ...",
        "ShaPO stage A: the safety probe on 16 training pairs, then the neuron masks ...",
        "training shapo from step 0",
        "ShaPO validation at step 2: sampling a reply to each of",
    ]  # the end-of-fit validation's generation
    at = [next((i for i, line in enumerate(said) if line.startswith(p)), None) for p in phases]
    assert None not in at and at == sorted(at), said


def test_predict_and_eval_say_loading_at_once(capsys):
    for cmd in ("predict", "eval"):
        assert main([cmd, "zoo-lm.nope", "Hi"] if cmd == "predict" else [cmd, "zoo-lm.nope"]) == 2
        err = capsys.readouterr().err.splitlines()
        assert err[0] == f"zoo {cmd}: loading zoo-lm.nope (torch, the method, its weights) ..."
        assert err[1].startswith("error: unknown zoo id 'zoo-lm.nope'")
