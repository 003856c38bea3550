"""PRAXIS: approximate Rashomon sets of sparse decision trees (see README.md).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = None
WHAT = "PRAXIS: approximate Rashomon sets of sparse decision trees"
RECIPES = "`praxis.yaml` (COMPAS), `praxis-{monk,car,tictactoe,fico,compas2016,large}.yaml`"
WEIGHTS = "none (not trained)"
STATUS = (
    "same sets as the authors' tree-praxis, recall 1.0 of TreeFARMS; 0.8-2.8x the authors' C++ CPU time (numba kernel; "
    "MONK-2 at the 3x limit, 2.8-3.4x between runs), 11.6-282x faster than TreeFARMS"
)
EXAMPLE = {"recipe": "praxis", "predict": ["data/treefarms-binary/compas_example_rows.csv"]}
BAD_ROW = {
    "recipe": "praxis.yaml",
    "files": {
        "table.csv": "a,b,y\n1,0,1\n0,1\n",
    },
    "overrides": ["data.path=table.csv", "data.label=y"],
    "error": "table.csv:3",
    "key": "data.path",
}
