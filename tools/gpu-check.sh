#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One-shot GPU check, on a machine with an NVIDIA GPU, Python torch (the LibTorch it builds
# against: python3's torch.utils.cmake_prefix_path), nvcc, CMake and Ninja but no Qt and no
# network. Prepare here: tools/fetch-gpu-deps.sh (fills .deps/), then run there from the
# repository root, carrying .deps:  bash tools/gpu-check.sh
# Builds engine + storage + CLI + the engine and GPU tests (UI and benchmarks off), then runs
# each check below; every check prints one line "PASS|FAIL name figure". Any failure fails
# the script (exit 1), after every check has run. The report, with each check's output, goes
# to $OUT/gpu-check.txt (or ./gpu-check.txt), the checks' JSON to $OUT/gpu-check-json.tgz.
# Budget: 8 minutes on 16 cores, build included (about 3-4 for the build, 1-2 for the checks),
# so that a rerun fits in 15 minutes of device time; a rerun on the same machine reuses build-gpu.
# --build-only stops after the build: a first call within the device tool's 600 s a command, the
# checks a second call on the still-warm machine (its build is then a no-op).
set -euo pipefail
build_only=0
case "${1:-}" in
  --build-only) build_only=1 ;;
  "") ;;
  *) echo "gpu-check: unknown option '$1' (expected --build-only)" >&2; exit 2 ;;
esac
cd "$(dirname "${BASH_SOURCE[0]}")/.."
t_start=$SECONDS
out_dir=${OUT:-.}
report=$out_dir/gpu-check.txt
logs=$(mktemp -d)
: > "$report"
log() { echo "$*" | tee -a "$report"; }
summary=()
failed=0

# check NAME FUNCTION [ARGS]: runs FUNCTION in a subshell with errexit in force (a background
# job, so that `set -e` holds inside it), its output into the report; the last line it
# prints that starts with "figure: " is the figure of the summary line. Exit 77: SKIP (a
# missing test dependency of this machine, not a failure of ampscope).
check() {
  local name=$1 t0=$SECONDS rc=0 figure
  shift
  log "== $name"
  "$@" > "$logs/$name.log" 2>&1 &
  wait $! || rc=$?
  cat "$logs/$name.log" >> "$report"
  figure=$(grep -a '^figure: ' "$logs/$name.log" | tail -n 1 | cut -c 9-) || true
  if [ "$rc" -eq 0 ]; then
    summary+=("$(printf 'PASS %-16s %s (%ss)' "$name" "${figure:-ok}" $((SECONDS - t0)))")
  elif [ "$rc" -eq 77 ]; then
    summary+=("$(printf 'SKIP %-16s %s' "$name" "${figure:-}")")
  else
    [ -n "$figure" ] || figure=$(grep -av '^\s*$' "$logs/$name.log" | tail -n 1 | cut -c 1-120) || true
    summary+=("$(printf 'FAIL %-16s %s (exit %s, %ss; see %s)' "$name" "$figure" "$rc" $((SECONDS - t0)) "$report")")
    failed=$((failed + 1))
  fi
  log "${summary[-1]}"
}

