#!/usr/bin/env bash
# Makes, once, the virtual environment that exported tests/fixtures/onnx/keras_cnn: PyPI's
# tensorflow-cpu and tf2onnx at pinned versions (Debian packages neither). Only
# tools/golden/make_keras_fixture.py needs it; CI replays the committed fixture without it.
#
# usage: tools/golden/tf_venv.sh        # prints the venv's python on its last line
#
# The venv lives in $CLNET_TF_VENV (default ~/.cache/clnet/tf-venv), about 1 GB. A venv whose
# tensorflow and tf2onnx import is left alone; delete the folder to remake it.
set -euo pipefail
VENV=${CLNET_TF_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/clnet/tf-venv}
TF_VERSION=${TF_VERSION:-2.20.0}
TF2ONNX_VERSION=${TF2ONNX_VERSION:-1.17.0}

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import tensorflow, tf2onnx" 2>/dev/null; then
  echo "tf_venv: $VENV is ready" >&2
  echo "$VENV/bin/python"
  exit 0
fi
mkdir -p "$(dirname "$VENV")"
rm -rf "$VENV" # an interrupted earlier attempt is started over
/usr/bin/python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "tensorflow-cpu==$TF_VERSION" "tf2onnx==$TF2ONNX_VERSION"
"$VENV/bin/pip" freeze > "$VENV/versions.txt"
echo "tf_venv: made $VENV ($(grep -iE '^(tensorflow-cpu|tf2onnx|onnx|keras)==' "$VENV/versions.txt" | tr '\n' ' '))" >&2
echo "$VENV/bin/python"
