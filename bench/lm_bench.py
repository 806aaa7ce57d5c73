# SPDX-License-Identifier: MIT
"""Language models: a GPT-2-small-sized torch.export program against eager PyTorch, in one run.

  python bench/lm_bench.py path/to/ampscope-cli [--layers 12] [--width 768] [--tokens 128]
                           [--batch 4] [--repeats 3] [--amp bf16]

The program is Hugging Face transformers' GPT2LMHeadModel built from a config (12 layers,
width 768, 12 heads, vocabulary 50257: 124 M parameters; random weights, no hub access),
exported by torch.export with token ids [batch, tokens] as its input. Prints one line per
figure with the reference, the ratio and the target:
- plain pass (no inspection), FP32 and the AMP precision: `ampscope-cli bench --unvalidated`
  (median of --repeats forwards) against the eager module under torch.autocast, same loop
  here: target <= 1.05x;
- instrumented pass (inspection on: per-op statistics and origins) against the plain pass,
  both in one process on one loaded program, interleaved in random order (ampscope_bench's
  BM_LmPass; medians of --repeats): target <= 1.10x. Without ampscope_bench beside the CLI,
  the pass times of `run` and `run --no-inspect` (two processes: noisier);
- peak RSS of a whole `run` (FP32 + FP16 + BF16, inspection on) against the size of the
  weights (float32): reported, target < 3x;
- load time of the program (`BM_LoadExportProgram` in ampscope_bench: read, checked,
  parsed, weights copied and hashed, as --model does it).
CPU FP16/BF16 GEMMs without AVX512-BF16/AMX are 5-70x slower than FP32: on such a CPU the
whole run takes minutes; --layers/--tokens shrink the model for a quick look (the figures
then are not the GPT-2-small ones, and the header line says so)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch


class LogitsOnly(torch.nn.Module):
    """The causal LM returning its logits [N, T, V] (no cache, no loss)."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids):
        return self.lm(input_ids=input_ids, use_cache=False).logits


def build(layers, width):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=max(1, width // 64), n_positions=1024)
    return LogitsOnly(GPT2LMHeadModel(cfg)).eval()


def eager_median(model, ids, amp, repeats):
    times = []
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(amp)
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        model(ids)  # warm-up
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(ids)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def interleaved_plain(exe, model, ids, pt2, probes, amp, batch, rounds, env, d):
    """Plain AMP pass against eager, alternated `rounds` times (eager forward here, then the AMP
    pass of `run --no-inspect` in a process of its own): on a CPU where one BF16 pass takes
    minutes, load that drifts between two blocks of repeats biases their ratio. Medians in ms."""
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[amp]
    eager, pt2_ms = [], []
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype):
        model(ids)  # warm-up
        for r in range(rounds):
            t0 = time.perf_counter()
            model(ids)
            eager.append((time.perf_counter() - t0) * 1e3)
            pt2_ms.append(pass_seconds(exe, pt2, probes, amp, batch, False, env, d)[amp])
            print(f"  round {r + 1}: eager {eager[-1]:.0f} ms, .pt2 {pt2_ms[-1]:.0f} ms ({pt2_ms[-1] / eager[-1]:.3f}x)", flush=True)
    return statistics.median(pt2_ms), statistics.median(eager)


def cli(args, env):
    return subprocess.run(args, capture_output=True, text=True, env=env, check=True)


def bench_medians(exe, model, probes, amp, batch, repeats, env):
    out = cli([exe, "bench", "--model", model, "--probes", probes, "--precision", amp, "--unvalidated", "--batch-size",
               str(batch), "--repeats", str(repeats), "--warmup", "1", "--json", "-"], env)
    return {f["precision"]: f["median_ms"] for f in json.loads(out.stdout)["figures"]}


# Forks and execs the command, waits for it and prints its peak RSS (ru_maxrss, KiB). A process's
# ru_maxrss survives exec and starts from the peak of the process it was forked from: a child of
# this script (which holds GPT-2 and its export, ~1.7 GB) would report this script's peak. The
# command is a grandchild forked from this small helper instead.
RSS_HELPER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_accepted_or_rejected(args, env):
    """Runs a command whose exit 0 or 1 (the verdict, which does not matter here) is success."""
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(args)}: rc {p.returncode}\n{p.stderr}")
    return p


