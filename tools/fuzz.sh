#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the libFuzzer targets (preset `fuzz`: clang, ASan + UBSan) and runs them on their
# checked-in seed corpus (tests/fuzz/corpus/TARGET, written by tests/fuzz/make_corpus.py) and
# the inputs of defects found before (tests/fuzz/regressions/TARGET, kept by hand).
#   tools/fuzz.sh TARGET SECONDS       one target for SECONDS
#   tools/fuzz.sh all SECONDS          every target, one after the other, SECONDS each
#   tools/fuzz.sh --keep-going ...     fork mode: keep fuzzing after a finding, collect them all
#   tools/fuzz.sh list                 the targets
# Targets: probe_pt probe_csv criteria store import layer_chunk pt2 safetensors checkpoint (see tests/fuzz/CMakeLists.txt).
# New corpus entries go to build-fuzz/fuzz-work/TARGET/corpus (git-ignored, kept between runs),
# findings to build-fuzz/fuzz-work/TARGET/artifacts-TIME/ (crash-*, timeout-*, leak-*, oom-*).
# A hang is an input that runs longer than 10 s; an allocation above 2 GiB (or 4 GiB resident)
# is reported as out-of-memory. Exit status 1 on any crash, hang, leak or out-of-memory.
# Reproduce a finding: build-fuzz/tests/fuzz/fuzz_TARGET FILE (same environment as below).
# Environment: AMPSCOPE_BUILD_LOCK=FILE builds under `flock FILE`; CMAKE_BUILD_PARALLEL_LEVEL;
# AMPSCOPE_FUZZ_STRICT=1 also reports errors that are not the project's typed errors
# (tests/fuzz/fuzz_util.h); AMPSCOPE_FUZZ_NO_BUILD=1 uses the binaries as they are.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
targets=(probe_pt probe_csv criteria store import layer_chunk pt2 safetensors checkpoint)
keep_going=0
args=()
for a in "$@"; do
  case "$a" in
    --keep-going) keep_going=1 ;;
    -h|--help) sed -n '3,20p' "$0"; exit 0 ;;
    *) args+=("$a") ;;
  esac
done
if [ "${args[0]:-}" = list ]; then printf '%s\n' "${targets[@]}"; exit 0; fi
if [ ${#args[@]} -ne 2 ] || ! [[ "${args[1]}" =~ ^[0-9]+$ ]]; then
  echo "usage: tools/fuzz.sh [--keep-going] TARGET|all SECONDS   (targets: ${targets[*]})" >&2
  exit 2
fi
what=${args[0]} seconds=${args[1]}
if [ "$what" = all ]; then
  run=("${targets[@]}")
elif printf '%s\n' "${targets[@]}" | grep -qx -- "$what"; then
  run=("$what")
else
  echo "fuzz.sh: unknown target '$what' (expected all or one of: ${targets[*]})" >&2
  exit 2
fi

build=build-fuzz
if [ "${AMPSCOPE_FUZZ_NO_BUILD:-0}" != 1 ]; then
  bash tools/bootstrap.sh --no-qt
  lock=()
  [ -n "${AMPSCOPE_BUILD_LOCK:-}" ] && lock=(flock "$AMPSCOPE_BUILD_LOCK")
  echo "[fuzz] configure + build (preset fuzz)"
  if ! [ -f "$build/CMakeCache.txt" ]; then "${lock[@]}" cmake --preset fuzz >/dev/null; fi
  "${lock[@]}" cmake --build --preset fuzz
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:handle_abort=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$here/tests/fuzz/lsan.supp:print_suppressions=0}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# Scratch files of the targets (databases written per input) in memory when possible.
[ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] && export TMPDIR=/dev/shm

status=0
summary=()
for t in "${run[@]}"; do
  bin=$build/tests/fuzz/fuzz_$t
  [ -x "$bin" ] || { echo "fuzz.sh: $bin missing (build failed?)" >&2; exit 2; }
  work=$build/fuzz-work/$t
  art=$work/artifacts-$(date +%Y%m%d-%H%M%S)
  mkdir -p "$work/corpus" "$art"
  log=$art/fuzz.log
  opts=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -malloc_limit_mb=2048
        -print_final_stats=1 -artifact_prefix="$art/")
  [ -f "tests/fuzz/$t.dict" ] && opts+=(-dict="tests/fuzz/$t.dict")
  [ $keep_going = 1 ] && opts+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  echo "[fuzz] $t for ${seconds} s (log $log)"
  seeds=("tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regressions/$t" ] && seeds+=("tests/fuzz/regressions/$t")
  start=$SECONDS
  set +e
  timeout --signal=KILL $((seconds + 300)) "$bin" "${opts[@]}" "$work/corpus" "${seeds[@]}" >"$log" 2>&1
  rc=$?
  set -e
  count() { find "$art" -maxdepth 1 -name "$1-*" | wc -l; }
  crashes=$(count crash) hangs=$(count timeout) leaks=$(count leak) ooms=$(count oom)
  [ $rc = 137 ] && hangs=$((hangs + 1))  # libFuzzer itself stuck past its own limit
  # A sanitizer report of a non-fuzzing phase (e.g. a leak at exit) writes no artifact.
  if [ $rc != 0 ] && [ $((crashes + hangs + leaks + ooms)) = 0 ]; then
    if grep -q "LeakSanitizer" "$log"; then leaks=1; else crashes=1; fi
  fi
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
  [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#' || true)
  took=$((SECONDS - start))
  corpus=$(find "$work/corpus" -type f | wc -l)
  line=$(printf '%-12s %10s executions %6s s   crashes %s  hangs %s  leaks %s  out-of-memory %s   (new corpus files: %s)' \
         "$t" "${execs:-?}" "$took" "$crashes" "$hangs" "$leaks" "$ooms" "$corpus")
  summary+=("$line")
  if [ $((crashes + hangs + leaks + ooms)) != 0 ]; then
    status=1
    echo "[fuzz] $t: FINDINGS in $art:"
    ls "$art" | grep -v '^fuzz.log$' | sed 's/^/  /' || true
    grep -m1 -A30 -E '^==[0-9]+==ERROR|^==FUZZ FINDING==|ERROR: libFuzzer|runtime error:|deadly signal' "$log" | head -60 || true
  else
    rm -rf "$art"  # nothing found: the log is not kept
  fi
done
echo "[fuzz] summary"
printf '  %s\n' "${summary[@]}"
exit $status
