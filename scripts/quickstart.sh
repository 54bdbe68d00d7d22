#!/usr/bin/env bash
# The README's first command: install what is missing, build, and train the seed CNN on
# Fashion-MNIST (5 epochs, Adam 1e-3, batch 64) on the best device present.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec ./build/tools/clnet train models/seed_cnn.net --epochs "${EPOCHS:-5}" --device "${CLNET_DEVICE:-auto}" "$@"
