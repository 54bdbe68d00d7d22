"""How the hand-built ONNX fixtures are written (make_elementwise.py, make_math.py,
make_node_gaps.py, make_windows.py), in the layout of the ONNX backend node tests that
test_onnx_nodes reads: OUT/model.onnx (ir_version 8, the default domain at the given opset,
passing onnx's full checker) and OUT/test_data_set_0/input_K.pb, output_K.pb, TensorProtos of
the arrays given, in order (the caller casts them to the types the graph declares)."""
import os

import onnx
from onnx import helper, numpy_helper


def save_case(out, graph, opset, inputs, outputs):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    data = os.path.join(out, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save(model, os.path.join(out, "model.onnx"))
    for kind, arrays in (("input", inputs), ("output", outputs)):
        for k, v in enumerate(arrays):
            with open(os.path.join(data, "%s_%d.pb" % (kind, k)), "wb") as f:
                f.write(numpy_helper.from_array(v).SerializeToString())
