# SPDX-License-Identifier: MIT
"""`ampscope-cli run` under torchrun against one process on the same machine (issue 31).

    python bench/distributed_bench.py CLI [--ranks 2] [--samples 4096] [--repeats 5]

One process with T threads (T = the machine's cores) against `torchrun --nproc-per-node R` with
T / R threads per rank (the cores not oversubscribed), the same spec (an MLP program exported
here with random weights, FP16 and BF16 passes, per-op statistics on), alternating, wall time of
the whole command (process start, rendezvous, loading, passes, recording) as the median of the
repeats. Prints the ratio and the bytes each rank sent to rank 0 per sample and pass (the
per-sample results that cross the network), then one JSON line."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch


class Mlp(torch.nn.Module):
    def __init__(self, width=512, classes=10):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(256, width), torch.nn.GELU(), torch.nn.LayerNorm(width),
                                       torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, classes))

    def forward(self, x):
        return self.net(x)


def timed(cmd, env):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    if p.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)}: rc {p.returncode}\n{p.stderr[-3000:]}")
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    cores = os.cpu_count() or 2
    with tempfile.TemporaryDirectory() as d:
        torch.manual_seed(0)
        model, probes = os.path.join(d, "mlp.pt2"), os.path.join(d, "probes.pt")
        x = torch.randn(a.samples, 256)
        dim = torch.export.Dim("b", min=2)
        torch.export.save(torch.export.export(Mlp().eval(), (x[:8],), dynamic_shapes=({0: dim},)), model)
        torch.save({"inputs": x}, probes)
        spec = ["run", "--model", model, "--probes", probes, "--precision", "fp16,bf16", "--batch-size", "128",
                "--no-db", "-q"]
        one_env = dict(os.environ, OMP_NUM_THREADS=str(cores))
        dist_env = dict(os.environ, OMP_NUM_THREADS=str(max(1, cores // a.ranks)))
        one_cmd = [a.cli, *spec]
        dist_json = os.path.join(d, "dist.json")
        dist_cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                    str(a.ranks), "--no-python", a.cli, *spec, "--json", dist_json, "--force"]
        one, dist = [], []
        for _ in range(a.repeats):
            one.append(timed(one_cmd, one_env))
            dist.append(timed(dist_cmd, dist_env))
        run = json.load(open(dist_json))
        passes = len(run["passes"])
        sent = [r for r in run["ranks"] if r["rank"] > 0]
        per_sample = sum(r["bytes"] for r in sent) / max(1, sum(r["samples"] for r in sent)) / passes
    out = {"ranks": a.ranks, "cores": cores, "samples": a.samples, "passes": passes,
           "one_process_s": statistics.median(one), "distributed_s": statistics.median(dist),
           "ratio": statistics.median(dist) / statistics.median(one), "bytes_per_sample_per_pass": per_sample,
           "scores_per_sample": run["passes"][0].get("num_outputs")}
    print(f"{a.ranks} ranks x {max(1, cores // a.ranks)} threads vs 1 process x {cores} threads, "
          f"{a.samples} samples, {passes} passes: {out['distributed_s']:.2f} s vs {out['one_process_s']:.2f} s "
          f"(ratio {out['ratio']:.2f}); {per_sample:.0f} bytes per sample and pass sent to rank 0")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
