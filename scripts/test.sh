#!/usr/bin/env bash
# The README's second command: install what is missing, build, run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
meson test -C "${CLNET_BUILD_DIR:-build}" --print-errorlogs "$@"
