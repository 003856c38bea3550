"""CRH: the cylindrical representation hypothesis for activation steering (arXiv 2605.01844).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = None
WHAT = (
    "CRH: cylindrical representation hypothesis for steering (difference vectors, axis μ_c, normal plane, "
    "v(L, λ) steering, Implication 2/3 correlation tests)"
)
RECIPES = (
    "`crh.yaml` (10 concepts), `crh-full.yaml`, `crh-smollm2.yaml` (SmolLM2-135M-Instruct, the authors' "
    "instructed pairs, its own yes/no judge), `paper/crh-gemma2b.yaml`, `paper/crh-llama2-7b.yaml`"
)
WEIGHTS = "`crh.zoo-lm-chat` (directions only)"
STATUS = (
    "not at this scale: on SmolLM2-135M-Instruct (30 concepts, 3 seeds) the difference vectors share no axis "
    "(pairwise cosine 0.011) and steering never produced a concept (0 of 900 outputs by keywords; the SmolLM2"
    " judge's 2 positives are wrong by hand); sin²θ/cos θ predicts no graded steerability (Pearson r −0.027, "
    "0.033, intervals spanning 0); zoo-lm.chat likewise (0 of 7500)"
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
