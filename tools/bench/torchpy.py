"""Which Python runs the PyTorch side of a comparison, stated once for every script here.

The anchor is PyPI's newest torch, in the venv tools/bench/torch_venv.sh makes; Debian's
python3-torch (1.13) is used only when that venv does not exist, and every table names the
torch version it measured, so the two are never confused.
"""
import os
import subprocess

VENV = os.environ.get("CLNET_TORCH_VENV") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "clnet", "torch-venv")
DEBIAN = "/usr/bin/python3"


def default_python():
    venv_py = os.path.join(VENV, "bin", "python")
    return venv_py if os.access(venv_py, os.X_OK) else DEBIAN


def add_argument(ap):
    ap.add_argument("--python", default=default_python(),
                    help="Python with torch for the PyTorch side (default: the venv of tools/bench/torch_venv.sh "
                         "when it exists, else Debian's /usr/bin/python3); the table names its torch version")


def torch_version(python):
    """torch's version under python, or None when it does not import (or python does not run)."""
    try:
        p = subprocess.run([python, "-c", "import torch;print(torch.__version__)"], capture_output=True, text=True)
    except OSError:
        return None
    return p.stdout.strip() if p.returncode == 0 else None
