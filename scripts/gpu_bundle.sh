#!/usr/bin/env bash
# Makes a directory that runs the GPU check (scripts/gpu_check.sh) on a machine that has a GPU
# and its vendor's OpenCL driver but not this checkout, a compiler or a network:
#   gpu_check.sh            the check itself (it finds everything else beside it)
#   bin/clnet, bin/test_ops, bin/generate_speed
#                           clnet's binaries (release build, no MPI: nothing beyond the below)
#   lib/libclnet.so*        the library bin/clnet links
#   debs/*.deb              Debian's OpenCL ICD loader (ocl-icd-libopencl1), CLBlast
#                           (libclblast1), protobuf-c (libprotobuf-c1, the ONNX reader's) and
#                           the OpenMP runtime (libgomp1), which the check
#                           unpacks into its own directory: nothing is installed
#   models/, data/          the seed CNN, the ViT, the char-GPT and Fashion-MNIST
#   tools/, golden/         the PyTorch comparisons (torch_gpu.py, torch_transformers.py and
#                           the models it imports) and the reports
# Copy the directory (or --tar's archive) to the GPU machine and run ./gpu_check.sh there.
#
# usage: gpu_bundle.sh [--out DIR] [--build DIR] [--debs DIR] [--tar]
#   --out DIR    the bundle (default clnet-gpu-bundle; an existing one is replaced)
#   --build DIR  take the binaries from this meson build instead of configuring build-bundle
#   --debs DIR   take the .deb files from DIR instead of apt-get download (offline)
#   --tar        also write DIR.tar.gz
set -euo pipefail
out=clnet-gpu-bundle build="" debs="" tar=0
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    --debs) debs=${2:?}; shift 2 ;;
    --tar) tar=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_bundle: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
# Paths are the caller's; the rest is relative to the checkout.
out=$(realpath -m "$out")
[ -z "$build" ] || build=$(realpath -m "$build")
[ -z "$debs" ] || debs=$(realpath -m "$debs")
cd "$(dirname "$0")/.."
root=$(pwd)
pkgs=(ocl-icd-libopencl1 libclblast1 libprotobuf-c1 libgomp1)
data=/usr/share/datasets/fashion-mnist

if [ -z "$build" ]; then
    build=build-bundle
    [ -f "$build/build.ninja" ] || meson setup "$build" -Dbuildtype=release -Dmpi=disabled -Dnative=false >/dev/null
    ninja -C "$build" tools/clnet tests/ops/test_ops tools/generate_speed >/dev/null
fi
for f in "$build/tools/clnet" "$build/tests/ops/test_ops" "$build/tools/generate_speed"; do
    [ -x "$f" ] || { echo "gpu_bundle: $f is missing (build it, or leave out --build)" >&2; exit 1; }
done
if ldd "$build/tools/clnet" | grep -q libmpi; then
    echo "gpu_bundle: warning: $build links Open MPI, which the GPU machine then needs too (the default build leaves it out)" >&2
fi

rm -rf "$out"
mkdir -p "$out"/{bin,lib,debs,models,data,tools,golden}
cp "$build/tools/clnet" "$build/tests/ops/test_ops" "$build/tools/generate_speed" "$out/bin/"
find "$build" -maxdepth 1 -name 'libclnet.so*' ! -type d -exec cp -P {} "$out/lib/" \;
cp scripts/gpu_check.sh "$out/"
cp tools/bench/torch_gpu.py tools/bench/gpu_report.py tools/bench/torch_transformers.py \
    tools/bench/precision_report.py "$out/tools/"
cp tools/golden/torch_models.py "$out/golden/"
cp models/seed_cnn.net models/vit_fashion.net models/char_gpt.net "$out/models/"
cp "$data"/*-ubyte.gz "$out/data/" || { echo "gpu_bundle: Fashion-MNIST is missing ($data): ./scripts/setup.sh installs it" >&2; exit 1; }

# The .deb files: from --debs, else apt's cache, else apt-get download.
for p in "${pkgs[@]}"; do
    arch=$(dpkg --print-architecture)
    for dir in "$debs" /var/cache/apt/archives; do
        [ -n "$dir" ] || continue
        f=$(ls "$dir/${p}"_*_"$arch".deb 2>/dev/null | sort -V | tail -n 1 || true)
        [ -n "$f" ] && { cp "$f" "$out/debs/"; break; }
    done
    if ! compgen -G "$out/debs/${p}_*.deb" >/dev/null; then
        [ -z "$debs" ] || { echo "gpu_bundle: no ${p}_*_$arch.deb in $debs" >&2; exit 1; }
        (cd "$out/debs" && apt-get download -qq "$p" >/dev/null 2>&1) ||
            { echo "gpu_bundle: cannot get $p (apt-get download failed; give --debs DIR)" >&2; exit 1; }
    fi
done

cat >"$out/README.txt" <<EOF
clnet GPU check bundle, made $(date -u +%Y-%m-%d) from $(git -C "$root" describe --always --dirty 2>/dev/null || echo "a checkout")
on $(. /etc/os-release && echo "$PRETTY_NAME") ($(uname -m)).

On a machine with a GPU and its vendor's OpenCL driver (for NVIDIA: the driver's
libnvidia-opencl.so.1), run:

    ./gpu_check.sh [--steps N] [--tune] [--out DIR]

It unpacks the .deb files of debs/ into its output directory (nothing is installed), registers
the machine's OpenCL drivers through .icd files in a private OCL_ICD_VENDORS directory, lists the
devices, runs the op harness on every GPU, runs clnet bench on the GPUs and the CPU devices,
runs the same CNN in PyTorch where it has CUDA or ROCm, and prints the CPU-vs-GPU table and
clnet against PyTorch on the same GPU. ./gpu_check.sh --help says more.

The binaries need a C library at least as new as the build machine's
($(ldd --version | head -n 1)).

Contents: $(cd "$out" && echo bin/* debs/*)
EOF
echo "gpu_bundle: wrote $out ($(du -sh "$out" | cut -f1))"
if [ "$tar" = 1 ]; then
    tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
    echo "gpu_bundle: wrote $out.tar.gz"
fi
