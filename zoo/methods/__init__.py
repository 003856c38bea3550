"""Every method's registry name and the module whose import registers it (kept static so listing is cheap)."""

METHODS: dict[str, str] = {
    "zoo-lm": "zoo.methods.zoo_lm.module",
    "st-tgexplainer": "zoo.methods.st_tgexplainer.module",
    "shapo": "zoo.methods.shapo.module",
    "shapo-cost-model": "zoo.methods.shapo_cost_model.module",
    "praxis": "zoo.methods.praxis.module",
    "watchlog": "zoo.methods.watchlog.module",
    "survshap-iq": "zoo.methods.survshap_iq.module",
    "saliency-bias": "zoo.methods.saliency_bias.module",
    "trsp": "zoo.methods.trsp.module",
    "cond-dp": "zoo.methods.cond_dp.module",
    "desi": "zoo.methods.desi.module",
    "crh": "zoo.methods.crh.module",
    "ltc": "zoo.methods.ltc.module",
    "mad": "zoo.methods.mad.module",
    "pulse": "zoo.methods.pulse.module",
    "sf-consolidation": "zoo.methods.sf_consolidation.module",
    "pooled-reps": "zoo.methods.pooled_reps.module",
    "fast": "zoo.methods.fast.module",
    "rlcracker": "zoo.methods.rlcracker.module",
    "sembind": "zoo.methods.sembind.module",
    "anchor-adapter": "zoo.methods.anchor_adapter.module",
}

#: The pyproject extra a method needs beyond the core install (``pip install -e ".[EXTRA]"``); methods not
#: listed run on the core install. ``zoo list`` marks a method whose extra is missing, and using it fails with
#: the one-line install command instead of a traceback.
EXTRAS: dict[str, str] = {
    "st-tgexplainer": "graph",
    "survshap-iq": "survival",
    "saliency-bias": "vision",
    "trsp": "trsp",
    "cond-dp": "privacy",
    "desi": "frechet",
    "ltc": "clip",
    "pulse": "pulse",
    "sf-consolidation": "rl",
    "pooled-reps": "text",
    "fast": "fast",
    "rlcracker": "text",
    "sembind": "sembind",
    "anchor-adapter": "anchor",
}
