"""anchor-adapter end to end on zoo-lm-tiny: GRPO from a user's JSONL prompts, then `zoo predict` on the run."""

import json
from pathlib import Path

import pytest

pytest.importorskip("reasoning_gym")

from zoo.cli import main


def test_grpo_on_user_prompts_then_predict(tmp_path, capsys):
    prompts = tmp_path / "mine.jsonl"
    prompts.write_text("".join(json.dumps({"question": f"{a} + {a}", "answer": 2 * a}) + "\n" for a in range(10)))
    assert (
        main(
            [
                "train",
                "recipe=anchor-adapter.yaml",
                "overlay=tiny/anchor-adapter.yaml",
                f"out_dir={tmp_path}",
                f"data.path={prompts}",
                "model.analyses=[]",
                f"data.cache={tmp_path / 'cache'}",
                "export.formats=[]",
            ]
        )
        == 0
    )
    run = next(Path(tmp_path).glob("*/version_0"))
    ev = json.loads((run / "anchor" / "eval.json").read_text())
    assert set(ev) == {"before", "after"} and 0 <= ev["after"]["acc_leaked"] <= 1 and ev["after"]["ppl_answer"] > 1
    capsys.readouterr()
    assert main(["predict", str(run), "Question: 23 + 48 - 17 = ?"]) == 0
    out = capsys.readouterr().out
    assert "gold 54" in out and "before (midtrain)" in out and "after (midtrain+grpo)" in out
    assert "logit lens" in out and out.count("resid_post") == 2
