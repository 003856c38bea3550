"""A corpus of malformed inputs for every method, the recipe and data-file kind (issue #40), each refused before a
run directory exists with exit 2 and a message naming the key, or the file and line. The recipe cases run the
validator in-process (``zoo train`` stops there, before torch); the data-file cases go as far as the data check that
precedes the run directory. The CLI's own behaviour (no traceback, torch not imported) is checked in
test_malformed.py and test_constraints.py."""

import json
import os

import numpy as np
import pytest
from PIL import Image

from zoo.cli import main
from zoo.methods import METHODS

# (recipe, override tokens, the start of the message after "error: ", and the did-you-mean it ends with or None)
RECIPE_CASES = [
    ("survshap-iq", ["model.sigma=-0.1"], "model.sigma: must be > 0, got -0.1"),
    ("survshap-iq", ["model.explain.index=k-SIIX"], "model.explain.index: expected one of", "(did you mean 'k-SII'?)"),
    ("survshap-iq", ["model.model=deepsurf"], "model.model: expected one of", "(did you mean 'deepsurv'?)"),
    ("survshap-iq", ["data.val_fraction=1.0"], "data.val_fraction: must be in [0, 1), got 1.0"),
    ("saliency-bias", ["model.img_size=-32"], "model.img_size: must be >= 1, got -32"),
    ("saliency-bias", ["model.family=[]"], "model.family: needs at least 1 item, got []"),
    ("saliency-bias", ["model.methods=[gradcam]"], "model.methods[0]: expected one of", "(did you mean 'grad_cam'?)"),
    ("saliency-bias", ["data.background=blurry"], "data.background: expected one of", "(did you mean 'blur'?)"),
    ("mad", ["model.detector.draws=0"], "model.detector.draws: must be >= 1, got 0"),
    (
        "mad",
        ["model.detector.detectors=[clcc]"],
        "model.detector.detectors[0]: expected one of",
        "(did you mean 'clc'?)",
    ),
    ("mad", ["model.detector.sgld.lr=0"], "model.detector.sgld.lr: must be > 0, got 0"),
    ("mad", ["data.attack=badnet"], "data.attack: expected null or one of", "(did you mean 'badnets'?)"),
    ("ltc", ["data.rate=1.5"], "data.rate: must be in [0, 1], got 1.5"),
    (
        "ltc",
        ["+model.clip.vision_layerz=2"],
        "model.clip.vision_layerz: model.clip takes no argument 'vision_layerz'",
        "(did you mean 'vision_layers'?)",
    ),
    (
        "ltc",
        ["model.clip.vision_layerz=2"],
        "model.clip.vision_layerz: model.clip takes no argument 'vision_layerz'",
        "(did you mean 'vision_layers'?)",
    ),
    ("ltc", ["model.prompts=waterbird"], "model.prompts: expected one of", "(did you mean 'waterbirds'?)"),
    ("pooled-reps", ["model.spaces=[]"], "model.spaces: needs at least 1 item, got []"),
    ("pooled-reps", ["model.top_p=0"], "model.top_p: must be in (0, 1], got 0"),
    ("pooled-reps", ["data.sources=[alpaca]"], "data.sources[0]: expected one of", "(did you mean 'alpaca-seen'?)"),
    ("crh", ["data.concepts=0"], "data.concepts: must be >= 1, got 0"),
    ("crh", ["model.layers=[]"], "model.layers: needs at least 1 item, got []"),
    ("crh", ["model.hook_site=inputs"], "model.hook_site: expected one of", "(did you mean 'input'?)"),
    ("anchor-adapter", ["model.epsilon=-0.2"], "model.epsilon: must be > 0, got -0.2"),
    ("anchor-adapter", ["model.group_size=1"], "model.group_size: must be >= 2, got 1"),
    ("anchor-adapter", ["model.reward=randm"], "model.reward: expected one of", "(did you mean 'random'?)"),
    ("anchor-adapter", ["data.worked_share=1.2"], "data.worked_share: must be in [0, 1], got 1.2"),
    ("rlcracker", ["model.tau=2.0"], "model.tau: must be in [-1, 1], got 2.0"),
    ("rlcracker", ["model.watermark=kgv"], "model.watermark: expected one of", "(did you mean 'kgw'?)"),
    ("rlcracker", ["data.batch_size=0"], "data.batch_size: must be >= 1, got 0"),
    ("sembind", ["model.masker.net.n_bits=0"], "model.masker.net.n_bits: must be >= 1, got 0"),
    (
        "sembind",
        ["model.evaluation.schemes=[tree-rin]"],
        "model.evaluation.schemes[0]: expected one of",
        "(did you mean 'tree-ring'?)",
    ),
    ("sembind", ["model.evaluation.fpr=1.0"], "model.evaluation.fpr: must be in (0, 1), got 1.0"),
    ("sembind", ["data.split=providers"], "data.split: expected one of", "(did you mean 'provider'?)"),
    ("sf-consolidation", ["model.num_beakers=0"], "model.num_beakers: must be >= 1, got 0"),
    ("sf-consolidation", ["model.gamma=1.5"], "model.gamma: must be in [0, 1), got 1.5"),
    (
        "sf-consolidation",
        ["model.consolidation=multiple"],
        "model.consolidation: expected one of",
        "(did you mean 'multi'?)",
    ),
    ("sf-consolidation", ["data.env=fourroom"], "data.env: expected one of", "(did you mean 'fourrooms'?)"),
    ("pulse", ["model.replay.alpha=-0.1"], "model.replay.alpha: must be in (0, 1), got -0.1"),
    (
        "pulse",
        ["model.replay.search=exhaustive"],
        "model.replay.search: expected one of 'exact', 'greedy', got 'exhaustive'",
    ),
    ("pulse", ["data.val_fraction=-0.1"], "data.val_fraction: must be in [0, 1), got -0.1"),
    ("desi", ["model.hidden=[32,x]"], "model.hidden[1]: expected int, got 'x'"),
    ("desi", ["data.test_fraction=1.5"], "data.test_fraction: must be in (0, 1), got 1.5"),
    ("desi", ["model.kernel=gauss"], "model.kernel: expected one of", "(did you mean 'gaussian'?)"),
    ("fast-sae", ["model.expansion=-8"], "model.expansion: must be >= 1, got -8"),
    ("fast-sae", ["model.sae=jumprelux"], "model.sae: expected one of", "(did you mean 'jumprelu'?)"),
    ("fast-sae", ["data.pipeline=fst"], "data.pipeline: expected one of", "(did you mean 'fast'?)"),
    ("zoo-lm", ["data.batch_size=-4"], "data.batch_size: must be >= 1, got -4"),
    ("zoo-lm", ["data.mode=pretrian"], "data.mode: expected one of", "(did you mean 'pretrain'?)"),
    ("zoo-lm", ["model.prompt_format=chatml"], "model.prompt_format: expected one of", "(did you mean 'chat'?)"),
    ("cond-dp", ["model.epsilon=-1"], "model.epsilon: must be > 0, got -1"),
    ("cond-dp", ["model.delta=1.5"], "model.delta: must be in (0, 1), got 1.5"),
    (
        "cond-dp",
        ["trainer.devices=2"],
        "trainer.devices: cond-dp runs on one device (its Poisson DP loader and, for priv",
    ),
    ("cond-dp", ["data.label_mechanism=rr-bin"], "data.label_mechanism: expected one of", "(did you mean 'rr-bins'?)"),
    (
        "shapo",
        ["+trainer.strategy=fsdp"],
        "trainer.strategy: ShaPO's masked step supports single-device, DDP and FSDP2 (tra",
    ),
    ("shapo", ["model.loss=ipo2"], "model.loss: expected one of", "(did you mean 'ipo'?)"),
    ("shapo", ["data.flip_rate=1.5"], "data.flip_rate: must be in [0, 1], got 1.5"),
    ("shapo-cost-model", ["model.center_weight=-1"], "model.center_weight: must be >= 0, got -1"),
    ("shapo-cost-model", ["data.max_length=0"], "data.max_length: must be >= 1, got 0"),
    ("praxis", ["model.depth=-1"], "model.depth: must be >= 0, got -1"),
    ("praxis", ["data.val_fraction=1.0"], "data.val_fraction: must be in [0, 1), got 1.0"),
    ("st-tgexplainer", ["model.dropout=1.0"], "model.dropout: must be in [0, 1), got 1.0"),
    ("st-tgexplainer", ["data.val_ratio=0"], "data.val_ratio: must be in (0, 1), got 0"),
    ("trsp", ["model.k=1"], "model.k: must be >= 2, got 1"),
    ("trsp", ["model.algorithm=ecaa"], "model.algorithm: expected one of", "(did you mean 'eca'?)"),
    ("trsp", ["data.circuity=0.5"], "data.circuity: must be >= 1, got 0.5"),
    ("watchlog", ["model.stage=detection"], "model.stage: expected one of", "(did you mean 'detect'?)"),
    ("watchlog", ["+model.mask_ratio=1.0"], "model.mask_ratio: must be in (0, 1), got 1.0"),
    ("zoo-lm-chat", ["data.max_length=0"], "data.max_length: must be >= 1, got 0"),
]


