"""ST-TGExplainer: self-explaining temporal link prediction with stability/transition patterns (see README.md).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = "graph"
WHAT = "ST-TGExplainer: self-explaining temporal GNN, stability vs transition patterns"
RECIPES = "`st-tgexplainer.yaml` (CollegeMsg), `st-tgexplainer-bitcoin-otc.yaml`, `paper/st-tgexplainer.yaml`"
WEIGHTS = "`st-tgexplainer.collegemsg`"
STATUS = (
    "AP 0.93 at convergence (3 seeds, TGB protocol; paper 0.97), 0.003-0.014 below the plain GraphMixer; own mask "
    "above random on average (ACC-AUC 0.76 vs 0.72 on CollegeMsg) but in only 2 of 3 seeds per graph, far below "
    "gradient (0.86); no transfer gain at convergence; trains at 0.15× TGN"
)
EXAMPLE = {"recipe": "st-tgexplainer", "predict": ["1781", "9", "1096334672", "top=10"]}
BAD_ROW = {
    "recipe": "st-tgexplainer.yaml",
    "files": {
        "edges.csv": "u,i,ts,label,idx\n1,2,3,0,1\n1,two,4,0,2\n",
    },
    "overrides": ["data.path=edges.csv"],
    "error": "edges.csv:3",
    "key": "data.path",
}
