"""WatchLog: EDR logs as video, a temporal cross-attention adapter, generated explanations (see README.md).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = None
WHAT = "WatchLog: EDR logs as video, temporal cross-attention adapter, generated explanations"
RECIPES = "`watchlog-stage1.yaml` → `watchlog-stage2.yaml` → `watchlog.yaml`, `paper/watchlog.yaml`"
WEIGHTS = "`watchlog.mordor` (+ stages)"
STATUS = (
    "de-duplicated held-out recordings: detection F1 0.826 ± 0.028 over 3 seeds, below bag-of-events "
    "(0.839) and the one-line labelling rule (0.869); right on 0.13 of the windows where the rule is "
    "wrong (bag-of-events 0.30) and below both on 3 leave-one-technique-out folds; the shipped model's "
    "head 0.900; explanations grounded in the event head cite the defining event in 3 of 9 windows, name "
    "no seen technique right (0 of 73) and say `unknown` for 183 of 213 unseen; 9.1x / 5.2x the token "
    "baseline's windows/s"
)
EXAMPLE = {"recipe": "watchlog", "predict": ["data/mordor-sysmon/sample.jsonl.gz"]}
BAD_ROW = {
    "recipe": "watchlog.yaml",
    "files": {
        "events.jsonl": '{"host": "a", "event_id": 1}\n[1, 2]\n',
    },
    "overrides": ["data.path=events.jsonl"],
    "error": "events.jsonl:2",
    "key": "data.path",
}
