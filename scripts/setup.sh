#!/usr/bin/env bash
# Installs the Debian packages clnet needs when any is missing (idempotent), then configures
# and builds into ./build. As root it uses apt-get directly, otherwise sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential meson ninja-build pkg-config python3
      ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo libclblast-dev
      zlib1g-dev dataset-fashion-mnist openmpi-bin libopenmpi-dev bible-kjv
      clang libclang-rt-14-dev
      oclgrind libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata python3-onnx) # clang: scripts/fuzz.sh (libFuzzer); oclgrind: tests/ops/oclgrind.sh; protobuf-c, onnx: the ONNX reader, its node tests and checker
# PyTorch and torchvision (Debian's pinned 1.13 / 0.14): the ONNX test of the torchvision
# families exports them at test time (tests/onnx/make_torchvision.py), the benchmark
# comparison and the golden fixtures use PyTorch. CLNET_WITH_TORCH=0 leaves them out (about
# 1 GB; that test is then skipped).
[ "${CLNET_WITH_TORCH:-1}" = 1 ] && PKGS+=(python3-torch python3-torchvision python3-numpy)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The text corpus of the byte-level language model: the King James Bible as plain text,
# written once (4.4 MB) where 'clnet train --text' examples and tests look for it.
CORPUS_DIR=${CLNET_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/clnet}
if [ ! -s "$CORPUS_DIR/kjv.txt" ] && command -v bible >/dev/null; then
  mkdir -p "$CORPUS_DIR"
  bible -f 'Gen1:1-Rev22:21' > "$CORPUS_DIR/kjv.txt.tmp" && mv "$CORPUS_DIR/kjv.txt.tmp" "$CORPUS_DIR/kjv.txt"
  echo "setup: wrote $CORPUS_DIR/kjv.txt"
fi

BUILD=${CLNET_BUILD_DIR:-build}
if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" ${CLNET_MESON_ARGS:-} >/dev/null
fi
ninja -C "$BUILD" >/dev/null
echo "setup: built $BUILD/tools/clnet"
