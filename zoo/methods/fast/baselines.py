"""The independent block-training baseline: sae-lens' own ``LanguageModelSAETrainingRunner`` (its activation store,
mixing buffer and trainer) on the same BT(P) blocks our ``bt_pretrain`` pipeline harvests."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch


def export_hf(lm_ref: str, out_dir: str | Path) -> Path:
    """Write the LM and tokenizer as a Hugging Face directory (what the sae-lens runner loads)."""
    from zoo.models.causal_lm import load_causal_lm

    model, tok = load_causal_lm(lm_ref)
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return Path(out_dir)


def runner_config(
    model_dir: str | Path,
    layer: int,
    d_in: int,
    d_sae: int,
    training_tokens: int,
    batch_size: int,
    l1_coefficient: float,
    lr: float,
    lr_end: float,
    buffer_tokens: int,
    block_size: int,
    seed: int,
    work_dir: str | Path,
):
    """A ``LanguageModelSAERunnerConfig`` matching our Standard recipe: same layer, width, λ, LR schedule fractions,
    batch, buffer size (``n_batches_in_buffer · context_size``), normalisation to mean norm ``sqrt(d_in)``."""
    from sae_lens import LanguageModelSAERunnerConfig, LoggingConfig, StandardTrainingSAEConfig

    steps = training_tokens // batch_size
    return LanguageModelSAERunnerConfig(
        sae=StandardTrainingSAEConfig(
            d_in=d_in,
            d_sae=d_sae,
            l1_coefficient=l1_coefficient,
            l1_warm_up_steps=round(0.03 * steps),
            apply_b_dec_to_input=False,
            decoder_init_norm=1.0,
            normalize_activations="expected_average_only_in",
        ),
        model_name=str(model_dir),
        model_class_name="AutoModelForCausalLM",
        hook_name=f"model.layers.{layer}",
        dataset_path="unused-local",
        is_dataset_tokenized=True,
        streaming=False,
        context_size=block_size,
        prepend_bos=False,
        training_tokens=training_tokens,
        train_batch_size_tokens=batch_size,
        store_batch_size_prompts=16,
        n_batches_in_buffer=max(2, buffer_tokens // block_size),
        n_batches_for_norm_estimate=10,
        lr=lr,
        lr_end=lr_end,
        lr_scheduler_name="cosineannealing",
        lr_warm_up_steps=round(0.05 * steps),
        lr_decay_steps=round(0.2 * steps),
        seed=seed,
        device="cpu",
        n_eval_batches=1,
        logger=LoggingConfig(log_to_wandb=False),
        checkpoint_path=str(Path(work_dir) / "ckpt"),
        output_path=str(Path(work_dir) / "out"),
        verbose=False,
    )


def train_runner(
    blocks: torch.Tensor,
    lm_ref: str = "zoo-lm.chat",
    layer: int = 2,
    expansion: int = 8,
    training_tokens: int = 200_000,
    batch_size: int = 1024,
    l1_coefficient: float = 5.0,
    lr: float = 1e-3,
    lr_end: float = 1e-4,
    buffer_tokens: int = 16_384,
    seed: int = 0,
):
    """Train a Standard SAE with sae-lens' runner on ``blocks`` (``LongTensor[n, block]`` token ids).

    Returns:
        The trained sae-lens SAE (its normalisation folded in: it works on raw activations).
    """
    from datasets import Dataset
    from sae_lens import LanguageModelSAETrainingRunner

    work = Path(tempfile.mkdtemp(prefix="fast-saelens-"))
    model_dir = export_hf(lm_ref, work / "lm")
    from transformers import AutoConfig

    d_in = AutoConfig.from_pretrained(model_dir).hidden_size
    cfg = runner_config(
        model_dir,
        layer,
        d_in,
        expansion * d_in,
        training_tokens,
        batch_size,
        l1_coefficient,
        lr,
        lr_end,
        buffer_tokens,
        blocks.shape[1],
        seed,
        work,
    )
    data = Dataset.from_dict({"input_ids": blocks.tolist()})
    return LanguageModelSAETrainingRunner(cfg, override_dataset=data).run()
