#!/usr/bin/env bash
# One command on any machine with an OpenCL GPU: lists the devices, runs the op harness on every
# GPU, runs `clnet bench` on every GPU and every CPU device, runs the same seed CNN in PyTorch
# where it has CUDA or ROCm, and prints the CPU-vs-GPU speed-up table and clnet against PyTorch
# on the same GPU. Then, on each GPU (issue 17): training speed and peak memory of the seed CNN
# (batch 64) and the ViT (batch 256) in fp32, bf16 and fp16, the ViT in PyTorch on the same GPU
# (fp32 and autocast), and generation with and without the key/value cache. Without a GPU the
# GPU steps say "no GPU" and the rest still runs.
#
# Runs from a checkout (after ./scripts/setup.sh) or from a bundle made by scripts/gpu_bundle.sh
# (binaries, model, Fashion-MNIST, and the .deb files of the OpenCL ICD loader and CLBlast,
# unpacked here into a private directory: no root, no network, no compiler). The GPU's OpenCL
# driver is the machine's own: every driver library found on the system (libnvidia-opencl.so.1,
# ROCm's libamdocl64.so, Intel's libigdrcl.so, Mesa's, POCL's) is registered through an .icd
# file in a private directory named by OCL_ICD_VENDORS, next to the system's own .icd files.
#
# usage: gpu_check.sh [--steps N] [--out DIR] [--tune] [--limit N] [--ops LIST] [--stages LIST]
#   --steps N  timed training steps per device for clnet bench and PyTorch (default 100)
#   --limit N  training images of each precision and profile run (default 16384; the precision
#              runs twice, the second quoted)
#   --out DIR  logs, JSON and the tables (default gpu-check-YYYYmmdd-HHMMSS)
#   --tune     tune each GPU's GEMM before the bench (clnet tune: minutes, cached per device and
#              driver); with the profile stage, the profiles are taken again after it
#   --ops LIST the op harness checks these ops only (test_ops --op LIST; default all)
#   --stages LIST  comma-separated, in this order whatever the order given: harness, profile,
#              bench, torch, precision, torchvit, generate (default all but profile)
# Environment: CLNET_VENDOR_LIB=/path/to/libOpenCLdriver.so registers one more driver library;
# CLNET_TUNE_TIMEOUT bounds each device's tuning in seconds (default 600);
# CLNET_BUILD_DIR picks the build of a checkout (default build).
# Exit status: 0 when every step that could run passed (no GPU is not a failure), else 1.
set -uo pipefail

steps=100 out="" tune=0 limit=16384 ops="" stages=harness,bench,torch,precision,torchvit,generate
while [ $# -gt 0 ]; do
    case "$1" in
    --steps) steps=${2:?--steps needs a number}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --tune) tune=1; shift ;;
    --limit) limit=${2:?--limit needs a number}; shift 2 ;;
    --stages) stages=${2:?--stages needs a list}; shift 2 ;;
    --ops) ops=${2:?--ops needs a list}; shift 2 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$steps" in '' | *[!0-9]* | 0) echo "gpu_check: --steps wants a positive number, not '$steps'" >&2; exit 2 ;; esac
for st in ${stages//,/ }; do
    case "$st" in harness | profile | bench | torch | precision | torchvit | generate) ;;
    *) echo "gpu_check: unknown stage '$st' (harness, profile, bench, torch, precision, torchvit, generate)" >&2; exit 2 ;;
    esac
done
want() { [[ ",$stages," == *",$1,"* ]]; }
case "$limit" in '' | *[!0-9]* | 0) echo "gpu_check: --limit wants a positive number, not '$limit'" >&2; exit 2 ;; esac

here=$(cd "$(dirname "$0")" && pwd)
if [ -x "$here/bin/clnet" ]; then # a bundle
    clnet=$here/bin/clnet test_ops=$here/bin/test_ops model=$here/models/seed_cnn.net
    gen_speed=$here/bin/generate_speed models=$here/models
    data=$here/data tools=$here/tools debs=$here/debs
    export LD_LIBRARY_PATH="$here/lib:${LD_LIBRARY_PATH:-}" # bin/clnet links lib/libclnet.so
