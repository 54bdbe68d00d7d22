#!/usr/bin/python3
"""Writes tests/fixtures/onnx/dynamo_patterns: the arithmetic PyTorch's dynamo exporter
(torch.onnx.dynamo_export / onnxscript, opset 18) writes for GELU and layer norm, built with
onnx.helper (Debian's torch 1.13 has no dynamo exporter): GELU as x * sqrt(1/2) -> Erf -> +1
-> x * that -> * 0.5, layer norm as ReduceMean with its axes as an input (opset 18), Sub,
Mul(d, d), ReduceMean, Add eps, Sqrt, Div, Mul gamma, Add beta. The expected output is
computed in float64 numpy. tests/onnx/test_onnx_nodes --fixtures replays it on every device."""
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "onnx", "dynamo_patterns")
rng = np.random.default_rng(3)
D = 16
w = rng.standard_normal((D, D)).astype(np.float32) * 0.3
gamma = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
beta = (0.1 * rng.standard_normal(D)).astype(np.float32)
c = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.float32), name)
inits = [numpy_helper.from_array(w, "fc.weight"), numpy_helper.from_array(gamma, "ln.weight"),
         numpy_helper.from_array(beta, "ln.bias"), c("half", 0.5), c("one", 1.0), c("rsqrt2", math.sqrt(0.5)),
         c("eps", 1e-5), numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes")]
n = helper.make_node
nodes = [
    n("MatMul", ["x", "fc.weight"], ["h"]),
    n("Mul", ["h", "rsqrt2"], ["g1"]), n("Erf", ["g1"], ["g2"]), n("Add", ["g2", "one"], ["g3"]),
    n("Mul", ["h", "g3"], ["g4"]), n("Mul", ["g4", "half"], ["g"]),
    n("ReduceMean", ["g", "axes"], ["m"], keepdims=1), n("Sub", ["g", "m"], ["d"]),
    n("Mul", ["d", "d"], ["d2"]), n("ReduceMean", ["d2", "axes"], ["v"], keepdims=1),
    n("Add", ["v", "eps"], ["ve"]), n("Sqrt", ["ve"], ["s"]), n("Div", ["d", "s"], ["nrm"]),
    n("Mul", ["nrm", "ln.weight"], ["ng"]), n("Add", ["ng", "ln.bias"], ["y"]),
]
graph = helper.make_graph(nodes, "dynamo_patterns",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5, D])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5, D])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
model.ir_version = 8
# no onnx.checker: Debian's onnx 1.12 knows opsets up to 17, and ReduceMean's axes input is 18's
os.makedirs(os.path.join(OUT, "test_data_set_0"), exist_ok=True)
onnx.save(model, os.path.join(OUT, "model.onnx"))

x = rng.standard_normal((3, 5, D)).astype(np.float32)
h = x.astype(np.float64) @ w.astype(np.float64)
g = h * 0.5 * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))
m = g.mean(-1, keepdims=True)
v = ((g - m) ** 2).mean(-1, keepdims=True)
y = (g - m) / np.sqrt(v + 1e-5) * gamma + beta
for kind, t in (("input", x), ("output", y.astype(np.float32))):
    with open(os.path.join(OUT, "test_data_set_0", kind + "_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(t).SerializeToString())
