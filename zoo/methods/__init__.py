"""Every method's registry name and the module whose import registers it (kept static so listing is cheap)."""

METHODS: dict[str, str] = {
    "zoo-lm": "zoo.methods.zoo_lm.module",
    "st-tgexplainer": "zoo.methods.st_tgexplainer.module",
    "shapo": "zoo.methods.shapo.module",
    "shapo-cost-model": "zoo.methods.shapo_cost_model.module",
    "praxis": "zoo.methods.praxis.module",
    "watchlog": "zoo.methods.watchlog.module",
    "desi": "zoo.methods.desi.module",
}
