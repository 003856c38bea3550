"""TrSP: fair transit stop placement by ECA, Greedy Capture and the lambda-hybrid (see README.md).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = "trsp"
WHAT = (
    "TrSP: fair transit stop placement (ECA, Greedy Capture, λ-hybrid) with exact JR and core audits, on LODES commutes"
)
RECIPES = "`trsp.yaml` (Manhattan), `trsp-{gc,hybrid,core,large}.yaml`, `paper/trsp.yaml`"
WEIGHTS = "none (not trained)"
STATUS = (
    "bounds hold: ECA's JR ≤ 1.460 on the authors' design (800 candidates from the point pool, 21 LODES "
    "instances; bound 2.414), Greedy Capture in the (2, 1+√2)-core at both readings; but ECA opens 0-4 of 20 "
    "stops and is the least fair rule in every round, while Greedy Capture, k-means and the greedy stay "
    "exactly 1-JR (random stops above 1 in 3 of 21); one-pass JR audit 12.8× the authors' procedure"
)
EXAMPLE = {"recipe": "trsp", "predict": ["data/commuting-od/example_trips.csv"]}
BAD_ROW = {
    "recipe": "trsp.yaml",
    "files": {
        "trips.csv": "a_lon,a_lat,b_lon,b_lat\n-74.0,40.7,-74.01,40.71\n-74.0,north,-74.0,40.7\n",
        "stops.csv": "lon,lat\n-74.0,40.7\n",
    },
    "overrides": ["data.format=csv", "data.path=trips.csv", "data.stops_path=stops.csv"],
    "error": "trips.csv:3",
    "key": "data.path",
}
