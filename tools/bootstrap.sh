#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sets up a fresh Debian 12 machine for building and testing ampscope.
# Idempotent: a second run checks, finds everything present and returns quickly.
#   - Debian packages (compiler, CMake, Ninja, ccache, Qt 6, SQLite, GoogleTest,
#     Google Benchmark, nlohmann-json, CLI11, Xvfb)
#   - a project-local Python environment (.venv, git-ignored) holding the PyPI
#     torch==2.11.0 wheel: its LibTorch is what CMake links, its Python torch is the
#     test oracle; transformers, timm and torchvision for the tests' language and vision
#     programs (random weights, no hub access).
# Options: --no-apt (skip Debian packages), --no-qt (skip Qt and Xvfb, e.g. GPU servers).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TORCH_VERSION=${AMPSCOPE_TORCH_VERSION:-2.11.0}
VENV=${AMPSCOPE_VENV:-$here/.venv}
with_apt=1 with_qt=1
for a in "$@"; do
  case "$a" in
    --no-apt) with_apt=0 ;;
    --no-qt) with_qt=0 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "bootstrap: unknown option '$a' (expected --no-apt, --no-qt)" >&2; exit 2 ;;
  esac
done
say() { echo "[bootstrap] $*"; }

pkgs=(build-essential cmake ninja-build ccache pkg-config git python3 python3-venv python3-pip
      libsqlite3-dev sqlite3 libgtest-dev libgmock-dev googletest libbenchmark-dev
      nlohmann-json3-dev libcli11-dev libssl-dev libcsv-dev hipcc
      clang libclang-rt-14-dev clang-format time)  # clang + libFuzzer runtime: tools/fuzz.sh; clang-format: lint.code; time: bench/build_time.sh
[ $with_qt = 1 ] && pkgs+=(qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev libgl-dev xvfb xauth)

if [ $with_apt = 1 ]; then
  missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    say "Debian packages: all ${#pkgs[@]} present"
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  say "creating Python environment $VENV"
  python3 -m venv "$VENV"
fi
have=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true)
if [ "${have%%+*}" != "$TORCH_VERSION" ]; then
  say "installing torch==$TORCH_VERSION into $VENV (large download, once)"
  # torch with its CUDA libraries takes ~5 GiB installed; pip holds the ~3.5 GiB of wheels beside
  # it while installing and keeps them in its cache afterwards. Where the disk is short, say so
  # before pip fails half-way, and keep pip's cache out of it.
  free_gib() { df -Pk "$1" 2>/dev/null | awk 'NR==2 { printf "%d", $4 / 1048576 }'; }
  venv_free=$(free_gib "$VENV"); tmp_free=$(free_gib "${TMPDIR:-/tmp}")
  pip_opts=()
  if [ "${venv_free:-0}" -lt 12 ] || [ "${tmp_free:-0}" -lt 12 ]; then
    say "little free disk: ${venv_free:-?} GiB under $VENV, ${tmp_free:-?} GiB under ${TMPDIR:-/tmp}" \
        "(torch needs ~9 GiB while installing); installing without pip's cache"
    pip_opts+=(--no-cache-dir)
  fi
  if [ "${venv_free:-0}" -lt 6 ]; then
    echo "bootstrap: not enough free disk for torch under $VENV: ${venv_free:-?} GiB free, ~6 GiB" \
         "needed; free space on that disk and run this again" >&2
    exit 1
  fi
  "$VENV/bin/python" -m pip install -q "${pip_opts[@]}" --upgrade pip
  "$VENV/bin/python" -m pip install -q "${pip_opts[@]}" "torch==$TORCH_VERSION" numpy
else
  say "torch $have present in $VENV"
fi
"$VENV/bin/python" -c 'import lizard' 2>/dev/null || "$VENV/bin/python" -m pip install -q lizard  # lint.code: function lengths
# Test-only (tests/cli/test_lm.py): programs exported from the libraries people use, random weights,
# no hub access. torchvision 0.26.0 is the release matching torch 2.11.
if ! "$VENV/bin/python" -c 'import transformers, timm, torchvision, safetensors' 2>/dev/null; then
  say "installing transformers, timm, torchvision, safetensors into $VENV (tests only)"
  "$VENV/bin/python" -m pip install -q "transformers==5.24.0" "timm==1.0.31" "torchvision==0.26.0" "safetensors==0.8.0"
fi
# Test-only (replay and capture tests): checkpoints written by the real trainers.
if ! "$VENV/bin/python" -c 'import pytorch_lightning, accelerate' 2>/dev/null; then
  say "installing pytorch-lightning, accelerate into $VENV (tests only)"
  "$VENV/bin/python" -m pip install -q "pytorch-lightning==2.6.6" "accelerate==1.15.0"
fi
# Test-only (engine fp8 tests): torchao's float8 / MX / NVFP4 quantizers are the oracle of the
# engine's FP8 and block-scaled formats (pure Python on CPU; its compiled extensions are not used).
# The proofs are against 0.18.0 exactly (its rounding and scale rules): another version is replaced.
if ! "$VENV/bin/python" -c 'import torchao, sys; sys.exit(torchao.__version__ != "0.18.0")' 2>/dev/null; then
  say "installing torchao into $VENV (tests only)"
  "$VENV/bin/python" -m pip install -q "torchao==0.18.0"
fi
"$VENV/bin/python" -c 'import pytest' 2>/dev/null || "$VENV/bin/python" -m pip install -q "pytest==9.2.0"  # test-only: tests/python (capture package)
"$VENV/bin/python" -c 'import torch,numpy; print("[bootstrap] torch", torch.__version__, "cmake prefix", torch.utils.cmake_prefix_path)'
