#!/usr/bin/env bash
# Coverage-guided fuzzing of every reader of outside bytes (tests/fuzz): builds the targets
# with clang's libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer in build-fuzz, then
# runs each for SECONDS from its committed corpus (tests/fuzz/corpus/<target>), under
# -rss_limit_mb=2048 -malloc_limit_mb=512 and a 10 s limit per input, CLNET_FUZZ_JOBS targets
# at a time (default: the number of cores).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      (default 20 s each, every target)
#
# A crash, a sanitizer report, an input slower than 10 s or one over a memory limit fails the
# run: the input is copied into the target's corpus as tests/fuzz/corpus/<target>/regress-*,
# where every build's tests replay it from then on (commit it with the fix). Inputs that only
# add coverage stay in build-fuzz/fuzz-work.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-20}
[ $# -gt 0 ] && shift
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(idx pgm ckpt ckpt_model ckpt_program model dataset text onnx)
BUILD=${CLNET_FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${CLNET_FUZZ_JOBS:-$(nproc)}

if ! command -v clang >/dev/null; then
  echo "fuzz: clang is not installed (Debian: apt-get install clang libclang-rt-dev)" >&2
  exit 1
fi
if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang meson setup "$BUILD" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbuildtype=debugoptimized -Dmpi=disabled >/dev/null
fi
ninja -C "$BUILD" $(printf 'tests/fuzz/fuzz_%s ' "${TARGETS[@]}") >/dev/null

# Any UBSan report is fatal, as any ASan one is; a leak counts too.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1

run_one() {
  local t=$1 work="$BUILD/fuzz-work/$1" art="$BUILD/fuzz-artifacts/$1"
  mkdir -p "$work" "$art"
  rm -f "$art"/*
  if "$BUILD/tests/fuzz/fuzz_$t" -max_total_time="$SECS" -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 \
       -artifact_prefix="$art/" -print_final_stats=1 "$work" "tests/fuzz/corpus/$t" >"$BUILD/fuzz-$t.log" 2>&1; then
    echo "fuzz $t: ok, $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$BUILD/fuzz-$t.log" | grep -o '[0-9]*$') inputs in ${SECS} s"
    return 0
  fi
  echo "fuzz $t: FAILED (log: $BUILD/fuzz-$t.log)"
  grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$BUILD/fuzz-$t.log" | head -20 || true
  for a in "$art"/*; do
    [ -f "$a" ] || continue
    local keep="tests/fuzz/corpus/$t/regress-$(basename "$a")"
    cp "$a" "$keep"
    echo "fuzz $t: the input is kept as $keep: fix the bug and commit it (every build replays it)"
  done
  return 1
}

fail=0
pids=()
for t in "${TARGETS[@]}"; do
  run_one "$t" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$JOBS" ]; then
    wait "${pids[0]}" || fail=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || fail=1; done
[ $fail -eq 0 ] && echo "fuzz: ${#TARGETS[@]} targets, ${SECS} s each, no failure"
exit $fail
