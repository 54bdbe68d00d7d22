#!/usr/bin/python3
"""Writes tests/fixtures/onnx/indices: what issue 18 §3 took from the refused node tests, on
values with a free batch, built with onnx.helper at opset 13: MaxPool's Indices in both
storage orders (one with pads, one in ceil mode), moved by a Reshape and cast to float then
added to, and a bool graph input (clnet's 0/1 float mask) And'ed with another bool input in a
broadcast where neither operand has the output's shape. The expected outputs come from a
float64 numpy loop that follows the ONNX MaxPool definition (first maximum of the row-major
window scan, index ((n*C + c)*H + h)*W + w, or (n*C + c)*H*W + h + w*H for storage_order=1).
tests/onnx/test_onnx_nodes --fixtures replays it on every device (within 1e-4 of each
output's scale; the indices are exact). Needs Debian's python3-onnx (/usr/bin/python3)."""
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "onnx", "indices")
rng = np.random.default_rng(183)
C, H, W = 2, 7, 7


def maxpool(x, k, s, pads, ceil, col_major):
    """ONNX MaxPool with Indices: pads (top, left, bottom, right) never win."""
    N = x.shape[0]
    oh = [(H + pads[0] + pads[2] - k) / s + 1, (W + pads[1] + pads[3] - k) / s + 1]
    oh = [int(math.ceil(v) if ceil else math.floor(v)) for v in oh]
    y = np.zeros((N, C, oh[0], oh[1]))
    ind = np.zeros((N, C, oh[0], oh[1]), dtype=np.int64)
    for n in range(N):
        for c in range(C):
            for i in range(oh[0]):
                for j in range(oh[1]):
                    best, at = None, None
                    for a in range(i * s - pads[0], i * s - pads[0] + k):
                        for b in range(j * s - pads[1], j * s - pads[1] + k):
                            if 0 <= a < H and 0 <= b < W and (best is None or x[n, c, a, b] > best):
                                best, at = x[n, c, a, b], (a, b)
                    y[n, c, i, j] = best
                    a, b = at
                    ind[n, c, i, j] = (n * C + c) * H * W + (a + b * H if col_major else a * W + b)
    return y, ind


n = helper.make_node
inits = [numpy_helper.from_array(np.array([-1, C * 16], dtype=np.int64), "flat"),
         numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half")]
nodes = [
    n("MaxPool", ["x"], ["pooled", "ind_rows"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    n("Reshape", ["ind_rows", "flat"], ["ind_flat"]),
    n("MaxPool", ["x"], ["pooled_ceil", "ind_cols"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1,
      storage_order=1),
    n("Cast", ["ind_cols"], ["ind_float"], to=TensorProto.FLOAT),
    n("Add", ["ind_float", "half"], ["ind_plus"]),
    n("And", ["keep", "flag"], ["both"]),
]
vi = helper.make_tensor_value_info
outs = [vi("pooled", TensorProto.FLOAT, ["batch", C, 4, 4]), vi("ind_flat", TensorProto.INT64, ["batch", C * 16]),
        vi("pooled_ceil", TensorProto.FLOAT, ["batch", C, 4, 4]), vi("ind_plus", TensorProto.FLOAT, ["batch", C, 4, 4]),
        vi("both", TensorProto.BOOL, ["batch", 3, 4])]
ins = [vi("x", TensorProto.FLOAT, ["batch", C, H, W]), vi("keep", TensorProto.BOOL, ["batch", 1, 4]),
       vi("flag", TensorProto.BOOL, [1, 3, 1])]
model = helper.make_model(helper.make_graph(nodes, "indices", ins, outs, inits),
                          opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model, full_check=True)
os.makedirs(os.path.join(OUT, "test_data_set_0"), exist_ok=True)
onnx.save(model, os.path.join(OUT, "model.onnx"))

B = 3
x32 = rng.standard_normal((B, C, H, W)).astype(np.float32)
x32[1, 0, :3, :3] = 1.0  # ties: the first maximum of the row-major scan wins
keep = rng.random((B, 1, 4)) < 0.5
flag = np.array([True, False, True]).reshape(1, 3, 1)
x = x32.astype(np.float64)
pooled, ind_rows = maxpool(x, 3, 2, (1, 1, 1, 1), False, False)
pooled_ceil, ind_cols = maxpool(x, 2, 2, (0, 0, 0, 0), True, True)
want = [pooled, ind_rows.reshape(B, C * 16), pooled_ceil, ind_cols.astype(np.float64) + 0.5, keep & flag]
for k, v in enumerate([x32, keep, flag]):
    with open(os.path.join(OUT, "test_data_set_0", "input_%d.pb" % k), "wb") as f:
        f.write(numpy_helper.from_array(v).SerializeToString())
for k, v in enumerate(want):
    v = v if v.dtype in (bool, np.int64) else v.astype(np.float32)
    with open(os.path.join(OUT, "test_data_set_0", "output_%d.pb" % k), "wb") as f:
        f.write(numpy_helper.from_array(v).SerializeToString())
