#!/usr/bin/python3
"""Checks clnet's ONNX exports two ways: Debian's python3-onnx checker (full check, with shape
inference) accepts every file, and ONNX Runtime (PyPI, test-only, installed into a venv on
first use) computes clnet's outputs within 1e-5 of each output's
largest magnitude. test_onnx_export writes the files (model, input and clnet's output).
The venv lives in ~/.cache/clnet/ort-venv ($XDG_CACHE_HOME), made once.

Usage: check_export.py TEST_ONNX_EXPORT SOURCE_ROOT WORK_DIR
Exit 77 (skipped) only when ONNX Runtime cannot be installed (no network)."""
import glob
import os
import shutil
import subprocess
import sys

exe, root, work = sys.argv[1:4]
out = os.path.join(work, "exported")
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
r = subprocess.run([exe, root, out], capture_output=True, text=True)
print(r.stdout, end="")
if r.returncode != 0:
    print(r.stderr)
    sys.exit(1)

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402

models = sorted(glob.glob(os.path.join(out, "*", "model.onnx")))
if not models:
    print("no exports written")
    sys.exit(1)
for m in models:
    onnx.checker.check_model(onnx.load(m), full_check=True)
    print("checker ok:", os.path.relpath(m, out))

# Outside the build directory, so that fresh CI builds reuse it: ~/.cache/clnet/ort-venv.
cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "clnet")
venv = os.path.join(cache, "ort-venv")
py = os.path.join(venv, "bin", "python3")
if not os.path.exists(py) or subprocess.run([py, "-c", "import onnxruntime"], capture_output=True).returncode:
    shutil.rmtree(venv, ignore_errors=True)
    ok = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv]).returncode == 0 and \
        subprocess.run([py, "-m", "pip", "install", "-q", "onnxruntime"], timeout=600).returncode == 0
    if not ok:
        print("skipped: ONNX Runtime could not be installed (no network?)")
        sys.exit(77)

CHECK = r'''
import glob, os, sys
import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper
bad = 0
for m in sorted(glob.glob(os.path.join(sys.argv[1], "*", "model.onnx"))):
    d = os.path.dirname(m)
    sess = ort.InferenceSession(m, providers=["CPUExecutionProvider"])
    x = numpy_helper.to_array(onnx.load_tensor(os.path.join(d, "test_data_set_0", "input_0.pb")))
    want = numpy_helper.to_array(onnx.load_tensor(os.path.join(d, "test_data_set_0", "output_0.pb")))
    name = open(os.path.join(d, "output_name")).read().strip()
    inp = sess.get_inputs()[0]
    if "int" in inp.type:
        x = x.astype(np.int32 if inp.type == "tensor(int32)" else np.int64)
    y = sess.run([name], {inp.name: x})[0].reshape(-1)
    err = float(np.max(np.abs(y - want))) if y.size == want.size else float("inf")
    scale = float(np.max(np.abs(want)))
    ok = err <= 1e-5 * scale
    bad += not ok
    print("%-12s onnxruntime %s: max difference %.3g (scale %.3g)" % (os.path.basename(d), "ok" if ok else "FAILED", err, scale))
sys.exit(1 if bad else 0)
'''
sys.exit(subprocess.run([py, "-c", CHECK, out]).returncode)