root=$PWD/.deps/root
if ls .deps/*.deb >/dev/null 2>&1; then
  mkdir -p "$root"
  for f in .deps/*.deb; do dpkg -x "$f" "$root"; done
  export CMAKE_PREFIX_PATH="$root/usr:$root/usr/lib/x86_64-linux-gnu/cmake:${CMAKE_PREFIX_PATH:-}"
  export CPATH="$root/usr/include:${CPATH:-}"
  export LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu:${LIBRARY_PATH:-}"
  export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
py=$(command -v python3)
if ls .deps/wheels/*.whl >/dev/null 2>&1; then  # torchao for the fp8-real oracle (tools/fetch-gpu-deps.sh)
  "$py" -m pip install -q --no-deps --no-index --target "$PWD/.deps/py" .deps/wheels/*.whl 2>/dev/null &&
    export PYTHONPATH="$PWD/.deps/py:${PYTHONPATH:-}" || true
fi
log "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee -a "$report" || true
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))' 2>&1 | tee -a "$report" || true

log "== configure + build (engine, storage, CLI, engine and GPU tests; UI and benchmarks off)"
t0=$SECONDS
{
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DAMPSCOPE_BUILD_UI=OFF -DAMPSCOPE_BUILD_BENCH=OFF \
    -DAMPSCOPE_HIP_CHECK=OFF -DAMPSCOPE_PYTHON="$py" -DTORCH_CUDA_ARCH_LIST=9.0 -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build build-gpu -j"$(nproc)" --target ampscope-cli gpu_tests engine_tests
} > "$logs/build.log" 2>&1 || { cat "$logs/build.log" >> "$report"; tail -n 40 "$logs/build.log"; log "FAIL build"; exit 1; }
cat "$logs/build.log" >> "$report"
summary+=("$(printf 'PASS %-16s %s' build "$((SECONDS - t0)) s")")
log "${summary[-1]}"
if [ $build_only = 1 ]; then log "build only: run tools/gpu-check.sh again for the checks"; exit 0; fi
cli=$PWD/build-gpu/app/ampscope-cli
gpu_tests=$PWD/build-gpu/tests/gpu_tests
export AMPSCOPE_DB=$PWD/build-gpu/gpu-check.sqlite
rm -f "$AMPSCOPE_DB"
json=$logs  # JSON results of the checks (copied to $OUT at the end)

# ---- checks ---------------------------------------------------------------------------------
# gtest FILTER: the GPU tests matching FILTER, failing when any of them skipped (no GPU seen).
gtest_gpu() {
  local rc=0
  "$gpu_tests" --gtest_filter="$1" > "$logs/gtest.out" 2>&1 || rc=$?
  cat "$logs/gtest.out"
  if grep -aq '^\[  SKIPPED \]' "$logs/gtest.out"; then echo "a GPU test skipped: no CUDA device seen"; return 1; fi
  return "$rc"
}
# The CUDA statistics kernel against the CPU kernel; the observer on the device against host copies.
gpu_kernel() {
  gtest_gpu 'GpuStats.MatchesTheCpuKernel:GpuStats.ObserverOnTheDeviceEqualsHostCopies:GpuStats.DeviceInfoNamesTheDevice'
  echo "figure: 3 tests"
}
# Host synchronisations of instrumented passes (CUDA sync debug mode): one per pass, not per batch.
host_syncs() {
  local rc=0
  gtest_gpu 'GpuSync.*' | tee "$json/syncs.txt" || rc=$?
  echo "figure: at most $(grep -a '^\[ sync' "$json/syncs.txt" | sed 's/.*: \([0-9]*\) host.*/\1/' | sort -n | tail -n 1) host sync(s) per pass"
  return "$rc"
}
kernel_bandwidth() {
  local rc=0
  gtest_gpu 'GpuStats.KernelBandwidthAgainstADeviceCopy' | tee "$json/bw.txt" || rc=$?
  echo "figure: $(grep -a '^\[ bandwidth' "$json/bw.txt" | sed 's/^\[ bandwidth \] //')"
  return "$rc"
}
# The CPU statistics on this machine's CPU, both paths (fast and portable), and the notes.
cpu_stats() {
  build-gpu/tests/engine_tests --gtest_brief=1 --gtest_filter='Path/TensorStatsTest.*:TensorStatsPath.*:DeviceNotes.*:BenchLabels.*'
  echo "figure: $(build-gpu/tests/engine_tests --gtest_list_tests --gtest_filter='Path/TensorStatsTest.*:TensorStatsPath.*:DeviceNotes.*:BenchLabels.*' | grep -c '^  ') tests"
}
backend() {
  "$cli" backend --device cuda --json > "$json/backend.json"
  "$py" - "$json/backend.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
print(json.dumps(b, indent=1))
assert b["kind"] == "cuda", b["kind"]
assert any("on the device by the CUDA statistics kernel" in n for n in b["notes"]), b["notes"]
print(f"figure: {b['name']}, compute {b['compute_capability']}, CUDA {b['cuda']}")
PY
}
# The README's demo story on CUDA: FP16 rejected for 8 non-finite edge samples born in embed.
demo_story() {
  local rc=0
  "$cli" run --model demo:transformer --probes demo --device cuda --layers --json "$json/demo.json" || rc=$?
  [ "$rc" -eq 1 ] || { echo "expected exit 1 (rejected), got $rc"; return 1; }
  "$py" - "$json/demo.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
fp16 = next(p for p in r["passes"] if p["precision"] == "fp16")
o = fp16["origin"]
print("warnings:", r["warnings"])
assert r["verdict"] == "rejected", r["verdict"]
assert len(fp16["nonfinite_samples"]) == 8 and all(s.startswith("edge-") for s in fp16["nonfinite_samples"]), fp16["nonfinite_samples"]
assert o and o["module"] == "embed" and o["op"] == "aten::matmul", o
assert not any("per-op statistics on the host" in w for w in r["warnings"]), r["warnings"]
flips = {c["precision"]: len(c["flips"]) for c in r["comparisons"]}
print(f"figure: fp16 8 non-finite from embed {o['op']}; flips {flips}")
PY
}
keep_fp32_embed() {
  local rc=0
  "$cli" run --model demo:transformer --probes demo --device cuda --precision fp16 --keep-fp32 embed --json "$json/keep.json" -q || rc=$?
  [ "$rc" -le 1 ] || return "$rc"
  "$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); p=r["passes"][1]; assert p["nonfinite_samples"]==[], p["nonfinite_samples"]; print("figure: fp16 + keep-fp32 embed: 0 non-finite, verdict", r["verdict"])' "$json/keep.json"
}
# a traced TorchScript model with a tensor constant in its graph (Module::to moves parameters
# and buffers only; the engine moves the graphs' constants): its passes on cuda equal Python's
# torch.jit.load(map_location="cuda") forward in FP32
torchscript_constants() {
  "$py" - "$json" <<'PY'
import sys, torch
d = sys.argv[1]
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)
    def forward(self, x):
        return self.fc(x) * torch.tensor([2.0, 1.0, 0.5, 1.0]) + torch.tensor(0.25)
