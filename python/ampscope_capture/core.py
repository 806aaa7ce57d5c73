# SPDX-License-Identifier: MIT
"""Plain PyTorch capture: `begin()` at the start of each step (the batch as the model receives
it, the RNG states), `check()` after backward (and after `scaler.unscale_`), before
`optimizer.step()`. At that point the weights, the optimizer state, GradScaler's state and the
LR scheduler's state are still those from before the failing step, so an incident costs
nothing to remember ahead of time: the bundle is written from the live state, right then."""
import math
import os
import warnings

import torch

from . import bundle

WHAT = ("loss", "grad", "grad_norm", "skip", "spike")


class IncidentError(RuntimeError):
    """Raised by check() after the bundle is written, when Capture(..., raise_on_incident=True)."""

    def __init__(self, message, path):
        super().__init__(message)
        self.path = path


def unwrap(module):
    """The module whose names the exported program uses: DDP/FSDP wrappers (.module) and
    torch.compile (._orig_mod) removed."""
    while True:
        if hasattr(module, "_orig_mod") and isinstance(module._orig_mod, torch.nn.Module):
            module = module._orig_mod
        elif type(module).__name__ in ("DistributedDataParallel", "DataParallel") and hasattr(module, "module"):
            module = module.module
        else:
            return module


def dtype_name(dtype):
    d = {torch.float16: "float16", torch.bfloat16: "bfloat16", "float16": "float16", "fp16": "float16", "bfloat16": "bfloat16",
         "bf16": "bfloat16"}.get(dtype)
    if d is None:
        raise ValueError(f"ampscope_capture: dtype {dtype!r}; expected torch.float16 or torch.bfloat16")
    return d


def found_inf(scaler, optimizer):
    """GradScaler's own found-inf of this step (a 0-d tensor, not read), or None when the
    scaler has not unscaled this optimizer's gradients yet."""
    state = getattr(scaler, "_per_optimizer_states", {}).get(id(optimizer))
    if not state or not state.get("found_inf_per_device"):
        return None
    flags = list(state["found_inf_per_device"].values())
    return sum(f.to(flags[0].device).reshape(()) for f in flags)


def _grads_by_device_dtype(params):
    groups = {}
    for p in params:
        g = p.grad
        if g is not None and hasattr(g, "to_local"):  # FSDP2's DTensor: this rank's own shard, no collective
            g = g.to_local()
        if g is not None and not g.is_sparse:
            groups.setdefault((g.device, g.dtype), []).append(g)
    return groups


def grads_screen(params):
    """The per-step screen: the foreach L2 norms of every gradient (one fused multi-tensor
    kernel per device and dtype, reading each gradient once, writing nothing), non-finite
    exactly when a gradient is NaN/Inf or a norm overflows float32. A 0-d tensor, not read.
    (Cheaper than the exact check below, which also writes every gradient: 3-5 ms against
    20-70 ms for 5.3 M parameters on a 2-core CPU.)"""
    flag = None
    for (device, _), grads in _grads_by_device_dtype(params).items():
        bad = (~torch.isfinite(torch.stack(torch._foreach_norm(grads, 2.0)))).any().to(torch.float32)
        flag = bad if flag is None else flag + bad.to(flag.device)
    return flag if flag is not None else torch.zeros(())


def grads_nonfinite(params):
    """The exact check, GradScaler's own (torch's foreach non-finite check with 1/scale = 1: the
    gradients are unchanged): True when a gradient holds NaN/Inf. Reads the flag."""
    found_any = False
    for (device, _), grads in _grads_by_device_dtype(params).items():
        found = torch.zeros(1, dtype=torch.float32, device=device)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.ones(1, dtype=torch.float32, device=device))
        found_any = found_any or bool(found.item() > 0)
    return found_any


