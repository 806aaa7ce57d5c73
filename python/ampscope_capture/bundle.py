# SPDX-License-Identifier: MIT
"""The incident bundle (format 1): a folder written atomically (a temporary folder renamed
into place) holding incident.json, checkpoint.pt, batch.pt and, when torch.export succeeds,
model.pt2. Nothing in it needs Python to read: JSON and torch.save of plain containers of
tensors, numbers and strings (no pickled classes). docs/capture.md describes every field."""
import contextlib
import datetime
import inspect
import json
import math
import os
import re
import shutil
import warnings

import torch

FORMAT = "ampscope-incident"
VERSION = 1
FILES = {"model": "model.pt2", "checkpoint": "checkpoint.pt", "batch": "batch.pt"}


def plain(value, dropped, where=""):
    """A copy of `value` made of tensors (on CPU), numbers, strings, None, lists and dicts with
    string or int keys; anything else is left out and named in `dropped`."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    if isinstance(value, (list, tuple)):  # tuples stay tuples (an optimizer's betas)
        items = [plain(v, dropped, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, (str, int)):
                dropped.append(f"{where}.{k!r}")
                continue
            if callable(v) and not isinstance(v, torch.Tensor):
                dropped.append(f"{where}.{k}")
                continue
            out[k] = plain(v, dropped, f"{where}.{k}")
        return out
    dropped.append(f"{where} ({type(value).__name__})")
    return None


def clone_state_dict(sd):
    """The module's state_dict on CPU, cloned now (ExportedProgram.state_dict and the optimizer
    share storage with the live parameters): tensors that share a storage and view (tied
    weights) stay one tensor, as torch.save writes them."""
    out, memo = {}, {}
    for k, v in sd.items():
        if not isinstance(v, torch.Tensor):
            out[k] = v
            continue
        key = (v.untyped_storage().data_ptr(), v.storage_offset(), tuple(v.shape), tuple(v.stride()), v.dtype, v.device)
        if key not in memo:
            memo[key] = v.detach().to("cpu", copy=True)
        out[k] = memo[key]
    return out


def optimizer_kind(opt):
    """sgd | adam | adamw | other: what the replay's optimizer is."""
    if isinstance(opt, torch.optim.AdamW):  # AdamW subclasses Adam: test it first
        return "adamw"
    if isinstance(opt, torch.optim.Adam):
        return "adam"
    if isinstance(opt, torch.optim.SGD):
        return "sgd"
    return "other"


def optimizer_record(opt):
    """incident.json's optimizer: class, kind and the flags found in its first param group."""
    rec = {"class": f"{type(opt).__module__}.{type(opt).__qualname__}", "kind": optimizer_kind(opt)}
    group = opt.param_groups[0] if opt.param_groups else {}
    for flag in ("fused", "foreach", "amsgrad", "maximize", "nesterov", "capturable", "differentiable"):
        if flag in group and (group[flag] is None or isinstance(group[flag], bool)):
            rec[flag] = group[flag]
    return rec


def optimizer_state(opt, param_names):
    """optimizer.state_dict() with every param group carrying `param_names`: the exported
    module's names, found by identity in its named_parameters() (where the optimizer was built
    without names, or with names of a wrapper, "module.fc1.weight" under DDP); a name the
    optimizer had is kept for a parameter the module does not hold."""
    sd = opt.state_dict()
    for live, saved in zip(opt.param_groups, sd["param_groups"]):
        had = list(saved.get("param_names") or [""] * len(live["params"]))
        saved["param_names"] = [param_names.get(id(p)) or had[i] for i, p in enumerate(live["params"])]
    return sd


def optimizer_state_by_index(osd):
    """A full optimizer state dict as torch.distributed.checkpoint gives it (state and each
    group's params keyed by parameter name) in optimizer.state_dict()'s own form: params as
    indices over the groups in order, each group carrying its `param_names`."""
    state, groups, index = {}, [], 0
    for g in osd.get("param_groups", []):
        names = list(g["params"])
        group = {k: v for k, v in g.items() if k != "params"}
        group["params"] = list(range(index, index + len(names)))
        group["param_names"] = names
        for i, name in zip(group["params"], names):
            if name in osd.get("state", {}):
                state[i] = {k: (v.detach().to("cpu", copy=True) if isinstance(v, torch.Tensor) else v)
                            for k, v in osd["state"][name].items()}
        index += len(names)
        groups.append(group)
    return {"state": state, "param_groups": groups}


def rng_state(device_type):
    """The generators' states: cpu, and cuda (one per device) where CUDA is in use."""
    rng = {"cpu": torch.get_rng_state()}
    if device_type == "cuda" and torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    return rng


