#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One-shot GPU check, on a machine with an NVIDIA GPU, Python torch (LibTorch), nvcc, CMake
# and Ninja but no Qt and no network. Prepare here: tools/fetch-gpu-deps.sh (fills .deps/),
# then run there from the repository root, carrying .deps:  bash tools/gpu-check.sh
# It builds engine + storage + CLI + tests with the UI off, runs the GPU tests (statistics
# kernel vs the CPU kernel), the engine tests, a CUDA demo run and `ampscope-cli bench`,
# and writes a report to $OUT/gpu-check.txt (or ./gpu-check.txt). Fits one 10-minute call
# on 16 cores.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-.}/gpu-check.txt
: > "$out"
log() { echo "$*" | tee -a "$out"; }
run() { log "\$ $*"; "$@" 2>&1 | tee -a "$out"; return "${PIPESTATUS[0]}"; }

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
log "== machine"; run nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
run "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
log "== configure + build (UI off)"
t0=$(date +%s)
run cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DAMPSCOPE_BUILD_UI=OFF -DAMPSCOPE_BUILD_BENCH=ON \
  -DAMPSCOPE_HIP_CHECK=OFF -DAMPSCOPE_PYTHON="$py" -DTORCH_CUDA_ARCH_LIST=9.0 -DCMAKE_CUDA_ARCHITECTURES=90 || exit 1
run cmake --build build-gpu -j"$(nproc)" --target ampscope-cli engine_tests gpu_tests core_tests ampscope_bench || exit 1
log "build: $(( $(date +%s) - t0 )) s"
log "== GPU statistics kernel vs CPU kernel"; run build-gpu/tests/gpu_tests
log "== engine tests"; run build-gpu/tests/engine_tests --gtest_brief=1
log "== core tests"; run build-gpu/tests/core_tests --gtest_brief=1
cli=build-gpu/app/ampscope-cli
export AMPSCOPE_DB=$PWD/build-gpu/gpu-check.sqlite
log "== backend"; run $cli backend --device cuda
log "== demo story on CUDA"; run $cli run --model demo:transformer --probes demo --device cuda --layers
log "== GradScaler training on CUDA"; run $cli train --model demo:transformer --data demo --steps 20 --device cuda
log "== oracle: Python autocast on CUDA vs ampscope"
AMPSCOPE_CLI=$cli AMPSCOPE_TEST_DEVICE=cuda run "$py" -W ignore tests/cli/test_oracle_run.py
log "== bench (validated by a tolerant run on CUDA)"
run $cli run --model demo:transformer --probes demo --device cuda --atol 1 --rtol 1 --max-flips 100 --allow-nonfinite -q
run $cli bench --model demo:transformer --probes demo --device cuda --batch-size 40
log "== statistics kernel bandwidth vs device-to-device copy"
run "$py" - <<'PY'
import ctypes, time, torch
x = torch.randn(64 * 2**20 // 4, device="cuda")
y = torch.empty_like(x)
torch.cuda.synchronize()
for _ in range(3): y.copy_(x)
torch.cuda.synchronize(); t0 = time.perf_counter()
for _ in range(20): y.copy_(x)
torch.cuda.synchronize(); copy = (time.perf_counter() - t0) / 20
print(f"device-to-device copy of 64 MiB: {copy*1e3:.3f} ms ({2*x.numel()*4/copy/1e9:.0f} GB/s)")
PY
log "done"
