# SPDX-License-Identifier: MIT
"""torch.export programs: ampscope's interpreter against TorchScript and eager Python, in one run.

  python bench/export_bench.py path/to/ampscope-cli

Prints one line per figure with the reference, the ratio and the target:
- plain FP16 pass (no inspection) of the same model as .pt2 (ampscope's interpreter), as
  TorchScript (ampscope, unoptimised executor) and as eager Python under torch.autocast:
  target .pt2 <= 1.10x TorchScript and faster than eager Python, on the demo-sized models;
- per-node dispatch overhead in microseconds (a chain of 256 tiny ops, batch 1);
- loading a .pt2 with 100 MB of weights: target <= 1 s (BM_LoadExportProgram in ampscope_bench:
  read, checked, parsed, weights copied, file and weights hashed, as --model does it).
The figures are medians measured by `ampscope-cli bench` (steady clock around each forward)
and, for Python, by the same loop here."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CLI = sys.argv[1] if len(sys.argv) > 1 else "build-release/app/ampscope-cli"
REPEATS, WARMUP = 50, 10


class Encoder(nn.Module):
    """About the size of demo:transformer (2 blocks, dim 32, 4 heads, 8 tokens)."""

    def __init__(self, dim=32, heads=4, blocks=2):
        super().__init__()
        self.heads = heads
        self.embed = nn.Linear(16, dim)
        self.blocks = nn.ModuleList(nn.ModuleDict({"norm1": nn.LayerNorm(dim), "qkv": nn.Linear(dim, 3 * dim),
                                                   "proj": nn.Linear(dim, dim), "norm2": nn.LayerNorm(dim),
                                                   "up": nn.Linear(dim, 2 * dim), "down": nn.Linear(2 * dim, dim)})
                                    for _ in range(blocks))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 4)

    def forward(self, x):
        x = self.embed(x)
        n, t, d = x.shape
        for b in self.blocks:
            q, k, v = b["qkv"](b["norm1"](x)).view(n, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
            x = x + b["proj"](F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(n, t, d))
            x = x + b["down"](F.gelu(b["up"](b["norm2"](x))))
        return self.head(self.norm(x).mean(1))


class Mlp(nn.Module):
    def __init__(self, width=32, hidden=128, depth=3, classes=10):
        super().__init__()
        dims = [width] + [hidden] * depth
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        for l in self.layers:
            x = torch.relu(l(x))
        return self.out(x)


class Chain(nn.Module):
    """256 tiny element-wise ops: the interpreter's fixed cost per node dominates."""

    def forward(self, x):
        for i in range(128):
            x = x * 1.0001
            x = x + 0.001
        return x


def export(model, x, path, dynamic=True):
    dyn = ({0: torch.export.Dim("batch")},) if dynamic else None
    torch.export.save(torch.export.export(model, (x,), dynamic_shapes=dyn), path)


def cli_median(model, probes, batch, db):
    out = subprocess.run([CLI, "bench", "--model", model, "--probes", probes, "--precision", "fp16", "--unvalidated",
                          "--batch-size", str(batch), "--repeats", str(REPEATS), "--warmup", str(WARMUP), "--json", "-"],
                         capture_output=True, text=True, env={**os.environ, "AMPSCOPE_DB": db}, check=True)
    fig = {f["precision"]: f["median_ms"] for f in json.loads(out.stdout)["figures"]}
    return fig["fp16"]


def eager_median(model, x):
    times = []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
        for i in range(WARMUP + REPEATS):
            t0 = time.perf_counter()
            model(x)
            if i >= WARMUP:
                times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def line(name, value, unit, ref_name, ref, target):
    ratio = f"{value / ref:6.2f}x" if ref else "      "
    print(f"{name:44s} {value:9.3f} {unit:3s}  vs {ref_name:22s} {ref:9.3f}  {ratio}  target {target}")


def main():
    torch.manual_seed(0)
    torch.set_num_threads(torch.get_num_threads())
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "bench.sqlite")
        results = {}
        for name, model, x in (("encoder (demo-sized)", Encoder().eval(), torch.randn(64, 8, 16)),
                               ("mlp (demo-sized)", Mlp().eval(), torch.randn(64, 32))):
            pt2, ts, probes = (os.path.join(d, f"{name[:3]}.{e}") for e in ("pt2", "pt", "probes.pt"))
            export(model, x[:4], pt2)
            torch.jit.script(model).save(ts)
            torch.save({"inputs": x}, probes)
            m_pt2 = cli_median(pt2, probes, len(x), db)
            m_ts = cli_median(ts, probes, len(x), db)
            m_eager = eager_median(model, x)
            line(f"{name}: fp16 pass, .pt2", m_pt2, "ms", "TorchScript (ampscope)", m_ts, "<= 1.10x")
            line(f"{name}: fp16 pass, .pt2", m_pt2, "ms", "eager Python", m_eager, "< 1.00x")
            results[name] = {"pt2_ms": m_pt2, "torchscript_ms": m_ts, "eager_ms": m_eager}
        # per-node overhead: 256 nodes at batch 1
        chain, probes = os.path.join(d, "chain.pt2"), os.path.join(d, "chain-probes.pt")
        x = torch.randn(1, 8)
        export(Chain(), x, chain, dynamic=False)
        torch.save({"inputs": x}, probes)
        per_node_us = cli_median(chain, probes, 1, db) * 1e3 / 256
        eager_us = eager_median(Chain(), x) * 1e3 / 256
        line("per-node cost, .pt2 (256 tiny ops)", per_node_us, "us", "eager Python per op", eager_us, "(reported)")
        results["per_node_us"] = {"pt2": per_node_us, "eager": eager_us}
        # loading 100 MB of weights: Linear(2560, 2048) + 5 x Linear(2048, 2048), float32: 105 MB
        big = nn.Sequential(*[nn.Linear(2560 if i == 0 else 2048, 2048) for i in range(6)]).eval()
        xb = torch.randn(2, 2560)
        big_p = os.path.join(d, "big.pt2")
        export(big, xb, big_p)
        mb = os.path.getsize(big_p) / 1e6
        bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(CLI))), "bench", "ampscope_bench")
        out = subprocess.run([bench, "--benchmark_filter=BM_LoadExportProgram", "--benchmark_format=json"],
                             capture_output=True, text=True, check=True, env={**os.environ, "AMPSCOPE_BENCH_PT2": big_p})
        ms = json.loads(out.stdout)["benchmarks"][0]["real_time"]
        line(f"load a .pt2 with {mb:.0f} MB of weights", ms / 1e3, "s", "target", 1.0, "<= 1 s")
        results["load_s"] = {"mb": mb, "seconds": ms / 1e3}
        print(json.dumps(results))


if __name__ == "__main__":
    main()