def input_order(module, inputs):
    """The batch's inputs as the exported program takes them: positional inputs in order, or
    keyword inputs in the order of forward's signature (torch.export's order); tensors only
    (other values are constants of the program). Returns (args, kwargs, tensor list)."""
    if isinstance(inputs, torch.Tensor):
        return (inputs,), {}, [inputs]
    if isinstance(inputs, dict):
        try:
            forward = module.__dict__.get("_original_forward", module.forward)
            names = list(inspect.signature(forward).parameters)
        except (TypeError, ValueError):
            names = []
        ordered = [k for k in names if k in inputs] + [k for k in inputs if k not in names]
        kwargs = {k: inputs[k] for k in ordered}
        return (), kwargs, [v for v in kwargs.values() if isinstance(v, torch.Tensor)]
    args = tuple(inputs)
    return args, {}, [a for a in args if isinstance(a, torch.Tensor)]


@contextlib.contextmanager
def original_forward(module):
    """The module's own forward while exporting: accelerate (the Trainer's fp16/bf16) replaces
    the instance's forward with one under autocast that casts the outputs to float32; exported,
    that autocast would be baked into the program (a wrap_with_autocast node), and the replay's
    FP32 reference would not be FP32."""
    patched = module.__dict__.get("forward")
    original = module.__dict__.get("_original_forward")
    if patched is None or original is None:
        yield
        return
    module.forward = original
    try:
        yield
    finally:
        module.forward = patched


class WithLoss(torch.nn.Module):
    """The model and the job's own loss as one program: forward(*inputs, labels) (or
    forward(**inputs, loss_labels=labels)) returns loss(model(...), labels). It shares the
    model's submodules, parameters and buffers under the same names (not a wrapper's
    "model." prefix), so the optimizer state's parameter names are the program's."""

    def __init__(self, module, loss):
        super().__init__()
        self.__dict__["_inner"], self.__dict__["_loss"] = module, loss
        self._modules, self._parameters, self._buffers = module._modules, module._parameters, module._buffers
        self.training = module.training

    def forward(self, *args, loss_labels=None, **kwargs):
        if loss_labels is None:
            *args, loss_labels = args
        return self._loss(self._inner(*args, **kwargs), loss_labels)


def export_program(module, args, kwargs, path):
    """torch.export of the module in train mode with the captured batch, saved to `path`;
    returns None or why export failed."""
    was_training = module.training
    inner = module.__dict__.get("_inner")
    try:
        module.train()
        if inner is not None:
            inner.train()
        with torch.autocast("cuda", enabled=False), torch.autocast("cpu", enabled=False), original_forward(module):
            ep = torch.export.export(module, args, kwargs)
        torch.export.save(ep, path)
        return None
    except Exception as e:  # noqa: BLE001 - any failure of export is reported in the bundle
        msg = f"{type(e).__name__}: {e}"
        return msg if len(msg) <= 4000 else msg[:4000] + " ..."
    finally:
        module.train(was_training)
        if inner is not None:
            inner.train(was_training)


def unique_dir(root, name):
    path, n = os.path.join(root, name), 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(root, f"{name}-{n}")
    return path


def count_bundles(root, rank):
    """Bundles of this rank already in `root` (from this job or an earlier run of it); the
    other ranks of a torchrun job share the folder and count their own."""
    if not os.path.isdir(root):
        return 0
    mine = re.compile(rf"incident-step\d+-rank{int(rank)}(-\d+)?$")
    return sum(1 for e in os.listdir(root) if mine.match(e) and os.path.isfile(os.path.join(root, e, "incident.json")))


def finite_or_none(x):
    return float(x) if x is not None and math.isfinite(float(x)) else None


def write(root, name, incident, checkpoint, batch, export=None):
    """Writes the bundle folder atomically; returns its path. `export(path)` writes model.pt2
    and returns None or why export failed."""
    os.makedirs(root, exist_ok=True)
    tmp = os.path.join(root, f".{name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        dropped = []
        torch.save(plain(checkpoint, dropped, "checkpoint"), os.path.join(tmp, FILES["checkpoint"]))
        torch.save(plain(batch, dropped, "batch"), os.path.join(tmp, FILES["batch"]))
        error = export(os.path.join(tmp, FILES["model"])) if export else "no module to export"
        incident = dict(incident)
        incident["files"] = dict(FILES, model=None if error else FILES["model"])
        incident["export_error"] = error
        if dropped:
            incident["dropped"] = dropped
            warnings.warn("ampscope_capture: left out of the bundle (not plain data): " + ", ".join(dropped))
        incident["created_at"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        with open(os.path.join(tmp, "incident.json"), "w") as f:
            json.dump(incident, f, indent=2, allow_nan=False)
            f.write("\n")
        final = unique_dir(root, name)
        os.rename(tmp, final)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
