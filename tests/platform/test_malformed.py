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
    # nested blocks, checked against the optimizer schema every method's `optimizer` argument shares
    ("optimizer-typo", None, ["+model.optimizer.lrr=1"], "model.optimizer.lrr: model.optimizer takes no argument"),
    (
        "optimizer-schedule",
        None,
        ["+model.optimizer.schedule=cosin"],
        "model.optimizer.schedule: expected one of 'constant', 'cosine', 'linear', got 'cosin'",
    ),
    ("optimizer-name", None, ["+model.optimizer.name=adamm"], "model.optimizer.name: expected one of 'adamw'"),
    ("optimizer-lr-negative", None, ["+model.optimizer.lr=-1"], "model.optimizer.lr: must be > 0.0"),
    ("optimizer-betas-length", None, ["+model.optimizer.betas=[0.9]"], "model.optimizer.betas: expected 2 values"),
    ("optimizer-warmup-type", None, ["+model.optimizer.warmup_steps=1.5"], "model.optimizer.warmup_steps"),
    # trainer keys against the generated Trainer table, with value ranges
    ("devices-zero", None, ["trainer.devices=0"], "trainer.devices: must be >= 1"),
    ("devices-negative", None, ["trainer.devices=-3"], "trainer.devices: must be >= 1"),
    ("max-epochs-word", None, ["+trainer.max_epochs=ten"], "trainer.max_epochs: expected int or null, got 'ten'"),
    ("precision-choice", None, ["+trainer.precision=33"], "trainer.precision: expected null or one of 64, 32, 16"),
    ("accumulate-zero", None, ["+trainer.accumulate_grad_batches=0"], "trainer.accumulate_grad_batches: must be >= 1"),
    ("num-nodes-zero", None, ["+trainer.num_nodes=0"], "trainer.num_nodes: must be >= 1"),
    (
        "limit-fraction",
        None,
        ["+trainer.limit_train_batches=1.5"],
        "trainer.limit_train_batches: a float is a fraction",
    ),
    ("val-check-zero", None, ["+trainer.val_check_interval=0"], "trainer.val_check_interval: must be > 0"),
    ("clip-negative", None, ["+trainer.gradient_clip_val=-1.0"], "trainer.gradient_clip_val: must be >= 0.0"),
    ("trainer-object-arg", None, ["+trainer.plugins=3"], "trainer.plugins: expected list or null"),
    ("trainer-logger", None, ["+trainer.logger=true"], "trainer.logger: set by zoo"),
    (
        "trainer-not-mapping",
        GOOD.replace("trainer: {accelerator: cpu, devices: 1, max_steps: 1}", "trainer: 3"),
        [],
        "trainer: must be a mapping",
    ),
    ("model-not-mapping", None, ["model=3"], "model: must be a mapping"),
    (
        "every-n-minutes-zero",
        GOOD + "checkpoint: {every_n_minutes: 0}\n",
        [],
        "checkpoint.every_n_minutes: must be > 0",
    ),
    ("logger-mode", GOOD + "logger: {mode: live}\n", [], "logger.mode: 'live' is not one of"),
    ("card-data-type", GOOD + "card: {data: 3}\n", [], "card.data"),
    ("seed-bool", GOOD + "seed: true\n", [], "seed: expected a non-negative integer"),
    ("data-limit-type", None, ["+data.limit=many"], "data.limit: expected int or null, got 'many'"),
    ("model-dict-for-int", None, ["model.hidden={a: 1}"], "model.hidden: expected int"),
    ("base-not-string", GOOD.replace("base: _defaults.yaml", "base: [a]"), [], "base: must be a recipe file name"),
    ("base-loops", GOOD.replace("_defaults.yaml", "bad.yaml"), [], "base chain loops"),
    # what the messages must say (issue 13, item 9)
    ("empty-file", "\n", [], "bad.yaml: method: missing"),
    ("directory", "", [], "is a directory; pass a recipe file"),
    ("unicode-lookalike-key", GOOD.replace("hidden: 8", "h\u0456dden: 8"), [], "U+0456 CYRILLIC SMALL LETTER"),
    ("unicode-lookalike-override", None, ["model.h\u0456dden=4"], "U+0456 CYRILLIC SMALL LETTER"),
    # shipped recipes (tables of real methods, no import of their code)
    (
        "shapo-accumulate",
        "@shapo.yaml",
        ["trainer.accumulate_grad_batches=2"],
        "trainer.accumulate_grad_batches: shapo optimises manually",
    ),
    (
        "zoo-lm-schedule",
        "@zoo-lm.yaml",
        ["model.optimizer.schedule=cosin"],
        "model.optimizer.schedule: expected one of",
    ),
    ("zoo-lm-devices", "@zoo-lm.yaml", ["trainer.devices=0"], "trainer.devices: must be >= 1"),
    ("zoo-lm-model-arg", "@zoo-lm.yaml", ["+model.archh=x"], "model.archh: ZooLM takes no argument 'archh'"),
    ("st-tgexplainer-steps", "@st-tgexplainer.yaml", ["trainer.max_steps=-5"], "trainer.max_steps: must be >= -1"),
    ("praxis-export", "@praxis.yaml", ["export.formats=[onnx]"], "export.formats: praxis cannot export 'onnx'"),
]