torch.manual_seed(0)
x = torch.randn(16, 8)
torch.jit.trace(M().eval(), x).save(d + "/const.pt")
torch.save({"inputs": x}, d + "/const-probes.pt")
PY
  local rc=0
  "$cli" run --model "$json/const.pt" --probes "$json/const-probes.pt" --device cuda --precision bf16 --outputs \
    --json "$json/const.json" -q || rc=$?
  [ "$rc" -le 1 ] || return "$rc"
  "$py" - "$json" <<'PY'
import json, sys, torch
d = sys.argv[1]
r = json.load(open(d + "/const.json"))
ref = torch.jit.load(d + "/const.pt", map_location="cuda")(torch.load(d + "/const-probes.pt")["inputs"].cuda()).cpu()
got = torch.tensor([[float(v) for v in row] for row in r["passes"][0]["outputs"]])
assert torch.allclose(got, ref, rtol=1e-5, atol=1e-6), (got - ref).abs().max()
print("figure: traced constants on cuda: fp32 pass as torch.jit.load(map_location=cuda), max diff",
      float((got - ref).abs().max()))
PY
}
train_cuda() {
  "$cli" train --model demo:transformer --data demo --steps 20 --device cuda --json "$json/train.json" -q
  "$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); s=r["summary"]; print("figure:", s["iterations"], "steps,", s["skipped"], "skipped, final scale", s["final_scale"])' "$json/train.json"
}
# every FP8 training recipe on the GPU (never run before): 3 steps each on cuda and on the CPU;
# the first step's AMP loss (before any update) agrees within 2 % (FP32 GEMM kernels differ by
# ulps, which can move an element across a rounding boundary), every loss finite
fp8_train_cuda() {
  local p dev
  for p in fp8 fp8-rowwise mxfp8 nvfp4 fp8-delayed; do
    for dev in cuda cpu; do
      "$cli" train --model demo:transformer --data demo --steps 3 --precision "$p" --no-scaler --device "$dev" \
        --no-db --json "$json/train-$p-$dev.json" -q || [ $? -eq 1 ]
    done
  done
  # train --fp8-all-gemms (never run on a GPU): demo:transformer's attention products trained in FP8 too
  for p in fp8 mxfp8 fp8-delayed; do
    for dev in cuda cpu; do
      "$cli" train --model demo:transformer --data demo --steps 3 --precision "$p" --fp8-all-gemms --no-scaler \
        --device "$dev" --no-db --json "$json/train-$p-all-$dev.json" -q || [ $? -eq 1 ]
    done
  done
  # train --rowwise-gw-hp (never run on a GPU): torchao's rowwise_with_gw_hp, its weight gradient in BF16
  for dev in cuda cpu; do
    "$cli" train --model demo:transformer --data demo --steps 3 --precision fp8-rowwise --rowwise-gw-hp --no-scaler \
      --device "$dev" --no-db --json "$json/train-fp8-rowwise-gwhp-$dev.json" -q || [ $? -eq 1 ]
  done
  "$py" - "$json" <<'PY'
import json, math, sys
worst = 0.0
for p in ("fp8", "fp8-rowwise", "mxfp8", "nvfp4", "fp8-delayed", "fp8-all", "mxfp8-all", "fp8-delayed-all",
          "fp8-rowwise-gwhp"):
    runs = {d: json.load(open(f"{sys.argv[1]}/train-{p}-{d}.json")) for d in ("cuda", "cpu")}
    losses = {d: [float(s["loss_amp"]) for s in r["steps"]] for d, r in runs.items()}
    assert all(math.isfinite(v) for l in losses.values() for v in l), (p, losses)
    rel = abs(losses["cuda"][0] - losses["cpu"][0]) / abs(losses["cpu"][0])
    print(p, "first loss cuda", losses["cuda"][0], "cpu", losses["cpu"][0], "rel", rel)
    assert rel < 0.02, (p, rel)
    worst = max(worst, rel)
print("figure: 5 recipes (3 with --fp8-all-gemms, rowwise_with_gw_hp) on cuda, first-step loss within", f"{worst:.2e}",
      "of the CPU's")
PY
}
# FP8 training of convolutions on the GPU (fp8 / fp8-delayed --fp8-all-gemms, never run; the
# convolution and its backward in IEEE FP32 there, training_conv, where cuDNN's default is TF32).
# A Conv1d model, one step on cuda and on the CPU: the AMP loss within 1e-3, the gradient norm
# within 1e-2 (the figures say how close; TF32 itself moves them by about 1e-4 and 1e-5 here, under
# the BF16 rounding of the convolution's output: this check catches a broken path, not TF32).
fp8_conv_train_cuda() {
  local p dev d=$json/conv-train
  mkdir -p "$d"
  cat > "$d/make.py" <<'PY'  # a file: torch.jit.script reads the class's source
import sys, torch
class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.c1 = torch.nn.Conv1d(8, 16, 3, padding=1)
        self.c2 = torch.nn.Conv1d(16, 16, 3, padding=1)
        self.head = torch.nn.Linear(16 * 32, 10)
    def forward(self, x):
        return self.head(torch.relu(self.c2(torch.relu(self.c1(x)))).flatten(1))
torch.jit.script(ConvNet().train()).save(sys.argv[1] + "/conv.pt")
g = torch.Generator().manual_seed(4)
torch.save({"inputs": torch.randn(64, 8, 32, generator=g) * 3, "labels": torch.randint(0, 10, (64,), generator=g)},
           sys.argv[1] + "/data.pt")
PY
  "$py" "$d/make.py" "$d"
  for p in fp8 fp8-delayed; do
    for dev in cuda cpu; do
      "$cli" train --model "$d/conv.pt" --data "$d/data.pt" --steps 1 --batch-size 64 --precision "$p" --fp8-all-gemms \
        --no-scaler --loss ce --device "$dev" --no-db --json "$d/$p-$dev.json" -q || [ $? -eq 1 ]
    done
  done
  "$py" - "$d" <<'PY'
import json, sys
worst = {"loss": 0.0, "grad_norm": 0.0}
for p in ("fp8", "fp8-delayed"):
    s = {dev: json.load(open(f"{sys.argv[1]}/{p}-{dev}.json"))["steps"][0] for dev in ("cuda", "cpu")}
    for key, tol in (("loss_amp", 1e-3), ("grad_norm", 1e-2)):
        a, b = float(s["cuda"][key]), float(s["cpu"][key])
        rel = abs(a - b) / abs(b)
        print(p, key, "cuda", a, "cpu", b, "rel", rel)
        assert rel < tol, (p, key, rel)
        worst["loss" if key == "loss_amp" else "grad_norm"] = max(worst["loss" if key == "loss_amp" else "grad_norm"], rel)
print("figure: Conv1d training, fp8 / fp8-delayed --fp8-all-gemms on cuda: loss within", f"{worst['loss']:.1e},",
      "gradient norm within", f"{worst['grad_norm']:.1e}", "of the CPU's")
PY
}
oracle_cuda() {
  local rc=0
  "$py" -c 'import numpy' 2>/dev/null || { echo "figure: numpy not installed (the oracle's dependency)"; return 77; }
  AMPSCOPE_CLI=$cli AMPSCOPE_TEST_DEVICE=cuda "$py" -W ignore tests/cli/test_oracle_run.py 2>&1 | tee "$json/oracle.txt" || rc=$?
  echo "figure: $(grep -a '^Ran ' "$json/oracle.txt")"
  return "$rc"
}
# torch.export programs on the GPU: the same bitwise equality with eager torch.autocast("cuda")
export_cuda() {
  local rc=0
  AMPSCOPE_CLI=$cli AMPSCOPE_TEST_DEVICE=cuda "$py" -W ignore tests/cli/test_export.py ExportedPrograms 2>&1 | tee "$json/export.txt" || rc=$?
  echo "figure: .pt2 on cuda: $(grep -a '^Ran ' "$json/export.txt") $(tail -1 "$json/export.txt")"
  return "$rc"
}
# the precision advisor on the GPU: a set found, verified by an accepted run, timed after it
advise_cuda() {
  local rc=0
  "$cli" advise --model demo:transformer --probes demo --device cuda --json "$json/advise.json" -q || rc=$?
  "$py" - "$json/advise.json" <<'PY' || rc=1
import json, sys
a = json.load(open(sys.argv[1]))
assert a["outcome"] in ("found", "already_accepted"), a["message"]
assert a["outcome"] == "already_accepted" or a["verified_verdict"] == "accepted", a
t = {(f["precision"], f["policy"]): f["median_ms"] for f in (a["timing"] or {}).get("figures", [])}
print(f"figure: {a['outcome']} {a['keep_fp32']} in {a['evaluations']} sets / {a['passes_used']} passes; ms {t}")
PY
  return "$rc"
}
# bench only after an accepted validation of the same policy: BF16, plain autocast, criteria
# the demo accepts (README: FP16 is rejected by design; bench has no FP32 regions).
bench_validated() {
  "$cli" run --model demo:transformer --probes demo --device cuda --precision bf16 --atol 0.1 --max-flips 40 \
    --json "$json/validation.json" -q || { echo "the BF16 validation run was not accepted"; return 1; }
  "$cli" bench --model demo:transformer --probes demo --device cuda --precision bf16 --batch-size 40 --json "$json/bench.json"
  "$py" - "$json/bench.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
assert b["validated"] is True, b["validated"]
assert "CUDA events" in b["timer"] and "caching allocator" in b["memory"], (b["timer"], b["memory"])
f = {x["precision"]: x for x in b["figures"]}
assert f["fp32"]["median_ms"] > 0 and f["bf16"]["median_ms"] > 0
print(f"figure: bf16 {f['bf16']['median_ms']:.3f} ms vs fp32 {f['fp32']['median_ms']:.3f} ms, "
      f"speed-up {f['bf16']['speedup']:.2f}, memory x{f['bf16']['memory_ratio']:.2f}")
PY
}

