"""CRH: the cylindrical representation hypothesis for activation steering (arXiv 2605.01844).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = None
WHAT = (
    "CRH: cylindrical representation hypothesis for steering (difference vectors, axis μ_c, normal plane,"
    " v(L, λ) steering, Implication 2/3 correlation tests)"
)
RECIPES = "`crh.yaml` (10 concepts), `crh-full.yaml`, `paper/crh-gemma2b.yaml`, `paper/crh-llama2-7b.yaml`"
WEIGHTS = "`crh.zoo-lm-chat` (directions only)"
STATUS = (
    "not at this scale: zoo-lm.chat never writes a concept keyword when steered (0 of 7500 outputs), so "
    "the paper's steerability is 0; on a keyword-probability stand-in, sin²θ/cos θ does not predict "
    "steerability (Pearson r -0.063 and 0.075 at layers 2 and 3, 10 concepts, 3 seeds)"
)
EXAMPLE = {"recipe": "crh", "predict": ["2", "How do I bake bread?"]}
BAD_ROW = {
    "recipe": "crh.yaml",
    "files": {
        "pairs.csv": "qid,cid,question,concept,resp_no_concept,resp_with_concept\n0,1,q,c,a,b\nzero,1,q,c,a,b\n",
    },
    "overrides": ["data.path=pairs.csv"],
    "error": "pairs.csv:3",
    "key": "data.path",
}
