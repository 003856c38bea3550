"""sf-consolidation: fast and slow successor features (Chua, Precup, Richards, ICML 2026) for continual RL under gradual drift.

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = "rl"
WHAT = (
    "Fast and slow successor features: Simple SF / TD3 with an SF critic and Benna–Fusi multi-timescale "
    "consolidation under gradual drift (slippery Four Rooms, HalfCheetah with drifting mass, Miniworld "
    "behind a flag), with EWC, resets, plasticity injection and SB3 baselines"
)
RECIPES = (
    "`sf-consolidation.yaml` (Four Rooms), `sf-consolidation-halfcheetah.yaml`, "
    "`sf-consolidation-miniworld.yaml`, `paper/sf-consolidation-{miniworld,cheetah}.yaml`"
)
WEIGHTS = "`sf-consolidation.fourrooms-slippery`, `sf-consolidation.halfcheetah-drift`"
STATUS = (
    "not at this scale: 3 seeds × 12k Four Rooms steps leave every AUC interval overlapping, SF + 5 "
    "beakers third by mean (0.200 vs 0.268 for Q + 5 beakers); the second goal is reached by six variants "
    "(0.26–0.39 success) but rarely by plain DQN (0.017) and SF + 5 beakers (0.038); HalfCheetah only a "
    "3k-step smoke run; plain agent 1.22× / 1.40× SB3 DQN / TD3 steps/s, SF + beakers cost 1.62× / 1.56× (limit argued in the card)"
)
EXAMPLE = {"recipe": "sf-consolidation", "predict": ["--slip", "0.3", "--episodes", "2"]}
BAD_ROW = {
    "recipe": "sf-consolidation.yaml",
    "files": {
        "drift.csv": "step,mass_scale,friction_scale,slip_prob\n0,1.0,1.0,0.1\n10,1.0,1.0,1.5\n",
    },
    "overrides": ["data.drift=csv", "data.drift_path=drift.csv"],
    "error": "drift.csv:3",
    "key": "data.drift_path",
}
