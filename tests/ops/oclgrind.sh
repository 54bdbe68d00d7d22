#!/usr/bin/env bash
# The op harness under Oclgrind (Debian's oclgrind), an OpenCL implementation that simulates
# every work-item and reports what a CPU driver forgives and a GPU does not: out-of-bounds
# accesses and barrier divergence (always checked), data races (--data-races), uses of
# uninitialised values (--uninitialized) and API misuse (--check-api). Every op runs, on the
# cases small enough for a simulator (test_ops --max-work), twice: with the device's own
# decisions and with every GPU decision (CLNET_EMULATE_GPU=1). Any report fails the run and is
# printed in full.
#
#   usage: tests/ops/oclgrind.sh TEST_OPS [MAX_WORK [MAX_WORK_GPU]]   (CLNET_TEST_OP narrows the ops)
#
# The GPU pass keeps smaller cases (MAX_WORK_GPU, default 2000, against 20000): its GEMM,
# gemm.cl's tiled kernel, simulates a 64 x 64 tile of 256 work-items for every 16 steps of K
# whatever the product's size (a 1 x 1000 x 1 dot product took 64 s), where the CPU-type
# kernels simulate about the product's own work. Both keep every op; on the 2-core dev machine
# the passes took 53 s and 34 s.
#
# Why the settings:
#   -cl-opt-disable  Oclgrind's uninitialised-value plugin stops on the LLVM `freeze`
#                    instruction the optimiser emits in some kernels (im2col, col2im, pooling,
#                    transpose); unoptimised programs have none.
#   CLNET_GEMM=native  CLBlast's kernels are not ours to check and take minutes to simulate;
#                    the GPU pass runs gemm.cl's tiled kernel, the fallback CLBlast has.
#   CLNET_CACHE=0    no program binaries shared with other OpenCL implementations.
#   --no-fork        one Oclgrind process per pass, so one log holds every report.
#   OMP_NUM_THREADS=1  the reference's spinning threads would take the simulator's cores.
set -u
test_ops=${1:?usage: oclgrind.sh TEST_OPS [MAX_WORK [MAX_WORK_GPU]]}
max_work=(${2:-20000} ${3:-2000})
if ! command -v oclgrind >/dev/null; then
    echo "FAIL: oclgrind is not installed (scripts/setup.sh installs Debian's oclgrind)"
    exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0
for emulate in 0 1; do
    what="device's own decisions"
    [ "$emulate" = 1 ] && what="GPU decisions (CLNET_EMULATE_GPU=1)"
    start=$SECONDS
    CLNET_EMULATE_GPU=$emulate CLNET_GEMM=native CLNET_CACHE=0 CLNET_CL_OPTIONS=-cl-opt-disable OMP_NUM_THREADS=1 \
        oclgrind --uninitialized --data-races --check-api --log "$dir/reports.$emulate" \
        "$test_ops" --device cl:0 --max-work "${max_work[$emulate]}" --quiet --no-fork >"$dir/out.$emulate" 2>&1
    rc=$?
    summary=$(tail -n 1 "$dir/out.$emulate")
    echo "oclgrind, $what: test_ops exit $rc, $summary [$((SECONDS - start)) s]"
    if ! grep -q "^devices:.*Oclgrind" "$dir/out.$emulate"; then
        echo "FAIL: test_ops did not run on Oclgrind's device:"
        head -n 20 "$dir/out.$emulate"
        failed=1
        continue
    fi
    if [ "$rc" != 0 ]; then
        echo "FAIL: the op harness failed under Oclgrind ($what):"
        grep -v "^PASS" "$dir/out.$emulate" | head -n 60
        failed=1
    fi
    if [ -s "$dir/reports.$emulate" ]; then
        echo "FAIL: Oclgrind reported errors ($what):"
        head -n 300 "$dir/reports.$emulate"
        failed=1
    fi
done
[ "$failed" = 0 ] && echo "oclgrind: no reports"
exit "$failed"
