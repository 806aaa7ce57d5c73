# SPDX-License-Identifier: MIT
"""Shared by the capture tests: read a bundle back, check its format, replay it with
ampscope-cli, and Python's own origin of a forward incident."""
import json
import math
import os
import subprocess
import tempfile

import pytest
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def cli():
    """ampscope-cli: $AMPSCOPE_CLI (CTest sets it), else the dev build's."""
    path = os.environ.get("AMPSCOPE_CLI") or os.path.join(ROOT, "build-dev", "app", "ampscope-cli")
    if not os.path.exists(path):
        pytest.fail(f"ampscope-cli not found at {path}: build it (cmake --build --preset dev --target ampscope-cli) or set AMPSCOPE_CLI")
    return path


def replay(*args):
    """ampscope-cli replay ARGS --json; returns (rc, replay JSON or stderr)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "replay.json")
        env = dict(os.environ, AMPSCOPE_DB=os.environ.get("AMPSCOPE_DB", os.path.join(d, "db.sqlite")))
        p = subprocess.run([cli(), "replay", *map(str, args), "--json", out, "-q", "--no-db"], capture_output=True, text=True,
                           timeout=300, stdin=subprocess.DEVNULL, env=env)
        if p.returncode not in (0, 1):
            return p.returncode, p.stderr
        with open(out) as f:
            return p.returncode, json.load(f)


def replay_bundle(bundle, *extra):
    """`ampscope-cli replay BUNDLE` alone (every setting from incident.json)."""
    return replay(bundle, "--device", "cpu", *extra)


def same_replay(alone, by_hand):
    """What `replay BUNDLE` found equals the replay given the bundle's files by hand."""
    assert alone["first_nonfinite"] == by_hand["first_nonfinite"]
    for a, b in zip(alone["steps"], by_hand["steps"]):
        for k in ("loss_ref", "loss_amp", "scale", "skipped", "scale_after"):
            assert a[k] == b[k], k
        assert [p["sha256_ref"] for p in a["params"]] == [p["sha256_ref"] for p in b["params"]]


def replay_files(bundle, *extra):
    """Today's replay of a bundle, every setting given by hand from incident.json."""
    inc = read(bundle)
    prec = {"float16": "fp16", "bfloat16": "bf16"}[inc["precision"]["dtype"]]
    args = ["--model", os.path.join(bundle, inc["files"]["model"]), "--checkpoint", os.path.join(bundle, inc["files"]["checkpoint"]),
            "--batch", os.path.join(bundle, inc["files"]["batch"]), "--loss", inc["loss"], "--precision", prec, "--device", "cpu"]
    for g in inc["precision"]["keep_fp32"]:
        args += ["--keep-fp32", g]
    return replay(*args, *extra)


def read(bundle):
    with open(os.path.join(bundle, "incident.json")) as f:
        return json.load(f)


def as_float(v):
    if isinstance(v, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[v]
    return float(v)


def check_format(bundle, *, what, step, framework, dtype, loss, scaler, kind):
    """The bundle's files and incident.json's fields (docs/capture.md)."""
    inc = read(bundle)
    assert inc["format"] == "ampscope-incident" and inc["version"] == 1
    assert (inc["step"], inc["rank"], inc["local_rank"], inc["world_size"]) == (step, 0, 0, 1)
    assert inc["framework"]["name"] == framework and inc["framework"]["torch"] == torch.__version__
    assert inc["detected"]["what"] == what, inc["detected"]
    assert inc["precision"]["dtype"] == dtype and inc["precision"]["device_type"] == "cpu"
    assert (inc["loss"], inc["scaler"], inc["optimizer"]["kind"]) == (loss, scaler, kind)
    assert inc["export_error"] is None and inc["files"] == {"model": "model.pt2", "checkpoint": "checkpoint.pt", "batch": "batch.pt"}
    for f in inc["files"].values():
        assert os.path.isfile(os.path.join(bundle, f)), f
    assert not [e for e in os.listdir(os.path.dirname(bundle)) if e.startswith(".")], "no temporary folder left behind"
    ckpt = torch.load(os.path.join(bundle, "checkpoint.pt"), weights_only=True)  # plain data only
    batch = torch.load(os.path.join(bundle, "batch.pt"), weights_only=True)
    assert ("scaler" in ckpt) == scaler
    assert isinstance(ckpt["rng_state"]["cpu"], torch.Tensor)
    return inc, ckpt, batch


def group_names(ckpt):
    return [g["param_names"] for g in ckpt["optimizer"]["param_groups"]]


def same_tensors(a, b):
    """Two state dicts (or nested optimizer states) bitwise equal."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_tensors(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_tensors(x, y) for x, y in zip(a, b))
    return a == b


def forward_origin(net, inputs, dtype):
    """Python's own hooks: the first module (forward order) whose output is non-finite under
    autocast, and the first torch function whose finite inputs gave a non-finite output."""
    from test_replay import FirstNonFiniteFunction

    bad = []
    handles = [m.register_forward_hook(lambda m, i, o, n=n: bad.append(n) if isinstance(o, torch.Tensor) and not bool(
        torch.isfinite(o).all()) else None) for n, m in net.named_modules() if n]
    mode = FirstNonFiniteFunction()
    try:
        with torch.autocast("cpu", dtype=dtype), mode:
            net(*inputs) if isinstance(inputs, (list, tuple)) else net(**inputs)
    finally:
        for h in handles:
            h.remove()
    return (bad[0] if bad else None), mode.first
