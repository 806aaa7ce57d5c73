#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run HERE (a machine with Debian's registry): downloads the Debian packages that the GPU
# machine lacks (SQLite, CLI11, nlohmann-json, libcsv, OpenSSL (with its runtime, which the
# -dev symlinks point at) and GoogleTest), and torchao's wheel, into
# .deps/ (git-ignored), for tools/gpu-check.sh to unpack there. Carry .deps with the tree.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p .deps /tmp/amd64-lists/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64-lists'
apt-get $o update -qq
(cd .deps && apt-get $o download libsqlite3-dev libsqlite3-0 libcli11-dev nlohmann-json3-dev libcsv-dev libcsv3 \
  libssl-dev libssl3 libgtest-dev libgmock-dev googletest >/dev/null)
# torchao (the FP8 oracle of tools/gpu-check.sh's fp8-real check), without dependencies: the GPU
# machine has torch; numpy and the rest come with it or are not needed by torchao.float8. Its
# python3 is 3.12 (the device library's KINDS.md); torchao's wheel is abi3 (cp310 and later).
mkdir -p .deps/wheels
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d .deps/wheels torchao==0.18.0 ||
  echo "torchao not fetched: the fp8-real check runs without its oracle"
ls -1 .deps/*.deb .deps/wheels/*.whl 2>/dev/null
