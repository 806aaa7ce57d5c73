# SPDX-License-Identifier: MIT
"""The tool a user would otherwise write: forward hooks (Python, same wheel) computing the
same per-module statistics as ampscope's observer, timed against `ampscope-cli run` on the
same TorchScript model and probes. Prints one line per figure; bench/report.py collects them.

usage: hooks_baseline.py AMPSCOPE_CLI"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.act = torch.nn.GELU()
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(self.act(self.up(self.norm(x))))


class Net(torch.nn.Module):
    def __init__(self, d=256, depth=6):
        super().__init__()
        self.embed = torch.nn.Linear(64, d)
        self.blocks = torch.nn.ModuleList([Block(d) for _ in range(depth)])
        self.head = torch.nn.Linear(d, 10)

    def forward(self, x):
        x = self.embed(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x.mean(1))


def stats(t):
    """The statistics ampscope computes, one ATen op each."""
    f = t.float()
    a = f.abs()
    fin = torch.isfinite(f)
    nz = (a > 0) & fin
    return [f.isnan().sum(), f.isposinf().sum(), f.isneginf().sum(), (f == 0).sum(), f[fin].min(), f[fin].max(),
            a[fin].max(), a[nz].min() if nz.any() else a.new_zeros(()), f[fin].mean(), f[fin].pow(2).mean().sqrt(),
            (a > 65504).sum(), (nz & (a < 6.1035e-5)).sum(), (nz & (a < 5.96e-8)).sum(), (a > 3.39e38).sum(),
            (nz & (a < 1.1755e-38)).sum(), (nz & (a < 9.18e-41)).sum()]


def main():
    cli = sys.argv[1]
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as d:
        net = Net().eval()
        model = os.path.join(d, "net.pt")
        torch.jit.script(net).save(model)
        x = torch.randn(64, 32, 64)
        probes = os.path.join(d, "probes.pt")
        torch.save({"inputs": x}, probes)
        records = []

        def hook(name):
            def f(mod, inp, out):
                records.append((name, [s.item() for s in stats(out)]))
            return f

        for n, m in net.named_modules():
            if not list(m.children()):
                m.register_forward_hook(hook(n))
        times = []
        for _ in range(7):
            records.clear()
            t0 = time.perf_counter()
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
                net(x)
            times.append((time.perf_counter() - t0) * 1000)
        hooks_ms = statistics.median(times[2:])
        amp = []
        for _ in range(5):
            out = subprocess.run([cli, "run", "--model", model, "--probes", probes, "--precision", "fp16", "--device", "cpu",
                                  "--batch-size", "64", "--no-db", "--json", "-", "-q"], capture_output=True, text=True)
            run = json.loads(out.stdout)
            amp.append(next(p for p in run["passes"] if p["precision"] == "fp16")["seconds"] * 1000)
        ampscope_ms = statistics.median(amp[1:])
        print(json.dumps({"hooks_ms": hooks_ms, "ampscope_ms": ampscope_ms, "modules": len(records)}))


if __name__ == "__main__":
    main()
