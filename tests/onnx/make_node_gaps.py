#!/usr/bin/python3
"""Writes tests/fixtures/onnx/node_gaps: what issue 18 §3 took from the refused node tests, on
values with a free batch, built with onnx.helper at opset 13: MaxPool's Indices in both
storage orders (one with pads, one in ceil mode), moved by a Reshape and cast to float then
added to; a bool graph input (clnet's 0/1 float mask) And'ed with another bool input in a
broadcast where neither operand has the output's shape; Where of program values: PyTorch's
masked_fill with a constant causal mask and -inf (the program value second), a condition
computed from the input with a constant other branch, a bool graph input as the condition,
and a Cast of a program value to bool. The expected outputs come from float64 numpy, MaxPool
from a loop that follows the ONNX definition (first maximum of the row-major window scan,
index ((n*C + c)*H + h)*W + w, or (n*C + c)*H*W + h + w*H for storage_order=1).
tests/onnx/test_onnx_nodes --fixtures replays it on every device (within 1e-4 of each
output's scale; the indices are exact). Needs Debian's python3-onnx (/usr/bin/python3)."""
import math
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from fixture_case import save_case

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "onnx", "node_gaps")
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
T = 5
causal = np.tril(np.ones((T, T), dtype=bool))
inits = [numpy_helper.from_array(np.array([-1, C * 16], dtype=np.int64), "flat"),
         numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half"),
         numpy_helper.from_array(causal, "causal"), numpy_helper.from_array(np.array(-np.inf, dtype=np.float32), "ninf"),
         numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero"),
         numpy_helper.from_array(np.array(0.5, dtype=np.float32), "also_half"),
         numpy_helper.from_array(np.array([0.25, -1.5, 2.0, 4.0], dtype=np.float32), "row")]
nodes = [
    n("MaxPool", ["x"], ["pooled", "ind_rows"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    n("Reshape", ["ind_rows", "flat"], ["ind_flat"]),
    n("MaxPool", ["x"], ["pooled_ceil", "ind_cols"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1,
      storage_order=1),
    n("Cast", ["ind_cols"], ["ind_float"], to=TensorProto.FLOAT),
    n("Add", ["ind_float", "half"], ["ind_plus"]),
    n("And", ["keep", "flag"], ["both"]),
    n("Where", ["causal", "s", "ninf"], ["masked"]),
    n("Greater", ["s", "zero"], ["pos"]), n("Where", ["pos", "s", "also_half"], ["relu_half"]),
    n("Where", ["keep", "row", "v"], ["picked"]),
    n("Cast", ["v"], ["nonzero"], to=TensorProto.BOOL), n("Not", ["nonzero"], ["is_zero"]),
]
vi = helper.make_tensor_value_info
outs = [vi("pooled", TensorProto.FLOAT, ["batch", C, 4, 4]), vi("ind_flat", TensorProto.INT64, ["batch", C * 16]),
        vi("pooled_ceil", TensorProto.FLOAT, ["batch", C, 4, 4]), vi("ind_plus", TensorProto.FLOAT, ["batch", C, 4, 4]),
        vi("both", TensorProto.BOOL, ["batch", 3, 4]), vi("masked", TensorProto.FLOAT, ["batch", 2, T, T]),
        vi("relu_half", TensorProto.FLOAT, ["batch", 2, T, T]), vi("picked", TensorProto.FLOAT, ["batch", 3, 4]),
        vi("is_zero", TensorProto.BOOL, ["batch", 3, 4])]
ins = [vi("x", TensorProto.FLOAT, ["batch", C, H, W]), vi("keep", TensorProto.BOOL, ["batch", 1, 4]),
       vi("flag", TensorProto.BOOL, [1, 3, 1]), vi("s", TensorProto.FLOAT, ["batch", 2, T, T]),
       vi("v", TensorProto.FLOAT, ["batch", 3, 4])]

B = 3
x32 = rng.standard_normal((B, C, H, W)).astype(np.float32)
x32[1, 0, :3, :3] = 1.0  # ties: the first maximum of the row-major scan wins
keep = rng.random((B, 1, 4)) < 0.5
flag = np.array([True, False, True]).reshape(1, 3, 1)
s32 = rng.standard_normal((B, 2, T, T)).astype(np.float32)
v32 = rng.standard_normal((B, 3, 4)).astype(np.float32)
v32[0, 1, :] = 0.0  # Cast to bool: zeros are false
x = x32.astype(np.float64)
s = s32.astype(np.float64)
pooled, ind_rows = maxpool(x, 3, 2, (1, 1, 1, 1), False, False)
pooled_ceil, ind_cols = maxpool(x, 2, 2, (0, 0, 0, 0), True, True)
row = np.array([0.25, -1.5, 2.0, 4.0])
want = [pooled, ind_rows.reshape(B, C * 16), pooled_ceil, ind_cols.astype(np.float64) + 0.5, keep & flag,
        np.where(causal, s, -np.inf), np.where(s > 0, s, 0.5), np.where(keep, row, v32.astype(np.float64)),
        ~(v32 != 0)]
save_case(OUT, helper.make_graph(nodes, "indices", ins, outs, inits), 13, [x32, keep, flag, s32, v32],
          [v if v.dtype in (bool, np.int64) else v.astype(np.float32) for v in want])
