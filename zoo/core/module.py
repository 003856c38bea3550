"""``ZooModule``: the LightningModule contract every method implements (see docs/adding-a-method.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import lightning as L


class ZooModule(L.LightningModule):
    """Base class of every method's LightningModule.

    Class attributes:
        method_name: set by ``@register_method``.
        head_keys: state-dict key prefixes that ``init_from`` may drop when their shapes differ
            (a classifier whose number of classes changed). Any other mismatch is an error.
        export_formats: which of ``package``, ``hf``, ``onnx``, ``torch_export`` the method supports.
        weight_settings: ``{name: dotted recipe path}`` of the settings the weights only make sense with (canvas
            layout, LM architecture, K neighbours...). ``init_from`` compares them by name with the source package's
            (``zoo.core.build.reconcile_settings``): a recipe value of ``None`` adopts the package's (logged), a
            different value fails naming both.
        trainer_rules: trainer settings the method refuses, checked before a run directory exists (recorded in its
            table): ``{"when": {"variant": ["token"]}, "max_processes": 1, "why": "..."}`` (at most that many
            processes, devices x nodes) or ``{"when": {...}, "refused_strategies": ["fsdp", "deepspeed"], "why": ...}``
            (a strategy name, and its ``_``-suffixed variants such as ``deepspeed_stage_2``); ``when`` lists model
            argument values the rule applies under (empty: always).
        model_rules: model arguments a setting needs, checked with the recipe, before torch is imported (recorded in
            the table): ``{"when": {"variant": ["reward"]}, "requires": ["cost_model"], "why": "..."}`` refuses a
            recipe where ``when`` holds and a ``requires`` argument is empty (None or ""), naming ``model.<arg>``.
        fit_sized_buffers: names of buffers whose shape is only known after fit (a stored Rashomon set, a
            background sample, stop placements): loading takes the saved shape instead of refusing a reshape, and
            the loader (``zoo.core.hub.check_fit``) checks only that they are present.
    """

    method_name: ClassVar[str] = ""
    head_keys: ClassVar[tuple[str, ...]] = ()
    export_formats: ClassVar[tuple[str, ...]] = ("package",)
    weight_settings: ClassVar[dict[str, str]] = {}
    fit_sized_buffers: ClassVar[tuple[str, ...]] = ()
    arg_schemas: ClassVar[dict[str, dict]] = {}  # nested dict arguments' keys -> type specs (see zoo.core.schema)
    trainer_rules: ClassVar[tuple[dict, ...]] = ()  # trainer settings a method refuses (see zoo.core.schema)
    model_rules: ClassVar[tuple[dict, ...]] = ()  # model arguments a setting needs (see zoo.core.preflight)
    init_from_ref: str | None = None  # set by ``zoo.core.build.build_module`` after loading ``init_from`` weights

    def log(self, name: str, value, *args, **kwargs) -> None:
        """``LightningModule.log`` with ``sync_dist=True`` unless the method says otherwise: under DDP the logged value
        is the mean over ranks, not rank 0's own (a no-op on one process)."""
        kwargs.setdefault("sync_dist", True)
        super().log(name, value, *args, **kwargs)

    @property
    def resuming(self) -> bool:
        """True during a fit that continues a checkpoint (``resume=auto``, ``trainer.fit(ckpt_path=...)``), from
        ``on_fit_start`` on. Lightning restores the weights before ``on_fit_start`` but the step counter only after it
        (``global_step`` still reads 0 there), so a module that initialises state at fit start (a data-derived scale,
        a bias set from a data sample) asks this, not ``global_step``, whether the checkpoint already holds it."""
        return self._trainer is not None and self.trainer.ckpt_path is not None

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in self.fit_sized_buffers:  # shapes known only after fit: take the saved ones
            if prefix + name in state_dict:
                setattr(self, name, state_dict[prefix + name].new_empty(state_dict[prefix + name].shape))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @classmethod
    def sizes_from_state(cls, state: dict[str, Any]) -> dict[str, Any]:
        """Constructor arguments read off a state dict's shapes (data-derived sizes such as a node count), used to
        size the networks before weights arrive when the saved hparams leave them ``None`` (default: none)."""
        return {}

    def example_input(self) -> tuple:
        """Inputs for ONNX / torch.export, each batched along dim 0 with a batch of at least 2 (a batch of 1 would be
        traced as a constant); ``self(*self.example_input())`` must run."""
        raise TypeError(f"{type(self).__name__} defines no example_input(); it cannot be exported as a graph")

    def export_graph(self) -> tuple:
        """``(network, example inputs, dynamic shapes)`` that ``onnx`` / ``torch_export`` write: by default the module
        itself and :meth:`example_input`, dim 0 of every input a dynamic batch (the graph takes any batch size). A
        method whose deployable part is not ``forward`` (a scorer, the detector head) returns that part, e.g.
        ``(zoo.core.export.Bound(self, "score"), inputs)``; the optional third element gives ``torch.export``
        dynamic shapes, one entry per input (``{0: Dim("batch"), 1: Dim("seq")}``)."""
        from torch.export import Dim

        inputs = tuple(self.example_input())
        batch = {0: Dim("batch", min=1, max=65536)}
        return self, inputs, tuple(batch for _ in inputs)

    def export_graphs(self) -> dict[str, tuple]:
        """``{file stem: export_graph()-like tuple}`` written by ``onnx`` / ``torch_export`` (default: ``model``
        only); a method adds graphs here (the LM's ``model_kv``: one decoding step with a KV cache)."""
        return {"model": self.export_graph()}

    def remap_init_state(
        self, state: dict[str, Any], source_method: str, source_cfg: dict | None = None
    ) -> dict[str, Any]:
        """Map a state dict saved by ``source_method`` (with its resolved recipe ``source_cfg`` when known) onto this
        module's keys (default: unchanged). Return only what the source provides: keys left out are reported missing
        by the loader (and refused unless they are head keys)."""
        return state

    def artifact_dir(self, folder: str = "") -> Path:
        """``<run>/<folder>/`` (the run directory itself for ``""``): where a fit writes its tables and plots, in the
        run directory whatever ``logger.kind`` (``logs/`` holds the logger's files only)."""
        return Path(self.trainer.default_root_dir) / folder

    #: What :meth:`predict_record` returns, in :func:`zoo.core.prediction.check`'s notation (a registry-driven test
    #: holds every method to its own); the default is the default record's: :meth:`predict_cli`'s text.
    predict_schema: ClassVar[Any] = str

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """What ``zoo predict <id> INPUTS...`` prints: a method defines this, or :meth:`predict_record` and renders
        its records here."""
        raise TypeError(f"method {self.method_name!r} has no predict_cli(); `zoo predict` is not available for it")

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> Any:
        """The prediction as data, matching :attr:`predict_schema` (rows as dicts, per-input replies, scores; never a
        table inside a string): what ``zoo predict --json`` reports under ``prediction``. Default: :meth:`predict_cli`'s
        text, for a method whose output is one piece of prose."""
        return self.predict_cli(inputs, out_dir)

    def predict_metrics(self, inputs: list[str], prediction: Any) -> dict[str, float]:
        """Metrics ``zoo predict --json`` adds when ``inputs`` carry their labels (``prediction``: what
        :meth:`predict_record` returned for them); empty (the default) when they carry none."""
        return {}

    def predict_json(self, inputs: list[str], out_dir: str | None = None) -> dict:
        """What ``zoo predict --json`` reports beside the reference and inputs: ``{"prediction": record, "metrics":
        {...}}`` from :meth:`predict_record` and :meth:`predict_metrics`, ``metrics`` only when the inputs carry
        labels."""
        record = self.predict_record(inputs, out_dir)
        metrics = self.predict_metrics(inputs, record)
        return {"prediction": record, **({"metrics": metrics} if metrics else {})}

    def evaluate(self, datamodule) -> dict[str, float] | None:
        """Metrics ``zoo eval`` writes to ``metrics.json`` for these weights on ``datamodule`` (set up by the caller's
        trainer-less build). Default ``None``: ``zoo eval`` runs ``trainer.validate`` (and ``trainer.test`` where the
        method has a ``test_step``) and takes the logged metrics; a method whose measurement is not a validation
        loop (an enumeration, a placement audit, a generation benchmark) returns its own ``{name: float}``."""
        return None

    def export_hf(self, out_dir: str) -> None:
        """Write a transformers directory at ``out_dir`` (``AutoModelForCausalLM.from_pretrained(out_dir)`` loads it;
        merge LoRA adapters first): the ``hf`` export format, which a method lists in :attr:`export_formats` only
        when it overrides this."""
        raise TypeError(f"method {self.method_name!r} has no export_hf(); it cannot export the 'hf' format")

    def package_extras(self) -> dict[str, str]:
        """Extra files (name in the package -> local path) copied into a release package."""
        return {}
