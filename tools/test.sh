#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sets up (tools/bootstrap.sh), builds and runs every test through CTest.
#   tools/test.sh            dev preset (warnings as errors), all tests
#   tools/test.sh --asan     asan preset (AddressSanitizer + UBSan, no GUI)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
preset=dev
for a in "$@"; do
  case "$a" in
    --asan) preset=asan ;;
    *) echo "test.sh: unknown option '$a' (expected --asan)" >&2; exit 2 ;;
  esac
done
bash tools/bootstrap.sh
extra=()
# Without Qt (e.g. bootstrap --no-qt) the GUI is left out instead of failing the configure.
if [ "$preset" = dev ] && ! [ -f /usr/lib/x86_64-linux-gnu/cmake/Qt6OpenGL/Qt6OpenGLConfig.cmake ]; then
  extra+=(-DAMPSCOPE_BUILD_UI=OFF)
fi
echo "[test] configure ($preset)"
cmake --preset "$preset" "${extra[@]}" >/dev/null
echo "[test] build ($preset)"
cmake --build --preset "$preset"
echo "[test] ctest ($preset)"
export QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}
ctest --preset "$preset"