# Real FP8 GEMMs (torch._scaled_mm) beside the simulated fp8 / fp8-rowwise passes: on by default
# on an FP8 GPU; with torchao installed (.deps, pure Python), bitwise against its Float8Linear
# without emulate (tests/cli/test_fp8_real_gemm.py on cuda).
fp8_real_cuda() {
  local rc=0
  "$cli" run --model demo:transformer --probes demo --device cuda --precision fp8,fp8-rowwise --json "$json/fp8-real.json" -q || rc=$?
  [ "$rc" -le 1 ] || return "$rc"
  "$py" - "$json/fp8-real.json" <<'PY' || return 1
import json, sys
r = json.load(open(sys.argv[1]))
g = {p["precision"]: p.get("real_gemm") for p in r["passes"] if p["precision"].startswith("fp8")}
print(json.dumps(g, indent=1))
assert all(x and x["ran"] for x in g.values()), g
print("figure:", "; ".join(f"{k}: {x['differing']} scores / {x['decisions_differ']} decisions differ from simulated, "
                           f"real {x['seconds']:.4f} s" for k, x in g.items()))
PY
  if "$py" -c 'import torchao, numpy' 2>/dev/null; then
    local oracle=0
    AMPSCOPE_CLI=$cli AMPSCOPE_TEST_DEVICE=cuda "$py" -W ignore tests/cli/test_fp8_real_gemm.py 2>&1 | tee "$json/fp8-real.txt" || oracle=$?
    echo "figure: oracle $(grep -a '^Ran ' "$json/fp8-real.txt") $(tail -1 "$json/fp8-real.txt")"
    return "$oracle"
  fi
  # the real GEMMs ran, but nothing proved them torchao's: not a pass
  echo "figure: real GEMMs ran; torchao's oracle did not (not installed: tools/fetch-gpu-deps.sh fetches it)"
  return 77
}

