#!/usr/bin/env bash
# Makes, once, a virtual environment with PyPI's newest torch (and numpy): the PyTorch a user
# installs today, which every comparison in tools/bench is measured against. Debian's
# python3-torch (1.13) is 13-22x slower on transformers and is no longer the anchor.
#
# usage: tools/bench/torch_venv.sh        # prints the venv's python on its last line
#
# The venv lives in $CLNET_TORCH_VENV (default ~/.cache/clnet/torch-venv); torch's wheel pulls
# its CUDA libraries too (about 5 GB), so it is made once and reused. A venv whose torch
# imports is left alone; delete the folder to upgrade.
set -euo pipefail
VENV=${CLNET_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/clnet/torch-venv}

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  echo "torch_venv: $VENV has torch $("$VENV/bin/python" -c 'import torch;print(torch.__version__)')" >&2
  echo "$VENV/bin/python"
  exit 0
fi
if ! dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv
fi
mkdir -p "$(dirname "$VENV")"
# An interrupted earlier attempt (torch does not import) is started over.
rm -rf "$VENV"
# Debian's python3, so the venv does not depend on whatever python3 comes first on PATH.
/usr/bin/python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q torch numpy
echo "torch_venv: made $VENV with torch $("$VENV/bin/python" -c 'import torch;print(torch.__version__)')" >&2
echo "$VENV/bin/python"
