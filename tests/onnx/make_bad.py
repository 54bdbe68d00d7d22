#!/usr/bin/python3
"""Writes tests/onnx/bad/*.onnx, the hostile ONNX files that test_onnx_bad expects clear
errors for (and that seed the fuzz corpus, tests/fuzz/corpus/onnx). Needs Debian's
python3-onnx (run with /usr/bin/python3). Run again only when a case is added."""
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "bad")
CORPUS = os.path.join(HERE, "..", "fuzz", "corpus", "onnx")


def mlp():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "fc.weight")
    b = numpy_helper.from_array(rng.standard_normal((3,)).astype(np.float32), "fc.bias")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
    nodes = [helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["h"], name="fc"),
             helper.make_node("Relu", ["h"], ["y"], name="relu")]
    return helper.make_model(helper.make_graph(nodes, "mlp", [x], [y], [w, b]),
                             opset_imports=[helper.make_opsetid("", 13)])


def save(name, model_or_bytes):
    data = model_or_bytes if isinstance(model_or_bytes, bytes) else model_or_bytes.SerializeToString()
    with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
        f.write(data)


def main():
    os.makedirs(OUT, exist_ok=True)
    good = mlp()
    save("good_mlp", good)
    data = good.SerializeToString()
    save("truncated", data[: len(data) // 2])

    m = mlp()
    t = m.graph.initializer[0]
    del t.dims[:]
    t.dims.extend([1 << 40, 1 << 20])
    save("huge_tensor", m)

    m = mlp()
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 1 << 46
    save("huge_input_dim", m)

    m = mlp()
    m.graph.initializer[0].raw_data = m.graph.initializer[0].raw_data[:-4]
    save("byte_count", m)

    m = mlp()
    m.graph.node[0].input[0] = "relu_out"
    m.graph.node[1].output[0] = "relu_out"
    m.graph.output[0].name = "relu_out"
    save("cycle", m)

    m = mlp()
    m.graph.node[1].input[0] = "nowhere"
    save("undefined_input", m)

    m = mlp()
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["z"])], "then", [],
                               [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    m.graph.node.append(helper.make_node("If", ["y"], ["w"], then_branch=branch, else_branch=branch))
    save("nested_graph", m)

    m = mlp()
    t = m.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value="../../../etc/passwd")
    save("external_outside", m)

    m = mlp()
    m.opset_import[0].version = 22
    save("opset_22", m)

    m = mlp()
    m.graph.node[1].domain = "com.microsoft"
    save("other_domain", m)

    m = mlp()
    m.graph.node[1].op_type = "Frobnicate"
    save("unknown_op", m)

    m = mlp()
    m.graph.node[0].attribute.append(helper.make_attribute("transA", 1))
    save("gemm_shape", m)

    # A tiny file that asks the importer to compute a constant of 2^40 elements.
    shape = numpy_helper.from_array(np.array([1 << 20, 1 << 20], dtype=np.int64), "shape")
    big = helper.make_graph([helper.make_node("ConstantOfShape", ["shape"], ["y"], name="big")], "big", [],
                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [shape])
    save("huge_constant", helper.make_model(big, opset_imports=[helper.make_opsetid("", 13)]))

    # MaxPool's Indices are integers held as floats: an integer Div of them (a floor in ONNX)
    # must be refused, not computed as a float division.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, ["N", 1, 2, 2])
    four = numpy_helper.from_array(np.array(4, dtype=np.int64), "four")
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
             helper.make_node("Div", ["i", "four"], ["y"], name="row")]
    save("indices_div", helper.make_model(helper.make_graph(nodes, "indices_div", [x], [y], [four]),
                                          opset_imports=[helper.make_opsetid("", 13)]))

    # A shape given as a graph output is a constant of floats, but a free batch has no value.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("s", TensorProto.INT64, [2])
    save("shape_output_batch", helper.make_model(
        helper.make_graph([helper.make_node("Shape", ["x"], ["s"], name="shape")], "shape_output_batch", [x], [y]),
        opset_imports=[helper.make_opsetid("", 13)]))

    # A scale whose output size is no int64 (the fuzzer found the cast: undefined behaviour).
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    scales = numpy_helper.from_array(np.array([1, 1, 1e36, 2], dtype=np.float32), "scales")
    save("huge_resize", helper.make_model(
        helper.make_graph([helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up", mode="nearest")],
                          "huge_resize", [x], [y], [scales]), opset_imports=[helper.make_opsetid("", 13)]))

    os.makedirs(CORPUS, exist_ok=True)
    for f in sorted(os.listdir(OUT)):
        shutil.copy(os.path.join(OUT, f), os.path.join(CORPUS, "seed-" + f[:-5]))


main()
