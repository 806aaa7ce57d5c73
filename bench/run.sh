#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the release preset, runs every benchmark once and prints each figure beside its
# named reference with the ratio and the target.
#   bench/run.sh [--build] [--lm] [ampscope_bench flags...]
#     --build  also the build times (bench/build_time.sh: dev preset from clean with a cold
#              compiler cache, and one engine file changed to a built CLI; minutes)
#     --lm     also the GPT-2-small figures (bench/lm_bench.py: instrumented/plain pass in FP32,
#              BF16 and FP16, CPU-time medians of 6 interleaved repetitions; peak RSS; the
#              simulated FP8 and block-scaled passes against plain BF16; minutes)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
with_build=0 with_lm=0 pass=()
for a in "$@"; do
  case "$a" in
    --build) with_build=1 ;;
    --lm) with_lm=1 ;;
    *) pass+=("$a") ;;
  esac
done
set -- "${pass[@]+"${pass[@]}"}"
cmake --preset release >/dev/null
cmake --build --preset release --target ampscope_bench ampscope-cli >/dev/null
cmake --build --preset release --target ampscope ampscope_bench_ui 2>/dev/null >/dev/null || true
py=${AMPSCOPE_PYTHON:-.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export AMPSCOPE_GUI_FIXTURE=$tmp/gui.sqlite
build-release/bench/ampscope_bench --benchmark_format=json --benchmark_out="$tmp/bench.json" --benchmark_out_format=json \
  --benchmark_min_time=0.5 --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true "$@" >/dev/null
# Python forward hooks (what a user writes) vs ampscope's instrumented pass, same model and probes
"$py" bench/hooks_baseline.py build-release/app/ampscope-cli > "$tmp/hooks.json"
# GUI: cold start to the first painted run view, offscreen; the fixture run has 10k samples, 5k layer rows
gui=build-release/app/ampscope
if [ -x "$gui" ]; then
  start=$(date +%s%N)
  QT_QPA_PLATFORM=offscreen "$gui" "$AMPSCOPE_GUI_FIXTURE" --screenshot "$tmp/gui.png" >/dev/null 2>&1
  end=$(date +%s%N)
  echo "{\"gui_first_paint_s\": $(( (end - start) / 1000000 ))e-3}" > "$tmp/gui.json"
  # smoothness: repaint of every view of the same run, 20 frames each
  QT_QPA_PLATFORM=offscreen "$gui" "$AMPSCOPE_GUI_FIXTURE" --frame-times "$tmp/frames-raw.json" >/dev/null 2>&1 || true
  [ -s "$tmp/frames-raw.json" ] && "$py" -c "import json,sys; print(json.dumps({'frames': json.load(open(sys.argv[1]))}))" \
    "$tmp/frames-raw.json" > "$tmp/frames.json"
fi
if [ $with_build = 1 ]; then bash bench/build_time.sh > "$tmp/build.json"; fi
if [ $with_lm = 1 ]; then
  "$py" bench/lm_bench.py build-release/app/ampscope-cli --observer --repeats 6 | tail -1 > "$tmp/lm_observer.json"
  "$py" bench/lm_bench.py build-release/app/ampscope-cli --rss-only | tail -1 > "$tmp/lm_rss.json"
  "$py" bench/lm_bench.py build-release/app/ampscope-cli --fp8 --repeats 6 | tail -1 > "$tmp/lm_fp8.json"
fi
"$py" bench/report.py "$tmp/bench.json" "$tmp/hooks.json" "$tmp/gui.json" "$tmp/frames.json" "$tmp/build.json" \
  "$tmp/lm_observer.json" "$tmp/lm_rss.json" "$tmp/lm_fp8.json"
# GUI: a training run shown live (heartbeat, UI CPU per step at 500/1000/2000 steps; bench/README.md)
[ -x build-release/bench/ampscope_bench_ui ] && QT_QPA_PLATFORM=offscreen build-release/bench/ampscope_bench_ui 2>/dev/null | grep BM_ || true
