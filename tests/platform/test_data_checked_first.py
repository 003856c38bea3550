"""Data are checked before the run starts (#13), for every method: a bad row in the user's file fails with exit code 2,
a message naming the file, the line and the recipe key to change, before any run directory is opened."""
import pytest

from zoo.cli import main
from zoo.core import run
from zoo.methods import METHODS

CHAT_OK = '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}'
PAIR_OK = '{"prompt": "a", "chosen": "b", "rejected": "c"}'

#: method -> (recipe, file name, file text, overrides (FILE = the bad file), expected "file:line", expected key)
CASES = {
    "zoo-lm": ("zoo-lm.yaml", "chats.jsonl", f"{CHAT_OK}\n{{not json\n", ["data.mode=chat", "data.path=[FILE]"],
               "chats.jsonl:2", "data.path"),
    "st-tgexplainer": ("st-tgexplainer.yaml", "edges.csv", "u,i,ts,label,idx\n1,2,3,0,1\n1,two,4,0,2\n",
                       ["data.path=FILE"], "edges.csv:3", "data.path"),
    "shapo": ("shapo.yaml", "pairs.jsonl", f'{PAIR_OK}\n{{"prompt": "a", "chosen": "b"}}\n', ["data.path=FILE"],
              "pairs.jsonl:2", "data.path"),
    "shapo-cost-model": ("shapo-cost-model.yaml", "pairs.jsonl", f'{PAIR_OK}\n{{"prompt": "a", "chosen": "b"}}\n',
                         ["data.path=FILE"], "pairs.jsonl:2", "data.path"),
    "praxis": ("praxis.yaml", "table.csv", "a,b,y\n1,0,1\n0,1\n", ["data.path=FILE", "data.label=y"],
               "table.csv:3", "data.path"),
    "watchlog": ("watchlog.yaml", "events.jsonl", '{"host": "a", "event_id": 1}\n[1, 2]\n', ["data.path=FILE"],
                 "events.jsonl:2", "data.path"),
    "survshap-iq": ("survshap-iq.yaml", "surv.csv", "time,event,x\n1.0,1,0.5\nsoon,0,0.1\n",
                    ["data.path=FILE"], "surv.csv:3", "data.path"),
    "trsp": ("trsp.yaml", "trips.csv", "a_lon,a_lat,b_lon,b_lat\n-74.0,40.7,-74.01,40.71\n-74.0,north,-74.0,40.7\n",
             ["data.format=csv", "data.path=FILE", "data.stops_path=stops.csv"], "trips.csv:3", "data.path"),
    "cond-dp": ("cond-dp.yaml", "reg.csv", "x,y\n1.0,2.0\n2.0,abc\n3.0,4.0\n", ["data.path=FILE", "data.label=y", "data.y_min=0",
                                                                 "data.y_max=10"], "reg.csv:3", "data.path"),
    "desi": ("desi.yaml", "resp.csv", ("x,y_0,y_1,y_2\n0.1,0.0,0.5,1.0\n0.2,0.0,0.7,0.3\n"
                                       "0.3,0.0,0.4,1.0\n0.4,0.1,0.4,1.0\n"),
             ["data.path=FILE", "data.space=distribution"], "resp.csv:3", "data.path"),
    "crh": ("crh.yaml", "pairs.csv", ("qid,cid,question,concept,resp_no_concept,resp_with_concept\n"
                                     "0,1,q,c,a,b\nzero,1,q,c,a,b\n"), ["data.path=FILE"], "pairs.csv:3", "data.path"),
    "pulse": ("pulse-sae.yaml", "posts.jsonl", '{"title": "t", "created_utc": 1682095128}\n{oops\n',
              ["data.posts_path=FILE"], "posts.jsonl:2", "data.posts_path"),
    "sf-consolidation": ("sf-consolidation.yaml", "drift.csv",
                         "step,mass_scale,friction_scale,slip_prob\n0,1.0,1.0,0.1\n10,1.0,1.0,1.5\n",
                         ["data.drift=csv", "data.drift_path=FILE"], "drift.csv:3", "data.drift_path"),
    "pooled-reps": ("pooled-reps.yaml", "items.jsonl", '{"prompt": "a", "reference": "b"}\n{"prompt": "a"}\n',
                    ["data.sources=[user]", "data.path=FILE"], "items.jsonl:2", "data.path"),
    "fast": ("fast-sae.yaml", "chats.jsonl", f"{CHAT_OK}\n{{not json\n", ["data.path=FILE"], "chats.jsonl:2",
             "data.path"),
    "anchor-adapter": ("anchor-adapter.yaml", "items.jsonl",
                       '{"question": "1 + 2", "answer": 3}\n{"question": "2 + 2", "answer": "four"}\n',
                       ["data.path=FILE"], "items.jsonl:2", "data.path"),
    "rlcracker": ("rlcracker.yaml", "texts.jsonl", '{"question": "q", "watermarked": "a text"}\n{"question": "q"}\n',
                  ["data.path=FILE"], "texts.jsonl:2", "data.path"),
    "sembind": ("sembind-encoder.yaml", "captions.csv", "file,caption\nmissing.png,a red truck\n",
                ["data.dataset=folder", "data.path=."], "captions.csv:2", "data.path"),
}
#: methods whose user data are image folders / arrays (no lines): the file and key are named, checked elsewhere
NOT_LINE_BASED = {"saliency-bias", "ltc", "mad"}


def test_every_method_has_a_case():
    assert set(CASES) | NOT_LINE_BASED == set(METHODS)


@pytest.mark.parametrize("method", sorted(CASES))
def test_bad_user_data_fail_before_the_run_directory(method, tmp_path, monkeypatch, capsys):
    recipe, name, text, overrides, where, key = CASES[method]
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(text)
    (tmp_path / "stops.csv").write_text("lon,lat\n-74.0,40.7\n")

    def opened(cfg):
        raise AssertionError(f"{method}: a run directory was opened before the data were checked")

    monkeypatch.setattr(run, "open_run_dir", opened)
    args = [a.replace("FILE", name) for a in overrides]
    code = main(["train", f"recipe={recipe}", f"overlay=tiny/{recipe}", *args, f"out_dir={tmp_path / 'runs'}"])
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    assert where in err and key in err, err[-2000:]
    assert "Traceback" not in err and not (tmp_path / "runs").exists()
