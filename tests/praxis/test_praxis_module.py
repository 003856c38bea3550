from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch

from zoo.methods.praxis.datamodule import BinaryCSVDataModule
from zoo.methods.praxis.encoding import decode_tree, encode_trees
from zoo.methods.praxis.enumerate import iter_trees, predict_tree
from zoo.methods.praxis.module import PraxisModule
from zoo.methods.praxis.rashomon import fit_rashomon
from zoo.methods.praxis.rid import rashomon_importance

DATA = "data/treefarms-binary/monk2.csv"


def test_encode_decode_roundtrip():
    trees = [1, (2, 0, 1), (0, (1, 1, 0), 0)]
    feat, val = encode_trees(trees, depth=2)
    assert [decode_tree(f, v) for f, v in zip(feat, val)] == trees


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    dm = BinaryCSVDataModule(DATA, "class_1")
    model = PraxisModule(lam=0.01, depth=3, eps=0.03, max_saved_trees=50, rid_bootstraps=3, rid_trees=40)
    trainer = L.Trainer(
        accelerator="cpu",
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path_factory.mktemp("run")),
    )
    trainer.fit(model, datamodule=dm)
    return model, dm, trainer


def test_fit_runs_the_enumeration_once_and_logs(fitted):
    model, dm, trainer = fitted
    ref = fit_rashomon(dm.X_train, dm.y_train, 0.01, 3, 0.03)
    assert model.meta["n_trees"] == str(ref.n_trees) == "187"
    assert model.tree_feature.shape[0] > 0 and trainer.global_step == 0
    assert trainer.callback_metrics["train/min_objective"].item() == ref.min_objective
    for key in ("seconds", "peak_mem_mib", "n_trees", "bound"):
        assert f"train/{key}" in trainer.callback_metrics
    stored = [t for _, t in zip(range(50), iter_trees(ref.root))]
    preds = model(torch.from_numpy(dm.X_train)).numpy()
    assert preds.shape == (50, len(dm.y_train))
    for i in (0, 13, 49):
        assert np.array_equal(preds[i], predict_tree(stored[i][1], dm.X_train))
    for name in ("best_tree.txt", "best_tree.png", "size_vs_eps.png", "importance.json"):
        assert name in model.package_extras()


def test_state_dict_roundtrip_and_predict_cli(fitted, tmp_path):
    model, dm, _ = fitted
    fresh = PraxisModule(lam=0.01, depth=3, eps=0.03, max_saved_trees=50, rid_bootstraps=3, rid_trees=40)
    fresh.load_state_dict(model.state_dict(), strict=True)
    rows = tmp_path / "rows.csv"
    lines = Path(DATA).read_text().splitlines()[:4]
    rows.write_text("\n".join(lines) + "\n")  # label column present: not a feature, its accuracy is reported
    text = fresh.predict_cli([str(rows)], str(tmp_path / "out"))
    head = text.split("## Rashomon importance")[0]
    # 3 title lines, file, header, rows, accuracy
    assert "50 stored trees of 187" in head and len(head.splitlines()) == 5 + 3 + 1
    assert "# accuracy against column 'class_1' (3 rows): best tree" in head
    # both importances: usage per feature (11 columns) and RID per variable, printed and plotted
    usage_part = text.split("## Rashomon importance by usage")[1].split("## Rashomon importance distribution")[0]
    assert len(usage_part.strip().splitlines()) == 2 + 11
    rid_part = text.split("## Rashomon importance distribution")[1].split("# importance plot")[0]
    assert len(rid_part.strip().splitlines()) == 2 + 11 and "P(>0)" in rid_part
    assert (tmp_path / "out" / "importance.png").stat().st_size > 1000
    ref_rid = rashomon_importance(
        dm.X_train,
        dm.y_train,
        0.01,
        3,
        0.03,
        n_bootstrap=3,
        max_trees=40,
        seed=0,
        variables=fresh.meta["feature_names"],
    ).summary()
    assert fresh.meta["rid"] == ref_rid
    ref = fit_rashomon(dm.X_train, dm.y_train, 0.01, 3, 0.03)
    assert f"the set enumerated): {ref.n_trees}\n" in text, text
    assert f"mistakes): {ref.n_within_best}\n" in text, text
    spread = fresh.spread(dm.X_train[:3])
    assert np.allclose(spread["votes"].sum(1), 1.0)
    metrics = fresh.evaluate(dm)
    assert 0.5 < metrics["train/best_tree_accuracy"] <= 1.0


