#!/usr/bin/python3
"""Writes tests/fixtures/onnx/math: issue 18's math ops between program values, built with
onnx.helper at opset 17 on a value with a free batch: a variadic Max of two program values
and a constant row, Min of two program values, Pow by a program value exponent and by
per-element integer exponents of bases of either sign, Floor, Ceil, Erf, GELU's erf part used
outside the pattern too, comparisons (bool outputs: clnet's float masks) and Or/Not of them.
The expected outputs are computed in float64 numpy (math.erf per element).
tests/onnx/test_onnx_nodes --fixtures replays it on every device (within 1e-4 of each
output's scale)."""
import math
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from fixture_case import save_case

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "onnx", "math")
rng = np.random.default_rng(18)
D, E = 4, 6
row = rng.uniform(-1, 1, E).astype(np.float32)
ints = np.array([1, 2, 3, -1, 0, 3], dtype=np.int64)
f32 = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.float32), name)
inits = [numpy_helper.from_array(row, "row"), numpy_helper.from_array(ints, "ints"), f32("mhalf", -0.5),
         f32("half", 0.5), f32("one", 1.0), f32("three", 3.0), f32("sqrt2", math.sqrt(2)), f32("tenth", 0.1)]
n = helper.make_node
nodes = [
    n("Mul", ["x", "mhalf"], ["xm"]), n("Abs", ["x"], ["ax"]), n("Add", ["ax", "half"], ["base"]),
    n("Max", ["x", "xm", "row"], ["max3"]), n("Min", ["x", "xm"], ["min2"]),
    n("Pow", ["base", "x"], ["pow_dyn"]), n("Pow", ["x", "ints"], ["pow_ints"]),
    n("Mul", ["x", "three"], ["x3"]), n("Floor", ["x3"], ["floor"]), n("Ceil", ["x3"], ["ceil"]), n("Erf", ["x"], ["erf"]),
    # GELU as TorchScript writes it, its erf also read by another node
    n("Div", ["x", "sqrt2"], ["xs"]), n("Erf", ["xs"], ["e"]), n("Add", ["e", "one"], ["e1"]), n("Mul", ["x", "e1"], ["xe"]),
    n("Mul", ["xe", "half"], ["gelu"]), n("Mul", ["e", "three"], ["erf_reused"]),
    n("Less", ["x", "xm"], ["less"]), n("Greater", ["x", "tenth"], ["greater"]),
    n("GreaterOrEqual", ["x", "row"], ["ge"]), n("Or", ["less", "greater"], ["or"]), n("Not", ["ge"], ["not"]),
]
outs = ["max3", "min2", "pow_dyn", "pow_ints", "floor", "ceil", "erf", "gelu", "erf_reused", "less", "greater", "ge",
        "or", "not"]
bools = {"less", "greater", "ge", "or", "not"}
graph = helper.make_graph(nodes, "math", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", D, E])],
                          [helper.make_tensor_value_info(k, TensorProto.BOOL if k in bools else TensorProto.FLOAT,
                                                         ["batch", D, E]) for k in outs], inits)

x32 = rng.standard_normal((3, D, E)).astype(np.float32)
x = x32.astype(np.float64)
xm = x * -0.5
erf = np.vectorize(math.erf)
e = erf(x / np.float64(np.float32(math.sqrt(2))))
want = {"max3": np.maximum(np.maximum(x, xm), row), "min2": np.minimum(x, xm), "pow_dyn": (np.abs(x) + 0.5) ** x,
        "pow_ints": x ** ints.astype(np.float64), "floor": np.floor(x * 3), "ceil": np.ceil(x * 3), "erf": erf(x),
        "gelu": x * (e + 1) * 0.5, "erf_reused": 3 * e, "less": x < xm, "greater": x > np.float32(0.1),
        "ge": x >= row, "or": (x < xm) | (x > np.float32(0.1)), "not": ~(x >= row)}
save_case(OUT, graph, 17, [x32], [want[k] if want[k].dtype == bool else want[k].astype(np.float32) for k in outs])