def run_with_rss(args, env):
    """Runs a command (exit 0 or 1 expected); returns the peak RSS in bytes of that process."""
    p = run_accepted_or_rejected([sys.executable, "-c", RSS_HELPER, *args], env)
    return int(p.stdout.strip().splitlines()[-1]) * 1024


def pass_seconds(exe, model, probes, amp, batch, inspect, env, d):
    out = os.path.join(d, f"run-{amp}-{int(inspect)}.json")
    args = [exe, "run", "--model", model, "--probes", probes, "--precision", amp, "--batch-size", str(batch), "--no-db",
            "-q", "--json", out, "--allow-nonfinite", "--max-flips", "100000", "--atol", "1e9"]
    if not inspect:
        args.append("--no-inspect")
    run_accepted_or_rejected(args, env)
    with open(out) as f:
        return {p["precision"]: p["seconds"] * 1e3 for p in json.load(f)["passes"]}


def interleaved_passes(bench, pt2, probes, amp, repeats, env, precisions=None, key="real_time"):
    """BM_LmPass (bench_export.cpp): plain and instrumented passes of the one loaded program,
    in random interleaved order, --repeats each; medians in ms as ({prec: inspected}, {prec: plain}).
    key: "real_time" (wall) or "cpu_time" (the passing thread's CPU time)."""
    precs = "|".join(precisions or ("fp32", amp))
    out = cli([bench, f"--benchmark_filter=BM_LmPass/({precs})_", f"--benchmark_repetitions={repeats}",
               "--benchmark_enable_random_interleaving=true", "--benchmark_min_time=0.01",
               "--benchmark_report_aggregates_only=true", "--benchmark_format=json"], env)
    inspected, plain = {}, {}
    for b in json.loads(out.stdout)["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        prec, kind = b["run_name"].split("/")[1].split("_")
        (inspected if kind == "instrumented" else plain)[prec] = b[key] if key else {k: b[k] for k in ("cpu_time", "real_time")}
    return inspected, plain


def observer_figures(exe, pt2, probes, repeats, env, results):
    """The observer's cost on the language model in every precision: instrumented / plain pass,
    the medians of interleaved repetitions in one process (BM_LmPass), CPU time and wall time."""
    bench = os.path.join(os.path.dirname(os.path.dirname(exe)), "bench", "ampscope_bench")
    if not os.path.exists(bench):
        sys.exit(f"lm_bench: --observer needs {bench} (build the ampscope_bench target)")
    env = {**env, "AMPSCOPE_BENCH_LM_PT2": pt2, "AMPSCOPE_BENCH_LM_PROBES": probes}
    inspected, bare = interleaved_passes(bench, pt2, probes, None, repeats, env, ("fp32", "bf16", "fp16"), None)
    for key, what in (("cpu_time", "CPU"), ("real_time", "wall")):
        for prec in ("fp32", "bf16", "fp16"):
            i, p = inspected[prec][key], bare[prec][key]
            line(f"instrumented {prec} pass ({what}, median of {repeats})", i, "ms", "plain pass", p, "<= 1.10x")
            results[f"observer_{prec}_{key}"] = {"inspected_ms": i, "plain_ms": p, "repeats": repeats}


def fp8_figures(exe, pt2, probes, repeats, env, results):
    """The simulated FP8 and block-scaled passes against a plain BF16 pass of the program (issue 30:
    <= 1.5x): BM_LmRecipe (bench_fp8.cpp), one process, interleaved, CPU-time and wall medians."""
    bench = os.path.join(os.path.dirname(os.path.dirname(exe)), "bench", "ampscope_bench")
    if not os.path.exists(bench):
        sys.exit(f"lm_bench: --fp8 needs {bench} (build the ampscope_bench target)")
    out = cli([bench, "--benchmark_filter=BM_Lm(Recipe|AllGemms)/", f"--benchmark_repetitions={repeats}",
               "--benchmark_enable_random_interleaving=true", "--benchmark_min_time=0.01",
               "--benchmark_report_aggregates_only=true", "--benchmark_format=json"],
              {**env, "AMPSCOPE_BENCH_LM_PT2": pt2, "AMPSCOPE_BENCH_LM_PROBES": probes})
    med = {b["run_name"].split("/")[1] + ("_all" if b["run_name"].startswith("BM_LmAllGemms") else ""): b
           for b in json.loads(out.stdout)["benchmarks"] if b.get("aggregate_name") == "median"}
    for recipe in ("fp8", "fp8_rowwise", "fp8_delayed", "mxfp8", "nvfp4"):
        for key, what in (("cpu_time", "CPU"), ("real_time", "wall")):
            line(f"simulated {recipe.replace('_', '-')} pass ({what}, median of {repeats})", med[recipe][key], "ms",
                 "plain bf16 pass", med["bf16"][key], "<= 1.5x")
        results[f"fp8_{recipe}"] = {"pass_ms": med[recipe]["cpu_time"], "bf16_ms": med["bf16"]["cpu_time"],
                                    "repeats": repeats}
    # The floor under the emulation: torchao's emulate multiplies dequantized operands in FP32, so a
    # simulated pass cannot beat the FP32 products of the GEMMs it quantizes (on GPT-2: lm_head).
    for key, what in (("cpu_time", "CPU"), ("real_time", "wall")):
        line(f"plain fp32 pass ({what}, median of {repeats})", med["fp32"][key], "ms", "plain bf16 pass",
             med["bf16"][key], "(floor)")
    results["fp32_pass"] = {"pass_ms": med["fp32"]["cpu_time"], "bf16_ms": med["bf16"]["cpu_time"], "repeats": repeats}
    # --fp8-all-gemms: GPT-2's Conv1D and attention products quantized too (no target: every GEMM is
    # then an FP32 product of the dequantized operands, above the FP32 pass)
    for recipe in ("fp8", "mxfp8"):
        for key, what in (("cpu_time", "CPU"), ("real_time", "wall")):
            line(f"simulated {recipe} --fp8-all-gemms ({what}, median of {repeats})", med[recipe + "_all"][key], "ms",
                 "plain bf16 pass", med["bf16"][key], "(none)")
        results[f"fp8_all_gemms_{recipe}"] = {"pass_ms": med[recipe + "_all"]["cpu_time"],
                                             "bf16_ms": med["bf16"]["cpu_time"], "repeats": repeats}


def rss_figures(exe, pt2, probes, batch, weights, unique, env, results):
    """Peak RSS of a whole `run` (FP32 + FP16 + BF16, inspection on), without and with recording
    into the database, against the weights' bytes: the state_dict's and the unique ones."""
    for name, extra in (("no_db", ["--no-db"]), ("recorded", [])):
        rss = run_with_rss([exe, "run", "--model", pt2, "--probes", probes, "--precision", "fp16,bf16", "--batch-size",
                            str(batch), "-q", "--allow-nonfinite", *extra], env)
        what = "--no-db" if extra else "recorded"
        line(f"peak RSS, run fp32+fp16+bf16 ({what})", rss / 1e6, "MB", "state_dict bytes", weights / 1e6, "< 3x")
        line(f"peak RSS, run fp32+fp16+bf16 ({what})", rss / 1e6, "MB", "unique weight bytes", unique / 1e6, "< 3x")
        results[f"peak_rss_{name}"] = {"bytes": rss, "weights_bytes": weights, "unique_weights_bytes": unique}


def line(name, value, unit, ref_name, ref, target):
    ratio = f"{value / ref:6.2f}x" if ref else "      "
    print(f"{name:46s} {value:10.1f} {unit:3s}  vs {ref_name:24s} {ref:10.1f}  {ratio}  target {target}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli", nargs="?", default="build-release/app/ampscope-cli")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3, help="timed forwards (>= 3)")
    ap.add_argument("--amp", default="bf16", choices=["fp16", "bf16"])
    ap.add_argument("--rss-only", action="store_true", help="only the peak-RSS figures (minutes instead of an hour on a slow CPU)")
    ap.add_argument("--observer", action="store_true",
                    help="only the instrumented/plain pass ratios, FP32, BF16 and FP16 (--repeats interleaved, CPU and wall)")
    ap.add_argument("--fp8", action="store_true",
                    help="only the simulated FP8 / block-scaled passes against plain BF16 (--repeats interleaved)")
    ap.add_argument("--interleave", type=int, default=0, metavar="ROUNDS",
                    help="only the plain AMP pass against eager, alternated ROUNDS times (median)")
    a = ap.parse_args()
    exe = os.path.abspath(a.cli)
    model = build(a.layers, a.width)
    params = sum(p.numel() for p in model.parameters())
    weights = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    # GPT-2's lm_head.weight is transformer.wte.weight (tied): the state_dict lists it twice
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in model.state_dict().values()}
    unique = sum(storages.values())
    small = (a.layers, a.width, a.tokens, a.batch) != (12, 768, 128, 4)
    print(f"GPT-2 {'(shrunk: not the GPT-2-small figures) ' if small else ''}{a.layers} layers, width {a.width}, "
          f"{params / 1e6:.0f} M parameters, {weights / 1e6:.0f} MB of float32 state ({unique / 1e6:.0f} MB without the tied "
          f"lm_head), {a.batch} x {a.tokens} tokens, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    torch.manual_seed(1)
    ids = torch.randint(0, model.lm.config.vocab_size, (a.batch, a.tokens))
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "AMPSCOPE_DB": os.path.join(d, "bench.sqlite")}
        pt2, probes = os.path.join(d, "gpt2.pt2"), os.path.join(d, "tokens.pt")
        torch.export.save(torch.export.export(model, (ids,)), pt2)
        torch.save({"inputs": ids}, probes)
        results = {"parameters": params, "weights_bytes": weights, "unique_weights_bytes": unique}
        if a.interleave:
            pt2_ms, eager = interleaved_plain(exe, model, ids, pt2, probes, a.amp, a.batch, a.interleave, env, d)
            line(f"plain {a.amp} pass, .pt2, interleaved (median of {a.interleave})", pt2_ms, "ms", "eager PyTorch", eager, "<= 1.05x")
            results[f"plain_{a.amp}_interleaved"] = {"pt2_ms": pt2_ms, "eager_ms": eager, "rounds": a.interleave}
            print(json.dumps(results))
            return
        if a.fp8:
            fp8_figures(exe, pt2, probes, a.repeats, env, results)
            print(json.dumps(results))
            return
        if a.observer:
            observer_figures(exe, pt2, probes, a.repeats, env, results)
            print(json.dumps(results))
            return
        rss_figures(exe, pt2, probes, a.batch, weights, unique, env, results)
        if a.rss_only:
            print(json.dumps(results))
            return

        plain = bench_medians(exe, pt2, probes, a.amp, a.batch, a.repeats, env)
        for prec in ("fp32", a.amp):
            eager = eager_median(model, ids, None if prec == "fp32" else prec, a.repeats)
            line(f"plain {prec} pass, .pt2 (interpreter)", plain[prec], "ms", "eager PyTorch", eager, "<= 1.05x")
            results[f"plain_{prec}"] = {"pt2_ms": plain[prec], "eager_ms": eager}

        bench = os.path.join(os.path.dirname(os.path.dirname(exe)), "bench", "ampscope_bench")
        if os.path.exists(bench):  # one process, one loaded model, plain and instrumented interleaved
            inspected, bare = interleaved_passes(bench, pt2, probes, a.amp, a.repeats,
                                                 {**env, "AMPSCOPE_BENCH_LM_PT2": pt2, "AMPSCOPE_BENCH_LM_PROBES": probes})
            how, ref = "(median, interleaved)", "plain pass"
        else:  # two `run` processes: the pass times each records (noisier: first-pass costs, other load)
            inspected = pass_seconds(exe, pt2, probes, a.amp, a.batch, True, env, d)
            bare = pass_seconds(exe, pt2, probes, a.amp, a.batch, False, env, d)
            how, ref = "(run)", "run --no-inspect"
        for prec in ("fp32", a.amp):
            line(f"instrumented {prec} pass {how}", inspected[prec], "ms", ref, bare[prec], "<= 1.10x")
            results[f"instrumented_{prec}"] = {"inspected_ms": inspected[prec], "plain_ms": bare[prec]}

        if os.path.exists(bench):
            out = cli([bench, "--benchmark_filter=BM_LoadExportProgram", "--benchmark_format=json"],
                      {**env, "AMPSCOPE_BENCH_PT2": pt2})
            s = json.loads(out.stdout)["benchmarks"][0]["real_time"] / 1e3
            line(f"load the program ({os.path.getsize(pt2) / 1e6:.0f} MB)", s, "s", "(reported)", 0, "")
            results["load_s"] = s
        print(json.dumps(results))


if __name__ == "__main__":
    sys.exit(main())
