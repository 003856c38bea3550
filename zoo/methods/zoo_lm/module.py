"""The ``zoo-lm`` method: causal-LM pre-training and chat SFT of a transformers causal LM."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, ClassVar

import torch
from torchmetrics.aggregation import SumMetric

from zoo.core.constraints import OneOf
from zoo.core.module import ZooModule
from zoo.core.optim import build_optimizer
from zoo.core.registry import register_method
from zoo.methods.zoo_lm.datamodule import LMDataModule
from zoo.methods.zoo_lm.losses import causal_lm_nll
from zoo.models.causal_lm import (
    build_causal_lm,
    drop_tied_aliases,
    enable_checkpointing,
    fill_tied_aliases,
    load_tokenizer,
    tied_aliases,
    tokenizer_for,
    wrap_lora,
)

PROMPT_FORMATS = ("chat", "text")
GENERATION_DEFAULTS = {
    "max_new_tokens": 160,
    "do_sample": True,
    "temperature": 0.7,
    "top_k": 50,
    "top_p": 0.95,
    "repetition_penalty": 1.1,
    "seed": 0,
}
#: ``model.generation`` keys, settable as overrides (``zoo predict zoo-lm.chat model.generation.greedy=true ...``);
#: ``greedy: true`` or ``temperature: 0`` decode greedily (``do_sample`` off, the sampling filters dropped).
GENERATION_SCHEMA = {
    "max_new_tokens": {"types": ["int"], "min": 1},
    "do_sample": {"types": ["bool"]},
    "greedy": {"types": ["bool"]},
    "temperature": {"types": ["float"], "min": 0.0},
    "top_k": {"types": ["int"], "min": 0},
    "top_p": {"types": ["float"], "min": 0.0},
    "repetition_penalty": {"types": ["float"], "min": 0.0, "min_exclusive": True},
    "seed": {"types": ["int"]},
}


@register_method("zoo-lm", datamodule=LMDataModule)
class ZooLM(ZooModule):
    """A transformers causal LM (``self.lm``) trained with next-token cross-entropy, in full or through LoRA adapters.

    Args:
        arch: a preset of :data:`zoo.models.causal_lm.ARCHS` (``zoo-lm-small``, ``zoo-lm-tiny``), a base id
            (``smollm2-135m-instruct``), a local Hugging Face model directory (a user's Llama / Qwen) or a Hub name
            (:func:`zoo.models.causal_lm.pretrained_source`).
        tokenizer: tokenizer directory; ``None`` means the model's own for a pretrained ``arch``, else the shipped
            zoo-lm BPE tokenizer.
        optimizer: ``zoo.core.optim.build_optimizer`` dict; weight decay applies to matrices only (not to norms).
        prompt_format: how ``predict_cli``/``generate`` wrap a prompt: ``chat`` (the chat template with a
            generation prompt) or ``text`` (plain continuation after ``<bos>``, for a pre-trained base model).
        generation: overrides of :data:`GENERATION_DEFAULTS` (transformers ``generate`` kwargs plus ``seed``).
        gradient_checkpointing: recompute activations in the backward pass (large local models).
        lora: ``{r, alpha, dropout, target_modules}`` (:func:`zoo.models.causal_lm.wrap_lora`): train LoRA adapters
            only, the base frozen; ``None`` or ``r: 0`` trains every weight. A package of a LoRA run over a base id
            stores the adapters only (the base's tensors are named in ``base.yaml``, :mod:`zoo.core.delta`).

    Raises:
        ValueError: unknown ``prompt_format``, or a tokenizer with more tokens than the model's embedding.
    """

    export_formats = ("package", "hf", "onnx")
    head_keys = ("lm.*lora_*",)  # full weights into a LoRA model: the adapters start fresh
    arg_schemas: ClassVar[dict[str, dict]] = {"generation": GENERATION_SCHEMA}
    weight_settings: ClassVar[dict[str, str]] = {"lm.arch": "model.arch", "lm.tokenizer": "model.tokenizer"}

    def __init__(
        self,
        arch: str = "zoo-lm-small",
        tokenizer: str | None = None,
        optimizer: dict | None = None,
        prompt_format: Annotated[str, OneOf(PROMPT_FORMATS)] = "chat",
        generation: dict | None = None,
        gradient_checkpointing: bool = False,
        lora: dict | None = None,
    ):
        super().__init__()
        self.save_hyperparameters()
        if prompt_format not in PROMPT_FORMATS:
            raise ValueError(f"model.prompt_format: {prompt_format!r} is not one of {PROMPT_FORMATS}")
        self.lm = build_causal_lm(arch).train()  # from_pretrained returns eval mode; Lightning trains what it gets
        self.tokenizer = load_tokenizer(tokenizer_for(arch, tokenizer))
        if len(self.tokenizer) > self.lm.config.vocab_size:
            raise ValueError(
                f"model.tokenizer has {len(self.tokenizer)} tokens but model.arch {arch!r} embeds only "
                f"{self.lm.config.vocab_size}"
            )
        if gradient_checkpointing:
            enable_checkpointing(self.lm)
        if self.uses_lora:
            self.lm = wrap_lora(self.lm, lora)
        self.val_nll, self.val_tokens = SumMetric(), SumMetric()
        self._step_start: float | None = None
        self._tied = tied_aliases(self.lm, "lm.")
        self.register_state_dict_post_hook(drop_tied_aliases)
        self.register_load_state_dict_pre_hook(fill_tied_aliases)

    @property
    def uses_lora(self) -> bool:
        """Whether ``self.lm`` is a peft LoRA model (``model.lora`` given with r > 0)."""
        return bool(self.hparams.lora) and int(self.hparams.lora.get("r", 8)) > 0

    def remap_init_state(self, state: dict, source_method: str, source_cfg: dict | None = None) -> dict:
        """``init_from`` weights: a Hugging Face directory's keys (``source_method == "hf"``) gain the ``lm.``
        prefix; tied aliases (``lm.lm_head.weight``) are dropped, the load pre-hook restores them."""
        if source_method == "hf":
            state = {f"lm.{k}": v for k, v in state.items()}
        return {k: v for k, v in state.items() if k not in self._tied}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Next-token logits ``[B, T, V]`` for ``input_ids [B, T]`` (``attention_mask [B, T]``, 1 = real token)."""
        return self.lm(input_ids=input_ids, attention_mask=attention_mask).logits

    def export_graph(self) -> tuple:
        """``forward(input_ids, attention_mask) -> logits`` for ONNX, any batch size and length (the full sequence;
        :meth:`export_graphs` adds the KV-cache step)."""
        from zoo.models.causal_lm import export_batch

        args, dynamic = export_batch(self.tokenizer)
        return self, args, dynamic

    def export_graphs(self) -> dict[str, tuple]:
        """``model``: the full forward; ``model_kv``: one decoding step with a KV cache (:mod:`.onnx_cache`)."""
        from zoo.methods.zoo_lm.onnx_cache import cached_step_graph

        return {"model": self.export_graph(), "model_kv": cached_step_graph(self.lm)}

    def _nll(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return causal_lm_nll(self(batch["input_ids"], batch["attention_mask"]), batch["labels"])

    def on_train_batch_start(self, batch, batch_idx: int) -> None:
        self._step_start = time.perf_counter()

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        """Mean next-token NLL over the supervised tokens of the batch (logged as ``train/loss``)."""
        nll, n = self._nll(batch)
        loss = nll / n.clamp(min=1)
        self.log("train/loss", loss, prog_bar=True, batch_size=int(n))
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx: int) -> None:
        """Log ``train/tokens_per_s``: input tokens (non-padding) of this process's batch per second of
        forward + backward + optimiser step (data loading excluded)."""
        if self._step_start is not None:
            seconds = time.perf_counter() - self._step_start
            self.log("train/tokens_per_s", batch["attention_mask"].sum().item() / max(seconds, 1e-9), batch_size=1)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        nll, n = self._nll(batch)
        self.val_nll.update(nll.detach().double())
        self.val_tokens.update(n.double())

    def on_validation_epoch_end(self) -> None:
        """Log token-weighted ``val/loss`` (nats per token) and ``val/ppl = exp(val/loss)`` over all ranks."""
        n = self.val_tokens.compute()
        if n > 0:
            loss = self.val_nll.compute() / n
            self.log("val/loss", loss.float(), sync_dist=False)
            self.log("val/ppl", torch.exp(loss).float(), sync_dist=False)
        self.val_nll.reset()
        self.val_tokens.reset()

    def configure_model(self) -> None:
        """Under ``trainer.strategy=fsdp2``: shard ``self.lm`` with FSDP2, each decoder layer its own unit (all-gathered
        just before it runs) and the LM the root (:func:`zoo.models.sharding.shard_causal_lm`), so a model larger than
        one device trains; plain or LoRA-wrapped. Other strategies leave the model alone.

        Raises:
            RecipeError: a tensor-parallel dimension larger than 1.
        """
        from zoo.models.sharding import data_parallel_mesh, is_sharded, shard_causal_lm

        if self._device_mesh is None or is_sharded(self.lm):
            return
        shard_causal_lm(self.lm, data_parallel_mesh(self._device_mesh, "zoo-lm"))

    def configure_optimizers(self):
        decay = [p for p in self.lm.parameters() if p.requires_grad and p.dim() >= 2]
        no_decay = [p for p in self.lm.parameters() if p.requires_grad and p.dim() < 2]
        groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]
        return build_optimizer(groups, self.hparams.optimizer, total_steps=self.trainer.estimated_stepping_batches)

    def prompt_ids(self, prompt: str) -> list[int]:
        """Token ids that start a reply to ``prompt`` (chat template + generation prompt, or ``<bos>`` + text); the
        prompt's own text is encoded with special-token parsing off (:mod:`zoo.models.chat`)."""
        from zoo.models.chat import encode_rendered, encode_text

        if self.hparams.prompt_format == "chat":
            return encode_rendered(self.tokenizer, [{"role": "user", "content": prompt}], add_generation_prompt=True)[1]
        bos = [self.tokenizer.bos_token_id] if self.tokenizer.bos_token_id is not None else []
        return bos + encode_text(self.tokenizer, prompt)

    @torch.no_grad()
    def generate(self, prompts: list[str], **overrides) -> list[str]:
        """Sample a continuation of each prompt (one at a time, so no left padding is needed).

        Args:
            prompts: user messages (``chat``) or text beginnings (``text``).
            **overrides: replace entries of ``GENERATION_DEFAULTS`` / ``model.generation``.

        Returns:
            The generated text of each prompt, without the prompt and special tokens. Sampling is seeded with
            ``seed`` (restored afterwards), so the same call returns the same text.
        """
        cfg = {**GENERATION_DEFAULTS, **(self.hparams.generation or {}), **overrides}
        seed = cfg.pop("seed")
        if cfg.pop("greedy", False) or cfg.get("temperature") == 0:
            cfg = {k: v for k, v in cfg.items() if k not in ("temperature", "top_k", "top_p")}
            cfg["do_sample"] = False
        was_training = self.lm.training
        self.lm.eval()
        outs = []
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for prompt in prompts:
                ids = torch.tensor([self.prompt_ids(prompt)], device=self.device)
                gen = self.lm.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    eos_token_id=self.tokenizer.eos_token_id,
                    pad_token_id=self.tokenizer.pad_token_id,
                    **cfg,
                )
                outs.append(self.tokenizer.decode(gen[0, ids.shape[1] :], skip_special_tokens=True).strip())
        self.lm.train(was_training)
        return outs

    predict_schema: ClassVar = [{"prompt": str, "reply": str}]

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> list[dict]:
        """``zoo predict zoo-lm.chat "How do I bake bread?"``: the reply to the joined arguments (sampled as
        ``model.generation`` says); a chat ``.jsonl`` file as the one input: one reply per conversation's first user
        turn. Each ``{"prompt", "reply"}``."""
        if not inputs:
            raise ValueError('zoo predict zoo-lm: give a prompt, e.g. "How do I bake bread?"')
        from zoo.methods.zoo_lm.predict import labelled_chats

        chats = labelled_chats(inputs)
        prompts = [prompt for prompt, _ in chats] if chats is not None else [" ".join(inputs)]
        return [{"prompt": p, "reply": r} for p, r in zip(prompts, self.generate(prompts))]

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """The replies of :meth:`predict_record`, blank-line separated."""
        return "\n\n".join(r["reply"] for r in self.predict_record(inputs, out_dir))

    def predict_metrics(self, inputs: list[str], prediction: list[dict]) -> dict[str, float]:
        """With a chat ``.jsonl`` input (its assistant replies are the labels): the references' per-token NLL and
        perplexity under the model and the exact-match rate of the generated replies (:mod:`.predict`)."""
        from zoo.methods.zoo_lm.predict import labelled_chats, reference_metrics

        chats = labelled_chats(inputs)
        return reference_metrics(self, chats, [r["reply"] for r in prediction]) if chats else {}

    def export_hf(self, out_dir: str) -> None:
        """Write a plain Hugging Face directory: ``save_pretrained`` weights (safetensors) + config + generation
        config + tokenizer, loadable with ``AutoModelForCausalLM`` / ``AutoTokenizer.from_pretrained(out_dir)``.
        LoRA adapters are merged first (``merge_and_unload`` on a copy: ``W + (alpha / r) B A``)."""
        import copy

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        tok = self.tokenizer
        lm = copy.deepcopy(self.lm).merge_and_unload() if self.uses_lora else self.lm
        gen = lm.generation_config
        gen.bos_token_id, gen.eos_token_id, gen.pad_token_id = tok.bos_token_id, tok.eos_token_id, tok.pad_token_id
        lm.save_pretrained(out)
        tok.save_pretrained(out)
