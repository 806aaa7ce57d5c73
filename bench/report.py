# SPDX-License-Identifier: MIT
"""Prints benchmark figures beside their references, with ratios and targets."""
import json
import sys

# Medians of interleaved repetitions (bench/run.sh): noise on a shared VM spreads over both
# sides of a ratio instead of landing on one.
b = {}
for x in json.load(open(sys.argv[1]))["benchmarks"]:
    name = x["name"]
    if x.get("aggregate_name") not in (None, "median"):
        continue
    b[name[: -len("_median")] if name.endswith("_median") else name] = x
ctx = json.load(open(sys.argv[1]))["context"]


def t(name):
    return b[name]["real_time"] if name in b else None


rows = []
for dt in ("fp32", "fp16"):
    fused, ref, sep = t(f"BM_FusedStats/{dt}/real_time"), t(f"BM_TorchSum/{dt}/real_time"), t(f"BM_SeparateAtenOps/{dt}/real_time")
    if fused and ref:
        rows.append((f"fused statistics, 64 MiB {dt}", f"{fused:.2f} ms", f"torch::sum {ref:.2f} ms",
                     f"{fused / ref:.2f}x of sum", "<= 1.3x"))
    if fused and sep:
        rows.append((f"fused statistics, 64 MiB {dt}", f"{fused:.2f} ms", f"separate ATen ops {sep:.2f} ms",
                     f"{sep / fused:.1f}x faster", ">= 5x faster"))
def cpu(name):
    return b[name]["cpu_time"] if name in b else None


plain, inst = cpu("BM_AmpPass/plain/real_time"), cpu("BM_AmpPass/instrumented/real_time")
if plain and inst:  # CPU-time medians of interleaved repetitions (the measure); wall beside
    pw, iw = t("BM_AmpPass/plain/real_time"), t("BM_AmpPass/instrumented/real_time")
    rows.append(("instrumented fp16 pass, demo:transformer CPU (CPU time)", f"{inst:.2f} ms", f"plain {plain:.2f} ms",
                 f"{inst / plain:.2f}x (wall {iw / pw:.2f}x)", "<= 1.10x"))
bf16 = cpu("BM_RecipePass/bf16/real_time")  # simulated FP8 / block-scaled passes against plain BF16 (bench_fp8.cpp)
for recipe in ("fp8", "fp8_rowwise", "fp8_delayed", "mxfp8", "nvfp4"):
    r = cpu(f"BM_RecipePass/{recipe}/real_time")
    if r and bf16:
        rows.append((f"simulated {recipe.replace('_', '-')} pass, demo:transformer (CPU time)", f"{r:.2f} ms",
                     f"plain bf16 {bf16:.2f} ms", f"{r / bf16:.2f}x", "<= 1.5x"))
w = b.get("BM_StoreWriteLayers/iterations:2/real_time")
if w:
    rate = w["items_per_second"]
    rows.append(("store: write 2M layer rows through the sink", f"{rate / 1e6:.2f} M rows/s", "target 1 M rows/s",
                 f"{rate / 1e6:.2f}x of target", ">= 1M rows/s"))
r = t("BM_StoreReadLayers/real_time")
if r:
    rows.append(("store: read one pass's 200k layer rows", f"{r:.1f} ms", "target 200 ms", f"{r / 200:.2f}x of target",
                 "< 200 ms"))
extra = {}
for path in sys.argv[2:]:
    try:
        extra.update(json.load(open(path)))
    except (OSError, ValueError):
        pass
if "hooks_ms" in extra:
    rows.append(("instrumented fp16 pass, 6-block MLP TorchScript", f"{extra['ampscope_ms']:.1f} ms",
                 f"Python forward hooks {extra['hooks_ms']:.1f} ms", f"{extra['hooks_ms'] / extra['ampscope_ms']:.2f}x faster",
                 "faster than hooks"))
if "gui_first_paint_s" in extra:
    rows.append(("GUI cold start to first painted run (10k samples, 5k layers)", f"{extra['gui_first_paint_s']:.2f} s",
                 "-", "-", "(reported)"))
frames = extra.get("frames", {})
for view, f in sorted(frames.items()):
    rows.append((f"GUI repaint, {view} (10k samples, 5k layers)", f"median {f['median_ms']:.1f} ms",
                 f"worst {f['worst_ms']:.1f} ms (first paint after a tab switch)", "-", "(reported; 16.7 ms = 60 Hz)"))
o = t("BM_FusedStatsOpOutput/finite/real_time")
oi = t("BM_FusedStatsOpOutput/inf_rows/real_time")
if o and oi:
    rows.append(("statistics of one 40x16x64 half op output", f"{o:.1f} us finite", f"{oi:.1f} us with 8 inf rows",
                 "-", "(reported)"))
for prec in ("fp32", "bf16", "fp16"):  # bench/lm_bench.py --observer
    x = extra.get(f"observer_{prec}_cpu_time")
    if x:
        w = extra.get(f"observer_{prec}_real_time", {})
        wall = f" (wall {w['inspected_ms'] / w['plain_ms']:.2f}x)" if w else ""
        rows.append((f"instrumented {prec} pass, GPT-2-small .pt2 4x128 (CPU time)", f"{x['inspected_ms']:.0f} ms",
                     f"plain {x['plain_ms']:.0f} ms", f"{x['inspected_ms'] / x['plain_ms']:.2f}x{wall}", "<= 1.10x"))
for recipe in ("fp8", "fp8_rowwise", "fp8_delayed", "mxfp8", "nvfp4"):  # bench/lm_bench.py --fp8
    x = extra.get(f"fp8_{recipe}")
    if x:
        rows.append((f"simulated {recipe.replace('_', '-')} pass, GPT-2-small .pt2 4x128 (CPU time)", f"{x['pass_ms']:.0f} ms",
                     f"plain bf16 {x['bf16_ms']:.0f} ms", f"{x['pass_ms'] / x['bf16_ms']:.2f}x", "<= 1.5x"))
for name in ("no_db", "recorded"):
    x = extra.get(f"peak_rss_{name}")
    if x:
        rows.append((f"peak RSS, GPT-2-small run fp32+fp16+bf16 ({name})", f"{x['bytes'] / 1e6:.0f} MB",
                     f"unique weight bytes {x['unique_weights_bytes'] / 1e6:.0f} MB",
                     f"{x['bytes'] / x['unique_weights_bytes']:.2f}x", "< 3x"))
if "build_clean_wall_s" in extra:  # bench/build_time.sh
    rows.append((f"build from clean, dev preset, cold ccache ({extra['build_cpus']} CPUs)",
                 f"{extra['build_clean_wall_s'] / 60:.1f} min", f"CPU {extra['build_clean_cpu_s'] / 60:.1f} min", "-",
                 "(reported; fresh clone to green <= 15 min)"))
    rows.append((f"dev loop: {extra['build_touch_file']} changed -> ampscope-cli", f"{extra['build_touch_wall_s']:.0f} s",
                 f"CPU {extra['build_touch_cpu_s']:.0f} s", f"{extra['build_touch_wall_s'] / 60:.2f}x of target", "<= 60 s"))
widths = [max(len(str(row[i])) for row in rows) for i in range(5)]
print(f"machine: {ctx.get('num_cpus')} CPUs at {ctx.get('mhz_per_cpu')} MHz; {ctx.get('date')}")
for row in rows:
    print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
