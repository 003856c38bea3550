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


def predict_pair(module, inputs: list[str]) -> str:
    """Predicted (``expm1`` of the predicted log(1 + commuters)) and observed commuters for one pair.

    Raises:
        ValueError: a model not trained on a commuting-od county, or an unknown GEOID.
    """
    from zoo.data.commuting_od import load_county
    from zoo.data.od_pairs import pair_features

    dataset = module.hparams.get("dataset") or ""
    if not dataset.startswith("commuting-"):
        raise ValueError(f"this model was trained on {dataset or 'unknown data'!r} before cond-dp saved its feature "
                         "columns, so it cannot read rows to predict: retrain it (then `zoo predict RUN rows.csv` "
                         "works), or measure it with `zoo eval RUN`")
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
    observed = f"{int(flows.commuters[hit[0]])}" if len(hit) else "0 (pair not listed in LODES)"
    return (f"{origin} -> {destination}: predicted {math.expm1(log_pred):.1f} commuters "
            f"(log1p {log_pred:.3f}); observed {observed}\n{_model_line(module)}")


def predict_rows(module, inputs: list[str]) -> str:
    """``zoo predict RUN rows.csv ...`` for a model trained on a CSV (or diabetes): per file, the predicted label of
    each row (in the training label's units), from the columns the model was trained on (``feature_names``, raw
    values; other columns are ignored), standardised as in training.

    Raises:
        DataError: a missing file or feature column, an empty or non-numeric cell (``file:line: column 'c'``).
        ValueError: no input file.
    """
    from zoo.methods.cond_dp.datamodule import read_table

    names = module.hparams.feature_names
    if not inputs:
        raise ValueError(f"give one or more CSV files with the training feature columns ({', '.join(names[:5])}"
                         f"{', ...' if len(names) > 5 else ''})")
    lines = []
    for path in inputs:
        X, _, _ = read_table(path, None, names)
        x = (torch.as_tensor(X, dtype=torch.float32) - module.x_mean.float()) / module.x_scale.float()
        with torch.no_grad():
            pred = module(x).reshape(-1).tolist()
        lines += [f"## {path}", "row\tprediction"] + [f"{i}\t{p:.4f}" for i, p in enumerate(pred)]
    return "\n".join(lines + [_model_line(module)])


def _model_line(module) -> str:
    if not module.hparams.private:
        return f"model: {module.hparams.conditioning} / {module.hparams.model}, trained without DP-SGD"
    rec = module.privacy_record()
    return (f"model: {module.hparams.conditioning} / {module.hparams.model}, trained with label DP "
            f"ε = {rec['epsilon_spent']:.3f}, δ = {rec['delta']:g}")


def _planar(lonlat: np.ndarray) -> np.ndarray:
    """Degrees -> metres on a local equirectangular plane (for pairs absent from the OD file)."""
    lat0 = math.radians(float(lonlat[:, 1].mean()))
    return np.column_stack([np.radians(lonlat[:, 0]) * 6371000 * math.cos(lat0), np.radians(lonlat[:, 1]) * 6371000])
