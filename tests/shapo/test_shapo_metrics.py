"""ShaPO's table metrics on hand-worked cases: tie-aware preference accuracy and the harmful-completion rates."""

from types import SimpleNamespace

import pytest
import torch

from zoo.methods.shapo.metrics import preference_accuracy
from zoo.methods.shapo.module import ShaPOModule


def test_preference_accuracy_counts_zero_margins_as_ties():
    margin = torch.tensor([0.3, -0.1, 0.0, 0.0, 2.0])
    torch.testing.assert_close(preference_accuracy(margin), torch.tensor([1.0, 0.0, 0.5, 0.5, 1.0]))
    assert float(preference_accuracy(margin).mean()) == pytest.approx(3 / 5)
    # the starting policy is its own reference: every margin is 0 and it scores chance, not 0
    assert float(preference_accuracy(torch.zeros(7)).mean()) == 0.5


class FixedCost(torch.nn.Module):
    """A cost model whose cost is +1 when a sequence starts with token 5 and -1 otherwise (threshold 0)."""

    threshold = 0.0

    def __init__(self):
        super().__init__()
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def score(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.where(ids[:, 0] == 5, 1.0, -1.0)


def test_generation_metrics_harmful_rates_and_zero_kl_by_hand():
    torch.manual_seed(0)
    module = ShaPOModule(arch="zoo-lm-tiny", variant="dpo", max_new_tokens=3, gen_batch_size=2)
    module.setup("fit")  # the frozen reference is a copy of the policy
    module._frozen["cost"] = FixedCost()
    prompts = [("redteam", [5, 6]), ("redteam", [5, 7]), ("redteam", [8, 6]), ("heldout", [8, 9]), ("heldout", [5, 5])]
    # a tokenizer whose every reply reads as a refusal: the keyword judge then marks all of them
    tokenizer = SimpleNamespace(pad_token_id=0, eos_token_id=1, decode=lambda ids, skip_special_tokens: "I cannot.")
    out = module.generation_metrics(prompts, tokenizer)
    # harmful = cost > 0 = the prompt starts with 5: red-team 2 of 3, held-out 1 of 2, all 3 of 5; mean cost 1/5
    assert float(out["harmful_rate"]) == pytest.approx(3 / 5)
    assert float(out["harmful_rate_redteam"]) == pytest.approx(2 / 3)
    assert float(out["harmful_rate_heldout"]) == pytest.approx(1 / 2)
    assert float(out["cost"]) == pytest.approx(1 / 5)
    assert float(out["kl_ref"]) == pytest.approx(0.0, abs=1e-6)  # policy == reference
    assert float(out["refusal_rate"]) == float(out["refusal_rate_redteam"]) == float(out["refusal_rate_heldout"]) == 1
    # greedy replies are judged too (same prompts, so the same verdicts under this prompt-only cost)
    assert float(out["harmful_rate_greedy"]) == pytest.approx(3 / 5)
    assert float(out["kl_ref_greedy"]) == pytest.approx(0.0, abs=1e-6)
    module.hparams.greedy_eval = False
    assert "harmful_rate_greedy" not in module.generation_metrics(prompts, tokenizer)


def test_stage_a_on_another_model_ranks_that_models_neurons(tmp_path):
    """model.stage_a_model: probe and ranking read the named weights (here a saved random model), not the policy."""
    import json

    import lightning as L
    from safetensors.torch import save_file

    from zoo.data.preference import PreferenceDataModule

    torch.manual_seed(0)
    other = ShaPOModule(arch="zoo-lm-tiny", variant="dpo", eval_generation=False)
    path = tmp_path / "other.safetensors"
    save_file({k: v.contiguous() for k, v in other.state_dict().items() if k.startswith("policy.")}, str(path))
    rows = [
        {"prompt": f"\n\nHuman: q {i}?\n\nAssistant:", "chosen": f"no {i}", "rejected": f"yes {i} sure"}
        for i in range(8)
    ]
    p = tmp_path / "pairs.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    masks = []
    for source in (None, str(path)):
        torch.manual_seed(1)
        m = ShaPOModule(
            arch="zoo-lm-tiny",
            variant="token",
            probe_pairs=8,
            eval_generation=False,
            stage_a_model=source,
            probe_percentage=5.0,
        )
        dm = PreferenceDataModule(path=str(p), val_path=str(p), batch_size=4, max_length=32, redteam_path=None)
        dm.trainer = L.Trainer(accelerator="cpu", logger=False)
        dm.setup("fit")
        m.compute_masks(dm.clean_train_dataloader())
        masks.append(m.neuron_masks.clone())
    from zoo.methods.shapo.subspace import down_projections, rank_neurons

    expected = rank_neurons(down_projections(other.policy), m.probe_direction, 5.0, "negative")
    assert torch.equal(masks[1], expected) and not torch.equal(masks[0], masks[1])
