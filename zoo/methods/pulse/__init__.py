"""PuLSE: SAE features of r/ChatGPT, release-anchored trend breakpoints and anytime-valid alarms.

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = "pulse"
WHAT = "PuLSE: top-K SAE features of r/ChatGPT text, release-anchored trend breakpoints, anytime-valid (betting) alarms"
RECIPES = "`pulse.yaml` (replay of the paper's daily aggregates), `pulse-sae.yaml`, `paper/pulse-sae.yaml`"
WEIGHTS = "`pulse.reddit-minilm`"
STATUS = (
    "therapy and attachment break at GPT-4o (2024-05-13) and nowhere else as in the paper (its trend "
    "objective on the fraction); the paper's OLS ratio is x22.0 / x12.9 on our activation fractions vs "
    "its x5.1 / x4.8; feature alarm 2024-10-19 vs the paper's 2024-10-20; no false alarms on 6,000 null "
    "streams; accuracy-test retrain dates not reproduced; subset fits 13.8x statsmodels"
)
EXAMPLE = {"recipe": "pulse", "predict": ["I talk to ChatGPT every night", "It helps me more than my therapist"]}
BAD_ROW = {
    "recipe": "pulse-sae.yaml",
    "files": {
        "posts.jsonl": '{"title": "t", "created_utc": 1682095128}\n{oops\n',
    },
    "overrides": ["data.posts_path=posts.jsonl"],
    "error": "posts.jsonl:2",
    "key": "data.posts_path",
}
