#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sets up, builds and runs the main job: the GUI on the built-in demo when a display is
# present and the GUI is built; otherwise it says so and runs the headless demo.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
bash tools/bootstrap.sh
cmake --preset release >/dev/null
cmake --build --preset release
gui=build-release/app/ampscope
if [ -x "$gui" ] && { [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; }; then
  # records a demo run on first start so that every view has data
  exec "$gui" --demo "$@"
fi
if [ -x "$gui" ]; then
  echo "[demo] no display (DISPLAY/WAYLAND_DISPLAY unset): running the headless demo instead of the GUI"
else
  echo "[demo] the GUI is not built on this machine: running the headless demo"
fi
cli=build-release/app/ampscope-cli
set +e
"$cli" run --model demo:transformer --probes demo --layers
rc=$?
set -e
echo "[demo] ampscope-cli exited $rc (1 = an AMP pass was rejected by the criteria, as the demo story expects)"
"$cli" train --model demo:transformer --data demo --steps 12 | sed -n '1,8p'
"$cli" list --limit 5
"$cli" run --model demo:transformer --probes demo --precision fp16 --keep-fp32 embed -q --json - \
  | "${AMPSCOPE_VENV:-.venv}/bin/python" -c 'import json,sys; r=json.load(sys.stdin); p=r["passes"][1]; print("[demo] re-run with embed kept in FP32: fp16 non-finite samples:", len(p["nonfinite_samples"]), "- verdict", r["verdict"])' || true
