# SPDX-License-Identifier: MIT
"""PyTorch Lightning 2.x: `CaptureCallback`, a Callback that writes an incident bundle at the
first non-finite loss or gradient (or skipped step). Imports `pytorch_lightning`, or
`lightning.pytorch` where only the unified package is installed.

The batch and the RNG states come from on_train_batch_start, the loss from on_before_backward
(Lightning hands the callback the loss already multiplied by GradScaler's scale: finite
exactly when the loss is), the gradients' check from on_before_optimizer_step (after
Lightning's unscale: GradScaler's own found-inf), the scaler from the precision plugin. The
exported program is the LightningModule itself (its forward, with the batch's inputs), or the
submodule named by `module`.

Under torchrun with Lightning's DDP strategy the callback watches each rank's own gradients
before the all-reduce (Capture.watch_ddp; a `ddp_comm_hook` given to DDPStrategy is wrapped
before Lightning registers it), so the bundle names the rank(s) the incident started on and
only those write one. Under FSDP2 (ModelParallelStrategy, fully_shard in configure_model) it
watches the reduce-scatters (Capture.watch_fsdp; `make_plain` builds an unsharded model for
the program)."""
import torch

from .core import Capture, checked_ddp_hook, is_ddp, is_fsdp2

try:
    import pytorch_lightning as pl
except ImportError:  # the unified package
    import lightning.pytorch as pl


def default_split(batch):
    """(inputs, labels) from a batch: (x, y) or [x, y] -> x, y; a dict -> its 'labels' or
    'label' or 'y' entry as labels, the rest as keyword inputs; a tensor -> inputs only."""
    if isinstance(batch, (tuple, list)) and len(batch) == 2:
        return batch[0], batch[1]
    if isinstance(batch, dict):
        for key in ("labels", "label", "y"):
            if key in batch:
                return {k: v for k, v in batch.items() if k != key}, batch[key]
        return batch, None
    return batch, None


class CaptureCallback(pl.Callback):
    """Capture for a Lightning Trainer. out, loss, keep_fp32, max_bundles, spike,
    raise_on_incident: as for ampscope_capture.Capture. split(batch) -> (inputs, labels): how
    the batch feeds the module's forward (default_split). module: the attribute path of the
    submodule training_step calls (default: the LightningModule's own forward)."""

    def __init__(self, out="ampscope-incidents", loss="ce", keep_fp32=(), max_bundles=1, spike=None, raise_on_incident=False,
                 split=default_split, module=None, targets=False, all_ranks=False, make_plain=None):
        super().__init__()
        self.options = dict(out=out, loss=loss, keep_fp32=keep_fp32, max_bundles=max_bundles, spike=spike,
                            raise_on_incident=raise_on_incident)
        self.split, self.module_path, self.targets = split, module, targets
        self.all_ranks, self.make_plain = all_ranks, make_plain
        self.capture = None
        self._loss = None
        self._ddp_flags, self._hook_wrapped = [], False

    def setup(self, trainer, pl_module, stage):
        """Before the strategy wraps the model: a DDP communication hook the user gave the
        strategy is wrapped with the per-rank check, so that Lightning registers both."""
        strategy = trainer.strategy
        hook = getattr(strategy, "_ddp_comm_hook", None)
        if stage == "fit" and hook is not None and not self._hook_wrapped:
            strategy._ddp_comm_hook = checked_ddp_hook(self._ddp_flags, hook)
            self._hook_wrapped = True

    def _watch(self, trainer, capture):
        model = trainer.strategy.model
        if model is not None and is_ddp(model):
            if self._hook_wrapped and trainer.strategy.root_device.type == "cuda":  # Lightning registered the wrapped hook
                capture.adopt_ddp_flags(self._ddp_flags, all_ranks=self.all_ranks)
            else:  # Lightning registers hooks on CUDA only: none is registered here
                capture.watch_ddp(model, hook=getattr(trainer.strategy, "_ddp_comm_hook", None) if not self._hook_wrapped else None,
                                  state=getattr(trainer.strategy, "_ddp_comm_state", None), all_ranks=self.all_ranks)
        elif model is not None and trainer.world_size > 1 and is_fsdp2(model):
            capture.watch_fsdp(model, make_plain=self.make_plain, all_ranks=self.all_ranks)

    @property
    def bundles(self):
        return self.capture.bundles if self.capture else []

    def _make(self, trainer, pl_module, optimizer):
        plugin = trainer.precision_plugin
        scaler = getattr(plugin, "scaler", None)
        precision = str(getattr(plugin, "precision", trainer.precision))
        dtype = torch.bfloat16 if precision.startswith("bf16") else torch.float16
        device_type = getattr(plugin, "device", None) or pl_module.device.type
        module = pl_module
        for part in (self.module_path.split(".") if self.module_path else []):
            module = getattr(module, part)
        clip = trainer.gradient_clip_val if (trainer.gradient_clip_algorithm or "norm") == "norm" else None
        schedulers = [c.scheduler for c in trainer.lr_scheduler_configs] if trainer.lr_scheduler_configs else []
        return Capture(module, optimizer, scaler=scaler, dtype=dtype, device_type=str(device_type), clip_grad_norm=clip or None,
                       accumulation_steps=trainer.accumulate_grad_batches, lr_scheduler=schedulers[0] if schedulers else None,
                       framework={"name": "lightning", "version": pl.__version__}, **self.options)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.capture is None:
            opts = trainer.optimizers
            if len(opts) != 1:  # several optimizers: manual optimization, not this callback's case
                return
            self.capture = self._make(trainer, pl_module, opts[0])
            self._watch(trainer, self.capture)
        inputs, labels = self.split(batch)
        if self.targets:
            self.capture.begin(inputs, targets=labels, step=trainer.global_step)
        else:
            self.capture.begin(inputs, labels=labels, step=trainer.global_step)
        self._loss = None

    def on_before_backward(self, trainer, pl_module, loss):
        self._loss = loss  # a reference: read once, in on_before_optimizer_step

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        if self.capture is not None:
            loss, self._loss = self._loss, None
            scaler = self.capture.scaler
            if loss is not None and scaler is not None and scaler.is_enabled() and scaler._scale is not None:
                loss = loss.detach() / scaler._scale.to(loss.device)  # the loss itself (spike thresholds)
            self.capture.check(loss)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.capture is not None:
            self.capture.end()
