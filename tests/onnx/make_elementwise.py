#!/usr/bin/python3
"""Writes tests/fixtures/onnx/elementwise: ops the importer composes from clnet's own (no
kernel of their own when it was written; Max, Min and Pow are clnet's ops since issue 18 §3,
make_math.py), on a value with a free batch, built with onnx.helper at opset 17:
Max and Min with constant scalars, Pow with constant exponents (3, -2, 1/2, 1.7), Abs, Reciprocal, Sqrt, Expand of a
program value, Gather from one at constant indices, Slice with a step of -2 and with steps of
±(2^63 - 1) (one element; the fuzzer found the count overflowing int64), the negative one
ending at INT64_MIN (ONNX's "to the start", which clnet's batch marker once shadowed), Pad in edge
mode, a broadcast between program values that is not a trailing part, and
LayerNormalization's Mean and InvStdDev outputs. The expected
outputs are computed in float64 numpy. tests/onnx/test_onnx_nodes --fixtures replays it on
every device (within 1e-4 of each output's scale)."""
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from fixture_case import save_case

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "onnx", "elementwise")
rng = np.random.default_rng(5)
D, E = 4, 6
gamma = (1 + 0.1 * rng.standard_normal(E)).astype(np.float32)
beta = (0.1 * rng.standard_normal(E)).astype(np.float32)
f32 = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.float32), name)
i64 = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)
inits = [f32("quarter", 0.25), f32("half1", [0.5]), f32("three_q", 0.75), f32("one", 1.0), f32("e3", 3.0),
         f32("em2", -2.0), f32("ehalf", 0.5), f32("e17", 1.7), i64("shape", [1, D, E]), i64("idx", [2, 0]),
         i64("idx0", 3), i64("starts", [3]), i64("ends", [-100]), i64("axes", [1]), i64("steps", [-2]),
         i64("s_hi", [2]), i64("e_hi", [-2**63]), i64("big_neg", [-(2**63 - 1)]), i64("zero", [0]), i64("e_max", [2**63 - 1]),
         i64("big_pos", [2**63 - 1]),
         i64("pads", [0, 0, 2, 0, 0, 1]), numpy_helper.from_array(gamma, "ln.weight"), numpy_helper.from_array(beta, "ln.bias")]
n = helper.make_node
nodes = [
    n("Abs", ["x"], ["ax"]), n("Add", ["ax", "one"], ["ax1"]),
    n("Max", ["x", "quarter"], ["max"]), n("Min", ["x", "half1", "three_q"], ["min"]),
    n("Pow", ["x", "e3"], ["pow3"]), n("Pow", ["ax1", "em2"], ["pow_m2"]), n("Pow", ["ax", "ehalf"], ["pow_half"]),
    n("Pow", ["ax", "e17"], ["pow17"]), n("Reciprocal", ["ax1"], ["recip"]), n("Sqrt", ["ax"], ["sqrt"]),
    n("ReduceMean", ["x"], ["rm2"], axes=[2], keepdims=1), n("Expand", ["rm2", "shape"], ["expand"]),
    n("ReduceMean", ["x"], ["rm1"], axes=[1], keepdims=1), n("Sub", ["x", "rm1"], ["bcast"]),
    n("Gather", ["x", "idx"], ["gather1"], axis=1), n("Gather", ["x", "idx0"], ["gather2"], axis=2),
    n("Slice", ["x", "starts", "ends", "axes", "steps"], ["slice_m2"]), n("Pad", ["x", "pads"], ["pad_edge"], mode="edge"),
    n("Slice", ["x", "s_hi", "e_hi", "axes", "big_neg"], ["slice_neg_huge"]),
    n("Slice", ["x", "zero", "e_max", "axes", "big_pos"], ["slice_pos_huge"]),
    n("LayerNormalization", ["x", "ln.weight", "ln.bias"], ["ln", "ln_mean", "ln_inv_std"], axis=-1, epsilon=1e-5),
]
outs = {"max": [D, E], "min": [D, E], "pow3": [D, E], "pow_m2": [D, E], "pow_half": [D, E], "pow17": [D, E],
        "recip": [D, E], "sqrt": [D, E], "expand": [D, E], "bcast": [D, E], "gather1": [2, E], "gather2": [D],
        "slice_m2": [2, E], "slice_neg_huge": [1, E], "slice_pos_huge": [1, E], "pad_edge": [D, E + 3], "ln": [D, E], "ln_mean": [D, 1], "ln_inv_std": [D, 1]}
graph = helper.make_graph(nodes, "elementwise", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", D, E])],
                          [helper.make_tensor_value_info(k, TensorProto.FLOAT, ["batch"] + v) for k, v in outs.items()],
                          inits)

x32 = rng.standard_normal((3, D, E)).astype(np.float32)
x = x32.astype(np.float64)
ax = np.abs(x)
m = x.mean(-1, keepdims=True)
inv = 1 / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)
want = {"max": np.maximum(x, 0.25), "min": np.minimum(x, 0.5), "pow3": x ** 3, "pow_m2": (ax + 1) ** -2,
        "pow_half": np.sqrt(ax), "pow17": ax ** 1.7, "recip": 1 / (ax + 1), "sqrt": np.sqrt(ax),
        "expand": np.broadcast_to(x.mean(2, keepdims=True), x.shape), "bcast": x - x.mean(1, keepdims=True),
        "gather1": x[:, [2, 0], :], "gather2": x[:, :, 3], "slice_m2": x[:, 3::-2, :],
        "slice_neg_huge": x[:, 2::-(2**63 - 1), :], "slice_pos_huge": x[:, 0::2**63 - 1, :],
        "pad_edge": np.pad(x, ((0, 0), (0, 0), (2, 1)), mode="edge"), "ln": (x - m) * inv * gamma + beta, "ln_mean": m,
        "ln_inv_std": inv}
save_case(OUT, graph, 17, [x32], [want[k].astype(np.float32) for k in outs])
