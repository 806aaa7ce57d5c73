#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The advisor's cost, from one run of each (bench/README.md):
- candidate sets the search checks against n (modules) and k (size of the answer), on a
  synthetic deep model (n = 50 and 500 leaf modules, k planted FP16 overflows), beside the
  target 2 k ceil(log2 n) + 2; and the passes in all (sensitivity: one per module and precision);
- wall time of `advise` on demo:transformer against one full comparison run (`run`).
Usage: advise_bench.py path/to/ampscope-cli"""
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import torch

CLI = sys.argv[1] if len(sys.argv) > 1 else "build-release/app/ampscope-cli"


class Fragile(torch.nn.Module):
    """A leaf whose FP16 output overflows (x 4096: |x| > 16 gives > 65504), scaled back by its parent (x / 4096)."""

    def __init__(self, width, planted):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)
        self.scale = 4096.0 if planted else 1.0
        with torch.no_grad():
            self.lin.weight.copy_(torch.eye(width) * self.scale)
            self.lin.bias.zero_()

    def forward(self, x):
        return self.lin(x) / self.scale


class Deep(torch.nn.Module):
    def __init__(self, n, planted, width=8, classes=4):
        super().__init__()
        self.layers = torch.nn.ModuleList(Fragile(width, i in planted) for i in range(n - 1))
        self.head = torch.nn.Linear(width, classes)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def cli(*args):
    t0 = time.perf_counter()
    p = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    return p.returncode, time.perf_counter() - t0, p


def main():
    rows = []
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "bench.sqlite")
        torch.manual_seed(0)
        x = torch.randn(16, 8) * 20.0
        probes = os.path.join(d, "probes.pt")
        torch.save({"inputs": x}, probes)
        for n in (50, 500):
            for k in (1, 2, 4):
                planted = set(range(3, n - 1, max(1, (n - 4) // k)))
                planted = set(sorted(planted)[:k])
                model = os.path.join(d, f"deep-{n}-{k}.pt")
                torch.jit.save(torch.jit.script(Deep(n, planted).eval()), model)
                out = os.path.join(d, f"advise-{n}-{k}.json")
                rc, secs, p = cli("advise", "--model", model, "--probes", probes, "--precision", "fp16", "--atol", "1e9", "--rtol",
                                  "1e9", "--no-bench", "--db", db, "--json", out, "-q")
                if rc != 0:
                    print(p.stderr, file=sys.stderr)
                    rows.append((n, k, "rc %d" % rc, "", "", ""))
                    continue
                a = json.load(open(out))
                bound = 2 * k * math.ceil(math.log2(n)) + 2
                rows.append((n, k, a["evaluations"], bound, a["passes_used"], f"{secs:.1f} s"))
        print("advise search on a synthetic deep model (fp16, k planted overflows)")
        print(f"{'n modules':>10} {'k':>3} {'sets checked':>13} {'target <=':>10} {'passes in all':>14} {'wall':>8}")
        for r in rows:
            print(f"{r[0]:>10} {r[1]:>3} {r[2]!s:>13} {r[3]!s:>10} {r[4]!s:>14} {r[5]:>8}")
        rc_run, t_run, _ = cli("run", "--model", "demo:transformer", "--probes", "demo", "--db", db, "-q")
        rc_adv, t_adv, p = cli("advise", "--model", "demo:transformer", "--probes", "demo", "--db", db, "--no-bench", "--json",
                               os.path.join(d, "t.json"), "-q")
        a = json.load(open(os.path.join(d, "t.json")))
        print(f"\ndemo:transformer: advise {t_adv:.1f} s (rc {rc_adv}, {a['outcome']}, {a['evaluations']} sets, "
              f"{a['passes_used']} passes) vs one comparison run {t_run:.1f} s (rc {rc_run}): {t_adv / t_run:.1f}x")


if __name__ == "__main__":
    main()