def _rows(tmp_path, n: int, label: bool = True) -> Path:
    header, *body = Path(DATA).read_text().splitlines()[: n + 1]
    if not label:  # drop the last column (class_1)
        header, body = header.rsplit(",", 1)[0], [r.rsplit(",", 1)[0] for r in body]
    path = tmp_path / ("labelled.csv" if label else "unlabelled.csv")
    path.write_text("\n".join([header, *body]) + "\n")
    return path


def test_predict_json_gives_rows_and_accuracy_when_labelled(fitted, tmp_path):
    model, dm, _ = fitted
    doc = model.predict_json([str(_rows(tmp_path, 20))])
    pred, metrics = doc["prediction"], doc["metrics"]
    assert pred["label"] == "class_1" and pred["classes"] == ["0", "1"] and pred["n_trees"] == 187
    rows = pred["files"][0]["rows"]
    s = model.spread(dm.X_train[:20])  # the file's rows are the first 20 training rows (val_fraction 0)
    assert [r["best_tree"] for r in rows] == [dm.classes[b] for b in s["best"]]
    assert [r["label"] for r in rows] == [dm.classes[y] for y in dm.y_train[:20]]
    assert np.allclose([list(r["votes"].values()) for r in rows], s["votes"])
    assert metrics == {
        "n": 20,
        "best_tree_accuracy": pytest.approx(float((s["best"] == dm.y_train[:20]).mean())),
        "vote_accuracy": pytest.approx(float((s["votes"].argmax(1) == dm.y_train[:20]).mean())),
    }
    assert [u["feature"] for u in pred["importance"]["usage"]] == model.meta["feature_names"]
    unlabelled = model.predict_json([str(_rows(tmp_path, 5, label=False))])
    assert "metrics" not in unlabelled and "label" not in unlabelled["prediction"]["files"][0]["rows"][0]


def test_predict_refuses_a_label_outside_the_classes(fitted, tmp_path):
    from zoo.core.data import DataError

    path = _rows(tmp_path, 3)
    path.write_text(path.read_text().rstrip("\n")[:-1] + "yes\n")  # last row's label
    with pytest.raises(DataError, match=r"labelled.csv:4: column 'class_1': 'yes' is not a class of this model"):
        fitted[0].predict_json([str(path)])


def test_predict_writes_files_only_with_out_dir(fitted, tmp_path, monkeypatch):
    rows = _rows(tmp_path, 3)
    monkeypatch.chdir(tmp_path)
    fitted[0].predict_cli([str(rows)])
    fitted[0].predict_json([str(rows)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labelled.csv"]
    fitted[0].predict_json([str(rows)], str(tmp_path / "out"))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["importance.json", "importance.png", "spread.tsv"]


def test_end_to_end_recipe(tmp_path, capsys):
    import json

    from zoo.cli import main

    assert main(["train", "recipe=praxis.yaml", "overlay=recipes/tiny/praxis.yaml", f"out_dir={tmp_path}"]) == 0
    assert list(tmp_path.glob("praxis-tiny/version_*/praxis/best_tree.png"))
    run_dir = next(tmp_path.glob("praxis-tiny/version_*"))
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()  # the one manual step makes Lightning save the fit
    assert main(["eval", str(run_dir)]) == 0
    rows = tmp_path / "rows.csv"  # shipped COMPAS rows, label column included
    rows.write_text("\n".join(Path("data/treefarms-binary/compas_binned.csv").read_text().splitlines()[:11]) + "\n")
    capsys.readouterr()
    assert main(["predict", str(run_dir), "--json", str(rows)]) == 0  # README: --json has metrics given labels
    doc = json.loads(capsys.readouterr().out)
    assert doc["metrics"]["n"] == 10 and 0 <= doc["metrics"]["vote_accuracy"] <= 1
    assert len(doc["prediction"]["files"][0]["rows"]) == 10