else # a checkout: scripts/ beside the build
    root=$(dirname "$here")
    build=${CLNET_BUILD_DIR:-$root/build}
    case "$build" in /*) ;; *) build=$root/$build ;; esac
    clnet=$build/tools/clnet test_ops=$build/tests/ops/test_ops model=$root/models/seed_cnn.net
    gen_speed=$build/tools/generate_speed models=$root/models
    data=/usr/share/datasets/fashion-mnist tools=$root/tools/bench debs=""
fi
for f in "$clnet" "$test_ops"; do
    [ -x "$f" ] || { echo "gpu_check: $f is missing: run ./scripts/setup.sh (or use a bundle from scripts/gpu_bundle.sh)" >&2; exit 1; }
done
out=${out:-gpu-check-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
failed=0
say() { printf '\n== %s\n' "$*"; }

# ---- the OpenCL runtime: the bundle's loader and CLBlast, the machine's drivers ----
unpack_deb() { # dpkg-deb where there is one, else the .deb's ar member data.tar.*
    if command -v dpkg-deb >/dev/null; then dpkg-deb -x "$1" "$2"; return; fi
    local member
    member=$(ar t "$1" | grep '^data\.tar') || return 1
    case "$member" in
    *.xz) ar p "$1" "$member" | xz -dc | tar -x -C "$2" ;;
    *.zst) ar p "$1" "$member" | zstd -dc | tar -x -C "$2" ;;
    *.gz) ar p "$1" "$member" | gzip -dc | tar -x -C "$2" ;;
    *) ar p "$1" "$member" | tar -x -C "$2" ;;
    esac
}
if [ -n "$debs" ] && compgen -G "$debs/*.deb" >/dev/null; then
    rt=$out/runtime
    mkdir -p "$rt"
    for deb in "$debs"/*.deb; do
        unpack_deb "$deb" "$rt" || { echo "gpu_check: cannot unpack $deb" >&2; exit 1; }
    done
    libdirs=$(find "$rt" -name 'lib*.so*' -printf '%h\n' | sort -u | tr '\n' ':')
    export LD_LIBRARY_PATH="${libdirs}${LD_LIBRARY_PATH:-}"
fi
vendors=$out/vendors
rm -rf "$vendors"
mkdir -p "$vendors"
cp /etc/OpenCL/vendors/*.icd "$vendors"/ 2>/dev/null
names=(libnvidia-opencl.so.1 libamdocl64.so libamdocl-orca64.so libigdrcl.so libintelocl.so libMesaOpenCL.so.1
    libRusticlOpenCL.so.1 libpocl.so.2)
pattern=()
for n in "${names[@]}"; do pattern+=(-o -name "$n"); done
candidates=$( (ldconfig -p 2>/dev/null | awk '{print $NF}';
    find /usr/lib /usr/lib64 /usr/local/lib /usr/local/nvidia /opt/rocm /opt/intel \( "${pattern[@]:1}" \) 2>/dev/null) |
    grep -E "/($(IFS='|'; echo "${names[*]}" | sed 's/\./\\./g'))\$")
[ -n "${CLNET_VENDOR_LIB:-}" ] && candidates="$candidates
$CLNET_VENDOR_LIB"
for lib in $candidates; do
    # one .icd per driver: the system's own, or the first copy of the library found
    grep -qsF "$(basename "$lib")" "$vendors"/*.icd || echo "$lib" >"$vendors/$(basename "$lib").icd"
done
export OCL_ICD_VENDORS=$vendors
say "OpenCL drivers (OCL_ICD_VENDORS=$vendors)"
if compgen -G "$vendors/*.icd" >/dev/null; then
    for icd in "$vendors"/*.icd; do echo "$(basename "$icd"): $(cat "$icd")"; done
else
    echo "none found: only the OpenMP device can be measured"
fi

# ---- devices ----
say "devices"
"$clnet" devices | tee "$out/devices.txt" || failed=1
gpus=$(awk 'NR > 1 && $2 == "opencl" && $3 == "GPU" {print $1}' "$out/devices.txt")
cpus=$(awk 'NR > 1 && $3 == "CPU" {print $1}' "$out/devices.txt")

# ---- the op harness on each GPU ----
if want harness; then
    say "op harness (tests/ops) on the GPU"
    [ -z "$gpus" ] && echo "no GPU: no OpenCL GPU device is visible; skipped"
    for g in $gpus; do
        if timeout 600 "$test_ops" --device "$g" ${ops:+--op "$ops"} --quiet >"$out/harness-$g.txt" 2>&1; then
            echo "$g: $(tail -n 1 "$out/harness-$g.txt")"
        else
            echo "$g: FAILED: $(tail -n 1 "$out/harness-$g.txt"); failures:"
            grep '^FAIL' "$out/harness-$g.txt" | head -n 40
            failed=1
        fi
    done
fi

# ---- per-op device time before tuning (CLNET_PROFILE=1 syncs after every op) ----
profile() { # NAME: the op and GEMM-shape table of each GPU's ViT (batch 256) in fp32 and bf16,
    # the seed CNN (batch 64) and both generation paths
    say "per-op profiles on the GPU ($1; CLNET_PROFILE=1, a sync after every op)"
    [ -z "$gpus" ] && echo "no GPU: skipped"
    for g in $gpus; do
        for p in fp32 bf16; do
            CLNET_PROFILE=1 timeout 300 "$clnet" train "$models/vit_fashion.net" --data "$data" --device "$g" \
                --limit "$limit" --epochs 1 --batch 256 --precision $p -q >"$out/profile-$1-${g//:/_}-vit-$p.txt" 2>&1 || failed=1
        done
        CLNET_PROFILE=1 timeout 300 "$clnet" train "$model" --data "$data" --device "$g" --limit "$limit" --epochs 1 -q \
            >"$out/profile-$1-${g//:/_}-cnn-fp32.txt" 2>&1 || failed=1
        for path in cached uncached; do
            CLNET_PROFILE=1 timeout 300 "$gen_speed" --device "$g" --model "$models/char_gpt.net" --repeat 1 \
                --only $path >"$out/profile-$1-${g//:/_}-gen-$path.txt" 2>&1 || failed=1
        done
        for f in "$out"/profile-"$1"-"${g//:/_}"-*.txt; do
            echo "-- $(basename "$f")"
            grep -E 'calls|wall time' "$f" | sed 's/.*profile: //' | head -n 16
        done
    done
}
want profile && profile before

if [ "$tune" = 1 ]; then
    say "GEMM tuning on the GPU"
    [ -z "$gpus" ] && echo "no GPU: skipped"
    for g in $gpus; do timeout "${CLNET_TUNE_TIMEOUT:-600}" "$clnet" tune --device "$g" || failed=1; done
    want profile && profile tuned
fi

# ---- clnet bench on every GPU and CPU device ----
bench_ok=0
if want bench; then
    say "clnet bench ($steps steps per device)"
    args=()
    for d in $gpus $cpus; do args+=(--device "$d"); done
    if timeout 600 "$clnet" bench "${args[@]}" --model "$model" --data "$data" --steps "$steps" --json "$out/bench.json" \
        2> >(tee "$out/bench.log" >&2); then
        bench_ok=1
    else
        failed=1
        [ -s "$out/bench.json" ] && bench_ok=1 # some devices measured
    fi
fi

# ---- PyTorch on the GPU ----
torch_args=()
torch_gpu=0 # 1: PyTorch sees a GPU here
if want torch; then
    say "PyTorch seed CNN on the GPU"
    if [ -z "$gpus" ]; then
        echo "no GPU: skipped"
    elif ! command -v python3 >/dev/null; then
        torch_args=(--torch-note "python3 is not installed")
        echo "${torch_args[1]}"
    else
        python3 "$tools/torch_gpu.py" --data "$data" --steps "$steps" --json "$out/torch.json" 2>"$out/torch.log"
        rc=$?
        if [ $rc = 0 ]; then
            torch_args=(--torch "$out/torch.json") torch_gpu=1
            cat "$out/torch.json"
        else
            note=$(tail -n 1 "$out/torch.log")
            torch_args=(--torch-note "${note#torch_gpu: }")
            echo "$note"
            [ $rc = 3 ] || failed=1 # 3: no PyTorch with a GPU here, which is not a failure of clnet
        fi
    fi
fi

# ---- the tables ----
if want bench; then
    say "report ($out/report.md)"
    if [ "$bench_ok" = 1 ]; then
        gpu_args=()
        for g in $gpus; do gpu_args+=(--gpu "$g"); done
        python3 "$tools/gpu_report.py" --clnet "$out/bench.json" "${gpu_args[@]}" "${torch_args[@]}" \
            --markdown "$out/report.md" || failed=1
    else
        echo "no report: clnet bench measured no device"
    fi
fi

# ---- issue 17 on each GPU: 16-bit storage against float32, and the key/value cache ----
if want precision; then
    say "precision: training img/s and peak device memory per precision ($limit images, 2 rounds)"
    [ -z "$gpus" ] && echo "no GPU: skipped"
    for g in $gpus; do
        for mb in seed_cnn:64 vit_fashion:256; do
            m=${mb%%:*} b=${mb##*:}
            for p in fp32 bf16 fp16; do
                for r in 1 2; do
                    f=$out/prec-${g//:/_}-$m-$p-r$r.json
                    timeout 300 "$clnet" train "$models/$m.net" --data "$data" --device "$g" --limit "$limit" \
                        --epochs 1 --batch "$b" --precision "$p" --report "$f" -q >"${f%.json}.log" 2>&1 ||
                        { echo "$g $m $p round $r: FAILED: $(tail -n 2 "${f%.json}.log")"; failed=1; }
                done
            done
        done
    done
    [ -n "$gpus" ] && { python3 "$tools/precision_report.py" "$out" --markdown "$out/report.md" || failed=1; }
fi

if want torchvit; then
    say "ViT training in PyTorch on the GPU (batch 256, fp32 and autocast)"
    if [ -n "$gpus" ] && [ $torch_gpu = 0 ] && command -v python3 >/dev/null &&
        python3 -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
        torch_gpu=1
    fi
    if [ $torch_gpu = 0 ]; then
        echo "no GPU or no PyTorch with a GPU: skipped"
    else
        vsteps=$((limit / 256 > 2 ? limit / 256 : 2))
        for ac in fp32 bf16 fp16; do
            extra=()
            [ $ac = fp32 ] || extra=(--autocast $ac)
            CLNET_TEST_DATA=$data timeout 300 python3 "$tools/torch_transformers.py" vit "$vsteps" 1 256 --device cuda \
                "${extra[@]}" 2>>"$out/torch-vit.log" | tee -a "$out/torch-vit.json" || failed=1
        done
    fi
fi

if want generate; then
    say "generation: tokens/s with and without the key/value cache (char_gpt.net, 512 tokens, best of 3)"
    for d in $gpus omp; do
        for c in f32 bf16; do
            echo "-- $d, cache $c"
            timeout 300 "$gen_speed" --device "$d" --model "$models/char_gpt.net" --repeat 3 --cache-type $c \
                2>&1 | tee "$out/gen-${d//:/_}-$c.txt" || failed=1
        done
    done
fi

echo
echo "gpu_check: $([ $failed = 0 ] && echo "passed" || echo "FAILED"); everything is in $out"
exit $failed
