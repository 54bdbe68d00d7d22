#!/usr/bin/env bash
# Test wrapper for the sanitizer build (meson test --wrapper): LeakSanitizer's stop-the-world
# tracer itself sometimes dies at a process's exit ("Tracer caught signal 11", a known flake
# of the sanitizer runtime, google/sanitizers#1353) with no leak and no error found. A test
# that failed with that signature and no real sanitizer report runs once more; anything else
# (a leak, an ASan/UBSan report, a second tracer crash, any other failure) fails as it is.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ] && grep -q "Tracer caught signal" "$out" &&
   ! grep -qE "ERROR: AddressSanitizer|ERROR: LeakSanitizer: detected|runtime error:" "$out"; then
  echo "lsan_retry: the LeakSanitizer tracer crashed (no report); running the test once more"
  "$@"
  rc=$?
fi
exit "$rc"
