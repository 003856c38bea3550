"""A corpus of malformed recipes: each fails before any training, with a message naming the key."""
import textwrap

import pytest

from zoo.cli import main

GOOD = """
method: digits-mlp
base: _defaults.yaml
model: {hidden: 8, num_classes: 10}
data: {batch_size: 16}
trainer: {accelerator: cpu, devices: 1, max_steps: 1}
"""

# (id, recipe text or None for GOOD, extra command-line tokens, substring the error must contain)
CORPUS = [
    ("unknown-top-key", GOOD + "modle: {}\n", [], "modle: unknown top-level key (did you mean 'model'?)"),
    ("unknown-model-key", GOOD.replace("hidden: 8", "hiden: 8"), [], "model.hiden"),
    ("unknown-data-key", GOOD.replace("batch_size", "batchsize"), [], "data.batchsize"),
    ("unknown-trainer-key", GOOD.replace("max_steps", "max_step"), [], "trainer.max_step"),
    ("unknown-checkpoint-key", GOOD + "checkpoint: {monitr: val/acc}\n", [], "checkpoint.monitr"),
    ("unknown-logger-key", GOOD + "logger: {knd: csv}\n", [], "logger.knd"),
    ("unknown-export-key", GOOD + "export: {format: [package]}\n", [], "export.format"),
    ("unknown-card-key", GOOD + "card: {licence: MIT}\n", [], "card.licence"),
    ("model-type-str-for-int", GOOD.replace("hidden: 8", "hidden: eight"), [], "model.hidden: expected int"),
    ("model-type-float-for-int", GOOD.replace("hidden: 8", "hidden: 8.5"), [], "model.hidden: expected int"),
    ("data-type", GOOD.replace("batch_size: 16", "batch_size: [16]"), [], "data.batch_size"),
    ("trainer-type", GOOD.replace("max_steps: 1", "max_steps: many"), [], "trainer.max_steps"),
    ("logger-kind", GOOD + "logger: {kind: mlflow}\n", [], "logger.kind: 'mlflow' is not one of"),
    ("checkpoint-mode", GOOD + "checkpoint: {mode: up}\n", [], "checkpoint.mode"),
    ("export-format", GOOD + "export: {formats: [torchscript]}\n", [], "export.formats: unknown format"),
    ("export-unsupported", GOOD + "export: {formats: [hf]}\n", [], "export.formats: digits-mlp cannot export 'hf'"),
    ("seed-negative", GOOD + "seed: -1\n", [], "seed: expected a non-negative integer"),
    ("seed-string", GOOD + "seed: abc\n", [], "seed:"),
    ("top-k-range", GOOD + "checkpoint: {save_top_k: -5}\n", [], "checkpoint.save_top_k: must be >= -1"),
    ("every-n-range", GOOD + "checkpoint: {every_n_train_steps: 0}\n", [], "checkpoint.every_n_train_steps"),
    ("max-epochs-range", GOOD.replace("max_steps: 1", "max_epochs: -7"), [], "trainer.max_epochs: must be >= -1"),
    ("hidden-range", GOOD.replace("hidden: 8", "hidden: 0"), [], "model.hidden: must be >= 1"),
    ("classes-range", GOOD.replace("batch_size: 16", "batch_size: 16, num_classes: 11"), [], "data.num_classes"),
    ("no-method", GOOD.replace("method: digits-mlp", ""), [], "method: missing"),
    ("unknown-method", GOOD.replace("digits-mlp", "digit-mlp"), [], "method: unknown method 'digit-mlp'"),
    ("bad-yaml", GOOD + "model: {hidden: [8\n", [], "invalid YAML"),
    ("duplicate-key", GOOD + "seed: 1\nseed: 2\n", [], "invalid YAML"),
    ("not-a-mapping", "- a\n- b\n", [], "a recipe must be a mapping"),
    ("missing-base", GOOD.replace("_defaults.yaml", "_defaultz.yaml"), [], "base: recipe '_defaultz.yaml' not found"),
    ("missing-init-from", GOOD + "init_from: nosuch.weights\n", [], "init_from:"),
    ("pickle-init-from", GOOD + "init_from: weights.pth\n", [], "init_from:"),
    ("missing-resume", GOOD + "resume: /nonexistent/last.ckpt\n", [], "resume: no such checkpoint"),
    ("trainer-callbacks", GOOD.replace("max_steps: 1", "max_steps: 1, callbacks: []"), [], "trainer.callbacks"),
    ("override-typo", None, ["model.hiddden=4"], "model.hiddden: no such key (did you mean 'model.hidden'?)"),
    ("override-unknown-block", None, ["dta.batch_size=4"], "dta: no such key"),
    ("override-bad-type", None, ["data.batch_size=big"], "data.batch_size: expected int"),
    ("override-add-unknown-arg", None, ["+model.dropout=0.1"], "model.dropout: DigitsMLP takes no argument"),
    ("override-delete-missing", None, ["~model.nope"], "model.nope: no such key"),
    ("missing-recipe", "", [], None),  # handled below: recipe=does-not-exist
    ("name-with-slash", GOOD + "name: a/b\n", [], "name: expected a run name"),
    ("interpolation-missing", GOOD.replace("hidden: 8", "hidden: '${nope}'"), [], "nope"),
]


@pytest.mark.parametrize("case", CORPUS, ids=[c[0] for c in CORPUS])
def test_malformed_recipe_fails_before_training(case, tmp_path, capsys):
    name, text, extra, want = case
    if name == "missing-recipe":
        args, want = ["recipe=does-not-exist"], "recipe 'does-not-exist' not found"
    else:
        recipe = tmp_path / "bad.yaml"
        recipe.write_text(textwrap.dedent(GOOD if text is None else text))
        args = [f"recipe={recipe}", *extra]
    code = main(["train", *args, f"out_dir={tmp_path / 'runs'}"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert want in err, err
    assert not (tmp_path / "runs").exists(), "a run directory was created: training started"


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 30
