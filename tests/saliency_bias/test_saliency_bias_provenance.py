"""The tables are aggregated from cached seeds; each seed records its commit and the tables name them (issue 39)."""

import json

from zoo.core.provenance import cached_runs_provenance

A = {"git_sha": "a" * 40, "dirty": False}


def test_saliency_bias_tables_name_the_seeds_commits(tmp_path):
    from zoo.methods.saliency_bias.experiments import OUR_METRIC, tables

    row = {
        "dataset": "digits",
        "background": "mean",
        "model": "vgg-zeros-d8",
        "method": "gradient",
        "state": "random",
        "seed": 0,
        "accuracy": 0.1,
        "csi_centroid": 0.5,
        "csi_distance": 0.0,
        "mass_corner": 0.2,
        "pointing_corner": 0.5,
        "pointing_centre": 0.5,
        "spearman_vs_trained": 0.1,
        "ssim_vs_trained": 0.1,
    }
    path = {
        "dataset": "digits",
        "model": "vgg-zeros-d4",
        "seed": 0,
        "pearson": 0.5,
        "ratio_theory": 1.0,
        "ratio_measured": 1.0,
    }
    _, note = cached_runs_provenance([A], "seeds")
    out = tables([row], [path], "reduced", [60.0], results_dir=tmp_path, seeds_note=note)
    for p in out:
        notes = json.loads(p.read_text())["notes"]
        assert notes.endswith("Seeds made at clean commit(s) aaaaaaaaaa (1).")
        assert notes.startswith(OUR_METRIC), p  # what the code writes, not only the committed files