@pytest.mark.parametrize("case", CORPUS, ids=[c[0] for c in CORPUS])
def test_malformed_recipe_fails_before_training(case, tmp_path, capsys):
    name, text, extra, want = case
    if name == "missing-recipe":
        args, want = ["recipe=does-not-exist"], "recipe 'does-not-exist' not found"
    elif name == "directory":
        (tmp_path / "a.yaml").write_text(GOOD)
        args = [f"recipe={tmp_path}"]
    elif text and text.startswith("@"):
        args = [f"recipe={text[1:]}", *extra]
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
    assert len(CORPUS) >= 60


@pytest.mark.parametrize(
    "args,want",
    [
        (["recipe=zoo-lm.yaml", "trainer.devices=0"], "trainer.devices: must be >= 1"),
        (["recipe=zoo-lm.yaml", "model.optimizer.schedule=cosin"], "model.optimizer.schedule"),
        (["recipe=shapo.yaml", "trainer.accumulate_grad_batches=2"], "trainer.accumulate_grad_batches"),
        (["recipe=cond-dp.yaml", "model.epsilon=-1"], "model.epsilon: must be > 0, got -1"),  # #42's examples
        (["recipe=cond-dp.yaml", "model.conditioning=reparm"], "model.conditioning: expected one of"),
    ],
)
def test_train_py_fails_without_traceback_torch_or_run_dir(args, want, tmp_path):
    """The command a user types: exit 2, the key in one line, no traceback, torch never imported, no runs/ folder."""
    import subprocess
    import sys

    probe = (
        "import sys; from zoo.cli import main; rc = main(['train', *sys.argv[1:]]); "
        "print('torch imported' if 'torch' in sys.modules else 'torch not imported'); sys.exit(rc)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, *args, f"out_dir={tmp_path / 'runs'}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert want in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert "torch not imported" in out.stdout
    assert not (tmp_path / "runs").exists()


def test_export_format_without_its_extra_fails_before_training(tmp_path, capsys, uninstall):
    """``export.formats`` naming onnx without the export extra fails at validation with the install command, not after
    training; no run directory."""
    uninstall("onnxruntime")
    code = main(
        [
            "train",
            "recipe=cond-dp.yaml",
            "overlay=tiny/cond-dp.yaml",
            "export.formats=[package,onnx]",
            f"out_dir={tmp_path / 'runs'}",
        ]
    )
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        'error: export.formats: onnx export needs: pip install -e ".[export]" (missing onnxruntime)'
    ]
    assert not (tmp_path / "runs").exists()
