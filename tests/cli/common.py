# SPDX-License-Identifier: MIT
"""Helpers for the end-to-end tests: run ampscope-cli, read its JSON."""
import json
import math
import os
import subprocess
import tempfile

CLI = os.environ.get("AMPSCOPE_CLI", "ampscope-cli")
# Never record into the user's own database when run by hand.
os.environ.setdefault("AMPSCOPE_DB", os.path.join(tempfile.gettempdir(), f"ampscope-tests-{os.getpid()}.sqlite"))
# Idle OpenMP threads sleep instead of spinning. ctest runs tests side by side (2 jobs on 2
# cores: more OpenMP threads than cores), and a spinning thread holds a core the thread it
# waits for needs: demo:transformer at --batch-size 1 took 4.5-11 s instead of 0.5 s next to
# another job. The same threads, kernels and results; only how an idle thread waits changes.
# (Python's own torch reads it at `import torch`: set it in the test's environment for that.)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def run_cli(*args, check_rc=None, timeout=300):
    """Runs ampscope-cli; returns (rc, stdout, stderr)."""
    p = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if check_rc is not None and p.returncode != check_rc:
        raise AssertionError(f"ampscope-cli {' '.join(map(str, args))}: rc {p.returncode}, expected {check_rc}\n"
                             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p.returncode, p.stdout, p.stderr


def run_json(*args, check_rc=None):
    """Runs ampscope-cli run ... --json FILE and returns (rc, parsed JSON)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "run.json")
        rc, so, se = run_cli(*args, "--json", out, "-q", check_rc=check_rc)
        with open(out) as f:
            return rc, json.load(f)


def as_float(v):
    """JSON numbers, or the strings 'nan', 'inf', '-inf' ampscope writes for non-finite values."""
    if isinstance(v, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[v]
    return float(v)


def pass_of(run, precision):
    return next(p for p in run["passes"] if p["precision"] == precision)


def comparison_of(run, precision):
    return next(c for c in run["comparisons"] if c["precision"] == precision)


def small_mlp(k, hidden, out):
    """k -> hidden -> out (fc1: Linear, act: GELU, norm: LayerNorm, fc2: Linear), its weights from
    torch's generator as it stands. torch is imported here, not at the top: not every test needs it."""
    import torch

    class SmallMlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(k, hidden)
            self.act = torch.nn.GELU()
            self.norm = torch.nn.LayerNorm(hidden)
            self.fc2 = torch.nn.Linear(hidden, out)

        def forward(self, x):
            return self.fc2(self.norm(self.act(self.fc1(x))))

    return SmallMlp()


def file_order_batches(x, y, steps, batch):
    """The batches `train` forms over `steps` steps: file order, restarting after a short last batch."""
    cursor = 0
    for _ in range(steps):
        b, e = cursor, min(len(x), cursor + batch)
        cursor = 0 if e >= len(x) else e
        yield x[b:e], y[b:e]


def ce_step(m, opt, x, y, amp=True, seed=None):
    """One optimizer step of cross-entropy: the forward under torch.autocast("cpu", torch.bfloat16)
    (amp) or in FP32, the backward outside it, no GradScaler; `seed`: torch.manual_seed before the
    forward, as ampscope reseeds each side. Returns the loss."""
    import torch
    opt.zero_grad()
    if seed is not None:
        torch.manual_seed(seed)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        loss = torch.nn.functional.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def near_tie_mlp():
    """A small classifier (16 -> 48 -> 5) shared by the oracle tests: probes bisected to near-ties
    make AMP flip some (test_oracle_run); a large input sets FP8's scale (test_fp8)."""
    return small_mlp(16, 48, 5)