check gpu-kernel gpu_kernel
check host-syncs host_syncs
check kernel-bandwidth kernel_bandwidth
check cpu-stats cpu_stats
check backend backend
check demo-story demo_story
check keep-fp32-embed keep_fp32_embed
check ts-constants torchscript_constants
check train-cuda train_cuda
check oracle-cuda oracle_cuda
check export-cuda export_cuda
check advise-cuda advise_cuda
check bench bench_validated
check fp8-real fp8_real_cuda
check fp8-train fp8_train_cuda
check fp8-conv-train fp8_conv_train_cuda
check fp8-all-gemms fp8_all_gemms_cuda

# run --fp8-all-gemms on the GPU (never run before): a program with a Conv1D-style addmm, a
# torch.matmul attention, a conv2d and a linear, fp8 and fp8-delayed (products and the
# convolution quantized, the convolution emulated in IEEE FP32, not cuDNN's TF32) and real FP8
# GEMMs beside fp8: every expected operand named, the real check ran with the batched products
# emulated, and the fp8 passes' scores against the same run on the CPU (FP32 GEMM kernels differ
# by ulps: a few BF16 scores may round apart; more than a quarter fails the check)
fp8_all_gemms_cuda() {
  "$py" - "$json" <<'PY'
import sys, torch
class M(torch.nn.Module):
    def __init__(s):
        super().__init__()
        s.conv = torch.nn.Conv2d(4, 64, 3, padding=1)
        s.w = torch.nn.Parameter(torch.randn(64, 64) * 0.1)
        s.b = torch.nn.Parameter(torch.randn(64) * 0.1)
        s.fc = torch.nn.Linear(64, 16)
    def forward(s, x):
        h = s.conv(x).flatten(2).transpose(1, 2)  # [N, 16, 64]
        h = torch.addmm(s.b, h.reshape(-1, 64), s.w).view(x.shape[0], 16, 64)
        a = torch.matmul(torch.softmax(torch.matmul(h, h.transpose(-1, -2)) * 0.125, -1), h)
        return s.fc(a.mean(1))
torch.manual_seed(0)
x = torch.randn(32, 4, 4, 4) * 3
m = M().eval()
torch.export.save(torch.export.export(m, (x,)), f"{sys.argv[1]}/allgemms.pt2")
torch.save({"inputs": x, "labels": m(x).argmax(1)}, f"{sys.argv[1]}/allgemms-probes.pt")
PY
  local dev
  for dev in cuda cpu; do
    "$cli" run --model "$json/allgemms.pt2" --probes "$json/allgemms-probes.pt" --device "$dev" --precision fp8,fp8-delayed \
      --fp8-all-gemms --fp8-real-gemm on --batch-size 32 --outputs --allow-nonfinite --no-db \
      --json "$json/allgemms-$dev.json" -q || [ $? -eq 1 ]
  done
  "$py" - "$json" <<'PY'
import json, sys
r = {d: json.load(open(f"{sys.argv[1]}/allgemms-{d}.json")) for d in ("cuda", "cpu")}
p = {d: {x["precision"]: x for x in r[d]["passes"]} for d in r}
ops = sorted({(o["module"], o["op"], o["operand"]) for o in p["cuda"]["fp8"]["fp8_operands"]})
print(ops)
want = {("conv", "aten::conv2d", "input"), ("conv", "aten::conv2d", "weight"), ("fc", "aten::linear", "input")}
assert want <= set(ops) and any(op == "aten::bmm" for _, op, _ in ops) and any(op == "aten::addmm" for _, op, _ in ops), ops
g = p["cuda"]["fp8"]["real_gemm"]
print({k: v for k, v in g.items() if k != "outputs"})
assert g["ran"] and "matrix products emulated" in g["kernel"], g
def flat(x): return [float(v) for row in x["outputs"] for v in row]
diff = {k: sum(a != b for a, b in zip(flat(p["cuda"][k]), flat(p["cpu"][k]))) for k in ("fp8", "fp8-delayed")}
n = len(flat(p["cpu"]["fp8"]))
print(diff, "of", n)
assert all(v <= n // 4 for v in diff.values()), diff
print(f"figure: products+conv quantized on cuda; scores differing from the CPU's: {diff} of {n}; real: {g['kernel']}")
PY
}

# one archive: the device tool brings back a few files from $OUT, not one per check
tar czf "$out_dir/gpu-check-json.tgz" -C "$json" . 2>/dev/null || true
log "== summary"
for line in "${summary[@]}"; do log "$line"; done
log "total: $((SECONDS - t_start)) s, $failed failed"
[ "$failed" -eq 0 ]