def _case_id(case) -> str:
    return f"{case[0]}:{' '.join(case[1])}"[:80]


@pytest.mark.parametrize("case", RECIPE_CASES, ids=[_case_id(c) for c in RECIPE_CASES])
def test_malformed_recipe_is_refused(case, tmp_path, capsys):
    recipe, tokens, start, hint = (*case, None)[:4]
    code = main(["train", f"recipe={recipe}.yaml", *tokens, f"out_dir={tmp_path / 'runs'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert err[-1].startswith(f"error: {start}"), err
    assert hint is None or hint in err[-1], err
    assert not (tmp_path / "runs").exists()


def _image(path, w, h, mode="RGB"):
    Image.fromarray(np.full((h, w) + ((3,) if mode == "RGB" else ()), 100, dtype=np.uint8), mode).save(path)


def _binary(tmp_path, name: str, head: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(head + bytes(range(128, 256)) + os.urandom(64))
    return str(path)


def _text(tmp_path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text)
    return str(tmp_path / name)


def _folder(tmp_path, w: int, h: int, mode: str) -> str:
    for c in ("cat", "dog"):
        (tmp_path / "imgs" / c).mkdir(parents=True)
        for i in range(3):
            _image(tmp_path / "imgs" / c / f"{i}.png", 16, 16)
    _image(tmp_path / "imgs" / "dog" / "odd.png", w, h, mode)
    return str(tmp_path / "imgs")


def desi_binary_csv(t):
    f = _binary(t, "garbage.csv", b"x1,y_1\n")
    return ["data.path=" + f, "data.space=composition"], f"{f}:2: not UTF-8 text (byte 0x80 at column 1)"


def survshap_binary_csv(t):
    f = _binary(t, "garbage.csv", b"time,event,x\n")
    return ["data.path=" + f], f"{f}:2: not UTF-8 text (byte 0x80 at column 1)"


def cond_dp_duplicate_header(t):
    f = _text(t, "dup.csv", "x1,x2,x2,y\n1,2,3,4\n")
    return (
        ["data.path=" + f, "data.label=y", "data.y_min=0", "data.y_max=10"],
        f"{f}:1: column 'x2' appears twice in the header (columns 2 and 3)",
    )


def praxis_duplicate_header(t):
    f = _text(t, "dup.csv", "a,a,y\n1,0,1\n")
    return ["data.path=" + f, "data.label=y"], f"{f}:1: column 'a' appears twice in the header (columns 1 and 2)"


def pooled_reps_binary_jsonl(t):
    f = _binary(t, "items.jsonl", b'{"prompt": "hi", "reference": "hello"}\n')
    return ["data.path=" + f, "data.sources=[user]"], f"{f}:2: not UTF-8 text (byte 0x80 at column 1)"


def zoo_lm_binary_chat(t):
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    f = _binary(t, "chat.jsonl", json.dumps({"messages": turns}).encode() + b"\n")
    return ["data.mode=chat", "data.path=" + f, "data.val_path=" + f], f"{f}:2: not UTF-8 text"


def saliency_elongated_image(t):
    f = _folder(t, 5, 900, "RGB")
    return (
        ["data.dataset=folder", "data.path=" + f, "data.size=16"],
        f"{f}/dog/odd.png: a 5x900 image (RGB); images need sides of at least 8 pixels",
    )


def saliency_tiny_grey_image(t):
    f = _folder(t, 3, 3, "L")
    return (
        ["data.dataset=folder", "data.path=" + f, "data.size=16"],
        f"{f}/dog/odd.png: a 3x3 image (L); images need sides of at least 8 pixels",
    )


# (recipe, the bad file's builder: tmp_path -> (override tokens, the start of the message after "error: "))
DATA_CASES = [
    ("desi", desi_binary_csv),
    ("survshap-iq", survshap_binary_csv),
    ("cond-dp", cond_dp_duplicate_header),
    ("praxis", praxis_duplicate_header),
    ("pooled-reps", pooled_reps_binary_jsonl),
    ("zoo-lm", zoo_lm_binary_chat),
    ("saliency-bias", saliency_elongated_image),
    ("saliency-bias", saliency_tiny_grey_image),
]


@pytest.mark.parametrize("recipe,build", DATA_CASES, ids=[b.__name__ for _, b in DATA_CASES])
def test_malformed_data_file_is_refused_before_the_run(recipe, build, tmp_path, capsys):
    tokens, start = build(tmp_path)
    code = main(
        ["train", f"recipe={recipe}.yaml", f"overlay=tiny/{recipe}.yaml", *tokens, f"out_dir={tmp_path / 'runs'}"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err[-5:]
    assert err[-1].startswith(f"error: {start}"), err[-5:]
    assert not (tmp_path / "runs").exists()


def test_corpus_covers_every_method_and_is_large_enough():
    from zoo.core.recipe import compose, recipes_dir

    methods = {compose(recipes_dir() / f"{r}.yaml")["method"] for r, *_ in RECIPE_CASES} | {
        compose(recipes_dir() / f"{r}.yaml")["method"] for r, _ in DATA_CASES
    }
    assert methods == set(METHODS), set(METHODS) - methods
    assert len(RECIPE_CASES) + len(DATA_CASES) >= 60


def test_devices_auto_is_counted_before_the_run_directory(monkeypatch):
    """``trainer.devices: auto`` passes the recipe check (the machine decides); on a machine with two visible GPUs the
    build-time check counts two processes and cond-dp refuses them, with the same one-line reason, on every rank."""
    import torch

    from zoo.core.preflight import check_processes
    from zoo.core.recipe import RecipeError, load_recipe, validate

    cfg = load_recipe("cond-dp.yaml", ["trainer.devices=auto", "trainer.accelerator=auto"])
    validate(cfg, check_files=False)
    check_processes(cfg)  # this machine: no GPU, one process
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(RecipeError, match=r"^trainer.devices: cond-dp runs on one device .* would start 2 processes"):
        check_processes(cfg)
