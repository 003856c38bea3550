"""``zoo predict`` for a Cond-DP model: one origin-destination pair for a model trained on a commuting-od county,
the rows of a CSV for a model trained on a CSV (or diabetes)."""

from __future__ import annotations

import math

import numpy as np
import torch


def parse_pair(inputs: list[str]) -> tuple[str, str]:
    """``[ORIGIN, DESTINATION]``, ``[origin=G, destination=G]`` or ``[--origin, G, --destination, G]`` -> geoids.

    Raises:
        ValueError: anything else.
    """
    named, plain, it = {}, [], iter(inputs)
    for a in it:
        key = a.lstrip("-")
        if "=" in key:
            k, v = key.split("=", 1)
            named[k] = v
        elif a.startswith("--"):
            named[key] = next(it, "")
        else:
            plain.append(a)
    if named.keys() >= {"origin", "destination"}:
        return named["origin"].strip(), named["destination"].strip()
    if len(plain) == 2 and not named:
        return plain[0].strip(), plain[1].strip()
    raise ValueError("give two tract GEOIDs: ORIGIN DESTINATION, or origin=GEOID destination=GEOID")


def predict_pair(module, inputs: list[str]) -> dict:
    """``{"origin", "destination", "predicted_commuters", "log1p", "observed"}`` for one pair: predicted (``expm1`` of
    the predicted log(1 + commuters)) and observed commuters (``None`` when LODES does not list the pair).

    Raises:
        ValueError: a model not trained on a commuting-od county, or an unknown GEOID.
    """
    from zoo.data.commuting_od import load_county
    from zoo.data.od_pairs import pair_features

    dataset = module.hparams.get("dataset") or ""
    if not dataset.startswith("commuting-"):
        raise ValueError(
            f"this model was trained on {dataset or 'unknown data'!r} before cond-dp saved its feature "
            "columns, so it cannot read rows to predict: retrain it (then `zoo predict RUN rows.csv` "
            "works), or measure it with `zoo eval RUN`"
        )
    origin, destination = parse_pair(inputs)
    county = dataset.split("-", 1)[1]
    regions, flows = load_county(county)
    index = regions.index()
    for name, g in (("origin", origin), ("destination", destination)):
        if g not in index:
            raise ValueError(f"{name} {g!r} is not a tract of {county} (e.g. {regions.geoid[0]})")
    o, d = index[origin], index[destination]
    hit = np.nonzero((flows.origin == o) & (flows.destination == d))[0]
    dist = flows.distance_m[hit[0]] if len(hit) else math.dist(*_planar(regions.lonlat[[o, d]]))
    X, _ = pair_features(regions, np.array([o]), np.array([d]), np.array([dist]))
    x = (torch.as_tensor(X, dtype=torch.float32) - module.x_mean.float()) / module.x_scale.float()
    with torch.no_grad():
        log_pred = float(module(x)[0])
    return {
        "origin": origin,
        "destination": destination,
        "predicted_commuters": math.expm1(log_pred),
        "log1p": log_pred,
        "observed": int(flows.commuters[hit[0]]) if len(hit) else None,
    }


def predict_rows(module, inputs: list[str]) -> list[dict]:
    """``zoo predict RUN rows.csv ...`` for a model trained on a CSV (or diabetes): per file ``{"file", "rows":
    [{"row", "prediction"}]}``, the predicted label of each row (in the training label's units), from the columns
    the model was trained on (``feature_names``, raw values; other columns are ignored), standardised as in training.

    Raises:
        DataError: a missing file or feature column, an empty or non-numeric cell (``file:line: column 'c'``).
        ValueError: no input file.
    """
    from zoo.methods.cond_dp.datamodule import read_table

    names = module.hparams.feature_names
    if not inputs:
        raise ValueError(
            f"give one or more CSV files with the training feature columns ({', '.join(names[:5])}"
            f"{', ...' if len(names) > 5 else ''})"
        )
    files = []
    for path in inputs:
        X, _, _ = read_table(path, None, names)
        x = (torch.as_tensor(X, dtype=torch.float32) - module.x_mean.float()) / module.x_scale.float()
        with torch.no_grad():
            pred = module(x).reshape(-1).tolist()
        files.append({"file": str(path), "rows": [{"row": i, "prediction": float(p)} for i, p in enumerate(pred)]})
    return files


def model_record(module) -> dict:
    """``{"conditioning", "model", "private", "epsilon", "delta"}``: how the model was trained (ε spent and δ of its
    label-DP guarantee; ``None`` without DP-SGD)."""
    rec = module.privacy_record() if module.hparams.private else {}
    return {
        "conditioning": module.hparams.conditioning,
        "model": module.hparams.model,
        "private": bool(module.hparams.private),
        "epsilon": rec.get("epsilon_spent"),
        "delta": rec.get("delta"),
    }


def as_text(prediction: dict) -> str:
    """``CondDPModule.predict_record``'s records as ``zoo predict`` prints them."""
    lines = []
    for p in prediction["pairs"]:
        observed = p["observed"] if p["observed"] is not None else "0 (pair not listed in LODES)"
        lines.append(
            f"{p['origin']} -> {p['destination']}: predicted {p['predicted_commuters']:.1f} commuters "
            f"(log1p {p['log1p']:.3f}); observed {observed}"
        )
    for f in prediction["files"]:
        lines += [f"## {f['file']}", "row\tprediction"] + [f"{r['row']}\t{r['prediction']:.4f}" for r in f["rows"]]
    m = prediction["model"]
    how = (
        f"trained with label DP ε = {m['epsilon']:.3f}, δ = {m['delta']:g}"
        if m["private"]
        else "trained without DP-SGD"
    )
    return "\n".join(lines + [f"model: {m['conditioning']} / {m['model']}, {how}"])


def _planar(lonlat: np.ndarray) -> np.ndarray:
    """Degrees -> metres on a local equirectangular plane (for pairs absent from the OD file)."""
    lat0 = math.radians(float(lonlat[:, 1].mean()))
    return np.column_stack([np.radians(lonlat[:, 0]) * 6371000 * math.cos(lat0), np.radians(lonlat[:, 1]) * 6371000])