class Capture:
    """Watches a plain PyTorch training loop and writes an incident bundle at the first
    non-finite loss, gradient or gradient norm (or loss spike). See docs/capture.md.

    model, optimizer, scaler (torch.amp.GradScaler or None), lr_scheduler: the job's own.
    out: the folder that receives bundles (incident-step<S>-rank<R>/).
    loss: how the replay computes the loss: "ce", "mse", "lm" or "model" (the model returns
      its own loss; the labels are among its inputs), or the job's own loss: a module or
      function loss(output, labels) (e.g. CrossEntropyLoss(label_smoothing=0.1, weight=w)),
      exported into the bundle's program with the model, so that the replay computes exactly
      the job's loss (the program takes the labels as its last input and returns the loss).
    dtype, device_type: the job's autocast (torch.float16 / torch.bfloat16; "cpu" / "cuda";
      device_type defaults to where the model's parameters are).
    keep_fp32: module-path globs the job runs outside autocast.
    clip_grad_norm, accumulation_steps: the job's settings, recorded for the replay.
    max_bundles: at most this many bundles in `out` (default 1).
    spike: a loss above spike x its running mean is an incident too (None: off).
    raise_on_incident: raise IncidentError after writing the bundle (default: the job goes on).
    """

    def __init__(self, model, optimizer, scaler=None, out="ampscope-incidents", loss="ce", dtype=torch.float16, device_type=None,
                 keep_fp32=(), clip_grad_norm=None, accumulation_steps=1, lr_scheduler=None, max_bundles=1, spike=None,
                 raise_on_incident=False, framework=None):
        self.loss_fn = loss if callable(loss) else None
        if self.loss_fn is None and loss not in ("ce", "mse", "lm", "model"):
            raise ValueError(f"ampscope_capture: loss {loss!r}; expected ce, mse, lm, model or the job's loss (a callable)")
        self.model, self.optimizer, self.scaler, self.lr_scheduler = model, optimizer, scaler, lr_scheduler
        self.out, self.loss_kind, self.dtype = os.fspath(out), ("model" if self.loss_fn else loss), dtype_name(dtype)
        self.device_type = device_type
        self.keep_fp32, self.clip_grad_norm = list(keep_fp32), clip_grad_norm
        self.accumulation_steps, self.max_bundles = int(accumulation_steps), int(max_bundles)
        self.spike, self.raise_on_incident = spike, raise_on_incident
        self.framework = framework or {"name": "pytorch", "version": torch.__version__}
        self.step = -1  # the step begin() was last called for (0-based, as the framework counts)
        self.bundles = []  # paths written
        self.in_incident = False  # the last step checked had an incident (a streak is one incident)
        self._batch = self._rng = None
        self._loss_mean, self._loss_count = 0.0, 0
        self._checked = False
        self._scale_before = self._scaler_override = None
        self._ddp_flags, self._ddp_watched, self.all_ranks = [], False, False
        self._local, self._global_bad, self._in_global = {}, False, False
        self._fsdp, self._make_plain, self._full, self._global_incidents = None, None, None, 0

    # -- the per-step calls -------------------------------------------------------------------
    def begin(self, inputs=None, labels=None, targets=None, step=None):
        """At the start of a step: the batch exactly as the model receives it (a tensor, a
        tuple of positional inputs or a dict of keyword inputs; references, not copies) and the
        RNG states (small copies). `step`: the framework's step counter (default: counts calls)."""
        self.step = self.step + 1 if step is None else int(step)
        self._batch = (inputs, labels, targets)
        self._rng = self._rng_now()
        self._checked = False
        sc = self.scaler
        if self._scaler_enabled() and sc._scale is not None:  # device copies, not read: for end()
            self._scale_before = (sc._scale.clone(), sc._growth_tracker.clone())

    def set_batch(self, inputs, labels=None, targets=None):
        """The step's batch, where it is known only after begin() (references, not copies)."""
        self._batch = (inputs, labels, targets)

    def check(self, loss=None, grad_norm=None):
        """After backward (and after scaler.unscale_(optimizer) where a GradScaler runs), before
        optimizer.step(): reads the loss, the gradients' finiteness (GradScaler's found-inf
        where it unscaled them, one fused check otherwise) and the gradient norm in one
        device-to-host read. Returns the bundle's path when this step wrote one, else None."""
        self._checked = True
        what, detail = self._detect(loss, grad_norm)
        origins = self._exchange(what)
        if origins is not None:
            self._global_incidents += 1
            if self._fsdp is not None and self._global_incidents <= self.max_bundles:
                self._full = self._gather_full()  # a collective: every rank takes part, whoever writes
            if what is None and self.all_ranks:  # this rank's shard and loss are finite; it writes anyway
                what, detail = "grad", f"non-finite gradients on rank(s) {', '.join(map(str, origins))} before the reduction"
        try:
            if what is None:
                self.in_incident = False
                return None
            first = not self.in_incident
            self.in_incident = True
            if not first or not self._room():
                return None
            if origins is not None and rank_env()["rank"] not in origins and not self.all_ranks:
                return None  # another rank's incident, spread to this one by the collective
            return self._capture(what, detail)
        finally:
            self._full = None

    # -- torchrun: which rank ---------------------------------------------------------------
    def watch_ddp(self, ddp_model, hook=None, state=None, all_ranks=False):
        """Under torchrun with DistributedDataParallel: registers a communication hook that
        checks this rank's own gradients before the all-reduce spreads a NaN to every rank
        (one isfinite per bucket, not read until check()), wrapping `hook` (default: DDP's
        all-reduce; pass the hook you would register yourself, with its `state`). At an
        incident the ranks exchange one small record, every rank's bundle names the ranks it
        started on (`origin_ranks`), and only those write a bundle (all_ranks=True: all)."""
        checked = checked_ddp_hook(self._ddp_flags, hook)
        try:
            ddp_model.register_comm_hook(state, checked)
        except RuntimeError as e:
            raise RuntimeError(f"ampscope_capture: DDP already has a communication hook ({e}); pass it to watch_ddp(model, "
                               "hook=..., state=...) instead of registering it, and capture wraps it") from e
        self._ddp_watched, self.all_ranks = True, all_ranks

    def adopt_ddp_flags(self, flags, all_ranks=False):
        """Where a framework registers the DDP hook itself (Lightning's ddp_comm_hook, wrapped
        by checked_ddp_hook(flags, ...) before it registers): the flags that hook appends."""
        self._ddp_flags, self._ddp_watched, self.all_ranks = flags, True, all_ranks

    def watch_fsdp(self, model, make_plain=None, all_ranks=False):
        """Under torchrun with FSDP2 (`fully_shard`): wraps each FSDP module's reduce-scatter
        (`set_custom_reduce_scatter`, composing with a custom one already set) with a check of
        this rank's own unsharded gradients before they are reduced (one isfinite per
        reduce-scatter, not read until check()). A reduce-scatter spreads a NaN only to the
        shards it lands in, so the ranks agree on an incident with one 1-element all-reduce
        per step (in check()), then exchange one small record as under watch_ddp. At an
        incident every rank takes part in gathering the full weights and optimizer state
        (torch.distributed.checkpoint.state_dict, full_state_dict) and only the ranks it started
        on write a bundle (all_ranks=True: all). `make_plain()`: returns an unsharded instance of
        the model (e.g. the constructor the job calls before fully_shard); the bundle's program
        is exported from it with the gathered weights. Without it the bundle says that a
        sharded module was not exported, and replay takes --model."""
        from torch.distributed.fsdp import FSDPModule
        from torch.distributed.fsdp._fully_shard._fsdp_api import ReduceScatter

        flags = self._ddp_flags

        class Checked(ReduceScatter):
            def __init__(self, inner):
                self.inner = inner

            def allocate(self, size, *, dtype, device):
                return self.inner.allocate(size, dtype=dtype, device=device)

            def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
                flags.append((~torch.isfinite(input_tensor)).any())
                return self.inner(output_tensor, input_tensor, group, op, async_op)

        wrapped = 0
        for m in model.modules():
            if not isinstance(m, FSDPModule):
                continue
            group = m._get_fsdp_state()._fsdp_param_group
            if group is None or isinstance(group._reduce_scatter_comm, Checked):
                continue
            m.set_custom_reduce_scatter(Checked(group._reduce_scatter_comm))
            wrapped += 1
        if wrapped == 0:
            raise ValueError("ampscope_capture: watch_fsdp found no fully_shard module with parameters in the model")
        self._fsdp, self._make_plain = model, make_plain
        self._ddp_watched, self.all_ranks = True, all_ranks

    def _agree(self, bad):
        """Under FSDP2: whether any rank saw something non-finite this step (an all-reduce of
        one number), so that every rank takes the incident step together."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
            return bad
        p = next(iter(self._fsdp.parameters()), None)
        dev = p.device if p is not None else torch.device("cpu")
        t = torch.tensor([1.0 if bad else 0.0], device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item() > 0)

    def _gather_full(self):
        """The full (unsharded) model and optimizer state on this rank, by parameter name."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_optimizer_state_dict

        opts = StateDictOptions(full_state_dict=True)
        model_sd = get_model_state_dict(self._fsdp, options=opts)
        osd = get_optimizer_state_dict(self._fsdp, self.optimizer, options=opts)
        return {"model": bundle.clone_state_dict(model_sd), "optimizer": bundle.optimizer_state_by_index(osd)}

    def _exchange(self, what):
        """At the first step whose all-reduced gradients are non-finite (the same on every
        rank, so every rank gets here on the same step): all-gather each rank's (rank, local
        loss non-finite, local gradients non-finite) and return the ranks it started on."""
        global_bad, first = self._global_bad, not self._in_global
        self._in_global = global_bad
        if not (self._ddp_watched and global_bad and first):
            return None
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
            return None
        mine = {"rank": dist.get_rank(), "step": int(self.step), **self._local}
        records = [None] * dist.get_world_size()
        dist.all_gather_object(records, mine)
        origins = [r["rank"] for r in records if r.get("loss") or r.get("grads")]
        self._records = records
        return origins or [r["rank"] for r in records]


    def end(self):
        """Optional, after scaler.update(): a step GradScaler skipped (its scale backed off)
        that check() did not see (check() was not called this step) is an incident of kind
        'skip'. Costs nothing when check() ran. Returns the bundle's path or None."""
        before = self._scale_before
        self._scale_before = None
        if self._checked or before is None or not self._scaler_enabled() or self.scaler._scale is None:
            return None
        if not bool(self.scaler._scale.to(before[0].device) < before[0]):
            self.in_incident = False
            return None
        first, self.in_incident = not self.in_incident, True
        if not first or not self._room():
            return None
        self._scaler_override = {"scale": float(before[0]), "_growth_tracker": int(before[1])}
        try:
            return self._capture("skip", "GradScaler skipped the step (its scale backed off in update())")
        finally:
            self._scaler_override = None

    # -- internals ----------------------------------------------------------------------------
    def _rng_now(self):
        dev = self._device_type()
        return bundle.rng_state(dev)

    def _device_type(self):
        if self.device_type:
            return self.device_type
        p = next(unwrap(self.model).parameters(), None)
        self.device_type = p.device.type if p is not None else "cpu"
        return self.device_type

    def _scaler_enabled(self):
        return self.scaler is not None and self.scaler.is_enabled()

    def _params(self):
        return [p for g in self.optimizer.param_groups for p in g["params"]]

    def _grad_flag(self, grad_norm):
        """(flag tensor or None, 'scaler' | 'norm' | 'screen'): GradScaler's found-inf where it
        unscaled the gradients; else the gradient norm the job computed (non-finite when a
        gradient is); else the foreach norm screen."""
        if self._scaler_enabled():
            f = found_inf(self.scaler, self.optimizer)
            if f is not None:
                return f, "scaler"
        if grad_norm is not None:
            return None, "norm"
        return grads_screen(self._params()), "screen"

    def _detect(self, loss, grad_norm):
        """One device-to-host read of [loss, grads flag, norm]; returns (what, detail) or
        (None, None). A non-finite norm or screen is told apart (non-finite gradients, or a
        norm of finite gradients that overflows) by the exact check, on that step only."""
        flag, source = self._grad_flag(grad_norm)
        local = torch.stack(self._ddp_flags).any() if self._ddp_flags else None
        self._ddp_flags.clear()
        parts = [torch.as_tensor(t).detach().reshape(-1)[:1] for t in (loss, flag, grad_norm, local) if t is not None]
        dev = parts[0].device if parts else torch.device("cpu")
        values = torch.cat([t.to(dev, torch.float32) for t in parts]).tolist() if parts else []
        lv = values.pop(0) if loss is not None else 0.0
        gf = values.pop(0) if flag is not None else 0.0
        nv = values.pop(0) if grad_norm is not None else 0.0
        lf = values.pop(0) if local is not None else 0.0
        self._global_bad = gf > 0 or (grad_norm is not None and not math.isfinite(nv))
        self._local = {"loss": loss is not None and not math.isfinite(lv), "grads": lf > 0}
        if self._fsdp is not None:  # a reduce-scatter spreads a NaN to some shards only: agree
            self._global_bad = self._agree(self._global_bad or self._local["loss"] or self._local["grads"])
        if loss is not None and not math.isfinite(lv):
            return "loss", f"the loss is {lv}"
        if gf > 0 and source == "scaler":
            return "grad", "non-finite gradients (GradScaler's found_inf after unscale); GradScaler skips this step"
        if gf > 0 or (grad_norm is not None and not math.isfinite(nv)):
            if grads_nonfinite(self._params()):
                skip = "; GradScaler skips this step" if self._scaler_enabled() else ""
                return "grad", f"non-finite gradients (foreach non-finite check){skip}"
            what = f"the gradient norm is {nv}" if grad_norm is not None else "a gradient's norm overflows float32"
            return "grad_norm", what + " (the gradients are finite)"
        if loss is not None and self.spike:
            mean, n = self._loss_mean, self._loss_count
            self._loss_count, self._loss_mean = n + 1, mean + (lv - mean) / (n + 1)
            if n >= 10 and lv > self.spike * mean:
                return "spike", f"the loss {lv} is above {self.spike} x its running mean {mean}"
        return None, None

    def _room(self):
        if len(self.bundles) >= self.max_bundles or bundle.count_bundles(self.out, rank_env()["rank"]) >= self.max_bundles:
            return False
        return True

    def _capture(self, what, detail):
        try:
            path = self._write(what, detail)
        except Exception as e:  # noqa: BLE001 - a capture that fails never ends the job
            warnings.warn(f"ampscope_capture: could not write the incident bundle: {type(e).__name__}: {e}")
            return None
        self.bundles.append(path)
        msg = f"ampscope_capture: {what} incident at step {self.step} (rank {rank_env()['rank']}): {detail}; bundle {path}"
        warnings.warn(msg)
        if self.raise_on_incident:
            raise IncidentError(msg, path)
        return path

    def _incident(self, what, detail):
        env = rank_env()
        return {"format": bundle.FORMAT, "version": bundle.VERSION, "step": int(self.step), **env,
                "framework": dict(self.framework, torch=torch.__version__), "detected": {"what": what, "detail": detail},
                "precision": {"dtype": self.dtype, "device_type": self._device_type(), "keep_fp32": self.keep_fp32},
                "loss": self.loss_kind, **self._loss_record(), "clip_grad_norm": bundle.finite_or_none(self.clip_grad_norm) if self.clip_grad_norm else None,
                "accumulation_steps": self.accumulation_steps, "optimizer": bundle.optimizer_record(self.optimizer),
                "scaler": bool(self._scaler_enabled()), **self._rank_record()}

    def _loss_record(self):
        if self.loss_fn is None:
            return {}
        fn = self.loss_fn
        name = type(fn).__qualname__ if isinstance(fn, torch.nn.Module) else getattr(fn, "__qualname__", type(fn).__qualname__)
        options = {k: v for k, v in vars(fn).items() if not k.startswith("_") and k != "training"
                   and (v is None or isinstance(v, (bool, int, float, str)))} if hasattr(fn, "__dict__") else {}
        if isinstance(fn, torch.nn.Module):
            options.update({k: list(b.shape) for k, b in fn.named_buffers()})  # e.g. class weights: their shapes
        return {"loss_source": {"callable": name, "repr": repr(fn)[:400], "options": options,
                                "how": "the job's own loss, exported into the program: its last input is the labels, its output the loss"}}

    def _rank_record(self):
        """Under watch_ddp: this rank's own view before the all-reduce, and every rank's."""
        records = getattr(self, "_records", None)
        if not self._ddp_watched:
            return {}
        out = {"local": dict(self._local)}
        if records:
            out["origin_ranks"] = [r["rank"] for r in records if r.get("loss") or r.get("grads")]
            out["ranks"] = records
        return out

    def _checkpoint(self, module):
        if self._full is not None:  # FSDP2: gathered by every rank in check()
            ckpt = dict(self._full, rng_state=self._rng if self._rng is not None else self._rng_now())
        else:
            names = {id(p): n for n, p in module.named_parameters()}
            ckpt = {"model": bundle.clone_state_dict(module.state_dict()), "optimizer": bundle.optimizer_state(self.optimizer, names),
                    "rng_state": self._rng if self._rng is not None else self._rng_now()}
        if self._scaler_enabled():
            ckpt["scaler"] = dict(self.scaler.state_dict(), **(self._scaler_override or {}))
        if self.lr_scheduler is not None:
            ckpt["lr_scheduler"] = self.lr_scheduler.state_dict()
        return ckpt

    def _plain_module(self, weights):
        """The module to export: the live one; under FSDP2 an unsharded copy from make_plain()
        holding the gathered weights, or why there is none."""
        if self._fsdp is None:
            return unwrap(self.model)
        if self._make_plain is None:
            return "the model is sharded by FSDP2 (fully_shard) and watch_fsdp(make_plain=...) was not given: not exported"
        plain_module = self._make_plain()
        plain_module.load_state_dict(weights)
        return plain_module

    def _write(self, what, detail):
        module = unwrap(self.model)
        inputs, labels, targets = self._batch if self._batch is not None else (None, None, None)
        ckpt = self._checkpoint(module)  # before export: nothing has changed the weights yet
        batch, export = {}, None
        if inputs is not None:
            args, kwargs, tensors = bundle.input_order(module, inputs)
            plain_module = self._plain_module(ckpt["model"])
            if self.loss_fn is not None and not isinstance(plain_module, str):
                if labels is None:
                    raise ValueError("the job's loss needs the labels: begin(inputs, labels=...)")
                plain_module = bundle.WithLoss(plain_module, self.loss_fn)
                args, kwargs = (args + (labels,), kwargs) if not kwargs else (args, dict(kwargs, loss_labels=labels))
                tensors, labels = tensors + [labels], None  # the labels are the program's last input
            batch["inputs"] = tensors
            if isinstance(plain_module, str):
                export = lambda path: plain_module  # noqa: E731 - why it was not exported
            else:
                export = lambda path: bundle.export_program(plain_module, args, kwargs, path)  # noqa: E731
        if labels is not None:
            batch["labels"] = labels
        if targets is not None:
            batch["targets"] = targets
        name = f"incident-step{self.step}-rank{rank_env()['rank']}"
        return bundle.write(self.out, name, self._incident(what, detail), ckpt, batch, export)


def checked_ddp_hook(flags, hook=None):
    """A DDP communication hook that appends whether this rank's own bucket holds NaN/Inf (one
    isfinite per bucket, not read) to `flags`, then runs `hook` (default: DDP's all-reduce)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    inner = hook or default_hooks.allreduce_hook

    def checked(state, bucket):
        flags.append((~torch.isfinite(bucket.buffer())).any())
        return inner(state, bucket)

    return checked


def is_ddp(module):
    return type(module).__name__ == "DistributedDataParallel" and hasattr(module, "register_comm_hook")


def is_fsdp2(module):
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return False
    return any(isinstance(m, FSDPModule) for m in module.modules())


def rank_env():
    """rank, local_rank and world_size from torchrun's environment (0, 0, 1 without it)."""
    env = os.environ
    return {"rank": int(env.get("RANK", 0)), "local_rank": int(env.get("LOCAL_RANK", 0)), "world_size": int(env.get("WORLD_SIZE", 1))}
