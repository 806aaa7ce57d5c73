#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build time of the dev preset (what tools/test.sh builds): from clean with a cold compiler
# cache (an empty ccache of its own, in a fresh build tree), then the dev loop: one engine
# file changed (ccache off, so that it really recompiles) to a built ampscope-cli. Prints one
# JSON object (wall and CPU seconds, jobs) for bench/report.py. Minutes on 2 cores.
#   bench/build_time.sh [ENGINE_FILE]     default engine/src/run/passes.cpp
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
file=${1:-engine/src/run/passes.cpp}
[ -f "$file" ] || { echo "build_time.sh: no such file '$file'" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CCACHE_DIR=$tmp/ccache
extra=()
if ! [ -f /usr/lib/x86_64-linux-gnu/cmake/Qt6OpenGL/Qt6OpenGLConfig.cmake ]; then extra+=(-DAMPSCOPE_BUILD_UI=OFF); fi
cmake --preset dev -B "$tmp/build" "${extra[@]}" >/dev/null
# wall and CPU (user + system of every child) of one command, in seconds
timed() {
  local out=$1; shift
  /usr/bin/time -f '%e %U %S' -o "$out" "$@" >/dev/null
}
timed "$tmp/clean" cmake --build "$tmp/build"
touch "$file"
CCACHE_DISABLE=1 timed "$tmp/touch" cmake --build "$tmp/build" --target ampscope-cli
awk -v f="$file" -v cpus="$(nproc)" 'NR == FNR { cw = $1; cc = $2 + $3; next } { tw = $1; tc = $2 + $3 }
  END { printf "{\"build_clean_wall_s\": %.1f, \"build_clean_cpu_s\": %.1f, \"build_touch_wall_s\": %.1f, \"build_touch_cpu_s\": %.1f, \"build_touch_file\": \"%s\", \"build_cpus\": %d}\n", cw, cc, tw, tc, f, cpus }' \
  "$tmp/clean" "$tmp/touch"
