#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the release preset, runs every benchmark once and prints each figure beside its
# named reference with the ratio and the target.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target ampscope_bench >/dev/null
out=$(mktemp)
build-release/bench/ampscope_bench --benchmark_format=json --benchmark_out="$out" --benchmark_out_format=json \
  --benchmark_min_time=0.5 "$@" >/dev/null
"${AMPSCOPE_PYTHON:-.venv/bin/python}" bench/report.py "$out"
