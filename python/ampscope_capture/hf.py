# SPDX-License-Identifier: MIT
"""Hugging Face transformers 5.x: `CaptureCallback`, a TrainerCallback that writes an incident
bundle at the first non-finite loss or gradient. Imports transformers.

Trainer callbacks receive neither the batch nor the loss: a forward pre-hook (with kwargs) on
the model keeps the last training forward's keyword inputs (input_ids, attention_mask, labels,
num_items_in_batch, ...), a forward hook its output's `loss` (local, before any reduction;
`logging_nan_inf_filter` only hides NaN losses from the logs). The check runs in
on_pre_optimizer_step, after the Trainer clipped (and so unscaled) the gradients: GradScaler's
own found-inf under fp16 (the scaler is the accelerated optimizer's, keyed by the inner
optimizer), one fused non-finite check under bf16 (no scaler).

Under torchrun the Trainer wraps the model in DistributedDataParallel (accelerate): the callback
finds the wrapped model at on_train_begin and watches each rank's own gradients before the
all-reduce (Capture.watch_ddp), so the bundle names the rank(s) the incident started on and only
those write one. Where accelerate registered a communication hook already
(DistributedDataParallelKwargs(comm_hook=...)), DDP takes no second one: the callback says so and
every rank writes its own bundle without telling where the incident started. Under FSDP2 the
reduce-scatters are watched (Capture.watch_fsdp) and the program is exported from
`type(model)(model.config)` holding the gathered weights."""
import inspect
import warnings

import torch
import transformers

from .core import Capture, is_ddp, is_fsdp2, unwrap


def calling_trainer():
    """The Trainer whose callback handler called us (callbacks are not handed the Trainer; the
    DDP-wrapped model is only its `model_wrapped`): found in the calling frames, or None."""
    frame = inspect.currentframe()
    try:
        for _ in range(12):
            frame = frame.f_back if frame is not None else None
            if frame is None:
                return None
            candidate = frame.f_locals.get("self")
            if isinstance(candidate, transformers.Trainer):
                return candidate
        return None
    finally:
        del frame


class CaptureCallback(transformers.TrainerCallback):
    """Capture for a transformers Trainer: `Trainer(..., callbacks=[CaptureCallback(out=DIR)])`.
    out, keep_fp32, max_bundles, spike, raise_on_incident: as for ampscope_capture.Capture.
    loss: 'model' (default: the model computes its loss from the labels among its inputs)."""

    def __init__(self, out="ampscope-incidents", loss="model", keep_fp32=(), max_bundles=1, spike=None, raise_on_incident=False,
                 all_ranks=False):
        self.options = dict(out=out, loss=loss, keep_fp32=keep_fp32, max_bundles=max_bundles, spike=spike,
                            raise_on_incident=raise_on_incident)
        self.all_ranks = all_ranks
        self.capture = None
        self._handles = []
        self._inputs = self._loss = None

    @property
    def bundles(self):
        return self.capture.bundles if self.capture else []

    # -- hooks on the model ---------------------------------------------------------------
    def _pre_hook(self, module, args, kwargs):
        if module.training:
            self._inputs = (args, kwargs)

    def _post_hook(self, module, args, kwargs, output):
        if module.training:
            loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
            self._loss = loss if isinstance(loss, torch.Tensor) else None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        module = unwrap(model)
        self._handles = [module.register_forward_pre_hook(self._pre_hook, with_kwargs=True),
                         module.register_forward_hook(self._post_hook, with_kwargs=True)]
        trainer = calling_trainer()
        wrapped = getattr(trainer, "model_wrapped", None)
        if trainer is None or wrapped is None or args.world_size < 2:
            return
        if self.capture is None:
            self.capture = self._make(args, model, trainer.optimizer, trainer.lr_scheduler)
        try:
            if is_ddp(wrapped):
                self.capture.watch_ddp(wrapped, all_ranks=self.all_ranks)
            elif is_fsdp2(wrapped):
                plain = unwrap(wrapped)
                config = getattr(plain, "config", None)
                make = (lambda: type(plain)(config)) if config is not None else None  # noqa: E731
                self.capture.watch_fsdp(wrapped, make_plain=make, all_ranks=self.all_ranks)
        except (RuntimeError, ValueError) as e:
            warnings.warn(f"{e}; each rank writes its own bundle without telling where the incident started")

    def on_train_end(self, args, state, control, **kwargs):
        for h in self._handles:
            h.remove()
        self._handles = []

    # -- the step -------------------------------------------------------------------------
    def _make(self, args, model, optimizer, lr_scheduler):
        inner = getattr(optimizer, "optimizer", optimizer)  # accelerate's AcceleratedOptimizer
        scaler = getattr(optimizer, "scaler", None)
        dtype = torch.bfloat16 if args.bf16 else torch.float16
        return Capture(model, inner, scaler=scaler, dtype=dtype, device_type=args.device.type,
                       clip_grad_norm=args.max_grad_norm if args.max_grad_norm and args.max_grad_norm > 0 else None,
                       accumulation_steps=args.gradient_accumulation_steps, lr_scheduler=lr_scheduler,
                       framework={"name": "transformers", "version": transformers.__version__}, **self.options)

    def on_step_begin(self, args, state, control, model=None, optimizer=None, lr_scheduler=None, **kwargs):
        if self.capture is None:
            self.capture = self._make(args, model, optimizer, lr_scheduler)
        self.capture.begin(None, step=state.global_step)
        self._inputs = self._loss = None

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if self.capture is None:
            return
        if self._inputs is not None:
            pos, kw = self._inputs
            self.capture.set_batch(dict(kw) if not pos else pos)
        loss, self._loss, self._inputs = self._loss, None, None
        self.capture.check(loss)

    def on_step_end(self, args, state, control, **kwargs):
        if self.capture is not None:
            self.capture.end()
