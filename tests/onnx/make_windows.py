#!/usr/bin/python3
"""Writes tests/fixtures/onnx/windows: the window ops the importer composes from clnet's 2-D
ones, on inputs with a free batch, built with onnx.helper at opset 13: a 3-D Conv (2 groups,
stride, dilation, uneven pads, bias), a 3-D ConvTranspose (2 groups, strides, dilation, pads,
output padding, bias), 3-D MaxPool (ceil mode) and AveragePool (pads, padding
not counted), dilated 2-D MaxPools (a stride of 1: the taps taken; a stride equal to the
dilation: every other element), and Resize by fractional factors (linear half_pixel
downsampling, nearest asymmetric/floor upsampling by 1.5 x 2). The expected outputs are
Debian's PyTorch 1.13 in float64 (conv3d, conv_transpose3d, max_pool3d, avg_pool3d, max_pool2d, interpolate
with the same scales). tests/onnx/test_onnx_nodes --fixtures replays it on every device."""
import os

import numpy as np
import torch
from onnx import TensorProto, helper, numpy_helper

from fixture_case import save_case

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "onnx", "windows")
rng = np.random.default_rng(7)
w = (rng.standard_normal((4, 1, 2, 3, 2)) * 0.4).astype(np.float32)
b = (rng.standard_normal(4) * 0.1).astype(np.float32)
f32 = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.float32), name)
wt = (rng.standard_normal((2, 3, 3, 2, 3)) * 0.4).astype(np.float32)
bt = (rng.standard_normal(6) * 0.1).astype(np.float32)
inits = [numpy_helper.from_array(w, "conv3.weight"), numpy_helper.from_array(b, "conv3.bias"), f32("roi", []),
         numpy_helper.from_array(wt, "convt3.weight"), numpy_helper.from_array(bt, "convt3.bias"),
         f32("down", [1, 1, 0.5, 0.75]), f32("up", [1, 1, 1.5, 2])]
n = helper.make_node
nodes = [
    n("Conv", ["x5", "conv3.weight", "conv3.bias"], ["conv3d"], group=2, strides=[2, 1, 1], dilations=[1, 2, 1],
      pads=[1, 0, 1, 0, 1, 0]),
    n("ConvTranspose", ["x5", "convt3.weight", "convt3.bias"], ["convt3d"], group=2, strides=[2, 1, 2],
      dilations=[1, 2, 1], pads=[1, 0, 1, 1, 0, 1], output_padding=[1, 0, 0]),
    n("MaxPool", ["x5"], ["maxpool3d"], kernel_shape=[2, 3, 2], strides=[2, 2, 2], ceil_mode=1),
    n("AveragePool", ["x5"], ["avgpool3d"], kernel_shape=[3, 2, 3], strides=[1, 2, 1], pads=[1, 1, 0, 1, 1, 0],
      count_include_pad=0),
    n("MaxPool", ["x4"], ["maxpool_dil1"], kernel_shape=[2, 3], dilations=[2, 2], pads=[1, 1, 1, 1]),
    n("MaxPool", ["x4"], ["maxpool_dil2"], kernel_shape=[2, 2], dilations=[2, 2], strides=[2, 2], pads=[0, 1, 0, 1]),
    n("Resize", ["x4", "roi", "down"], ["resize_linear"], mode="linear"),
    n("Resize", ["x4", "roi", "up"], ["resize_nearest"], mode="nearest", coordinate_transformation_mode="asymmetric",
      nearest_mode="floor"),
]
x5 = rng.standard_normal((3, 2, 4, 5, 5)).astype(np.float32)
x4 = rng.standard_normal((3, 2, 6, 7)).astype(np.float32)
t5, t4 = torch.from_numpy(x5.astype(np.float64)), torch.from_numpy(x4.astype(np.float64))
F = torch.nn.functional
want = {
    "conv3d": F.conv3d(F.pad(t5, (1, 0, 0, 1, 1, 0)), torch.from_numpy(w.astype(np.float64)),
                       torch.from_numpy(b.astype(np.float64)), stride=(2, 1, 1), dilation=(1, 2, 1), groups=2),
    "convt3d": F.conv_transpose3d(t5, torch.from_numpy(wt.astype(np.float64)), torch.from_numpy(bt.astype(np.float64)),
                                  stride=(2, 1, 2), padding=(1, 0, 1), output_padding=(1, 0, 0), groups=2,
                                  dilation=(1, 2, 1)),
    "maxpool3d": F.max_pool3d(t5, (2, 3, 2), (2, 2, 2), ceil_mode=True),
    "avgpool3d": F.avg_pool3d(t5, (3, 2, 3), (1, 2, 1), padding=(1, 1, 0), count_include_pad=False),
    "maxpool_dil1": F.max_pool2d(t4, (2, 3), 1, padding=1, dilation=2),
    "maxpool_dil2": F.max_pool2d(F.pad(t4, (1, 1), value=-np.inf), (2, 2), 2, dilation=2),
    "resize_linear": F.interpolate(t4, scale_factor=(0.5, 0.75), mode="bilinear", align_corners=False,
                                   recompute_scale_factor=False),
    "resize_nearest": F.interpolate(t4, scale_factor=(1.5, 2), mode="nearest", recompute_scale_factor=False),
}
graph = helper.make_graph(nodes, "windows",
                          [helper.make_tensor_value_info("x5", TensorProto.FLOAT, ["batch", 2, 4, 5, 5]),
                           helper.make_tensor_value_info("x4", TensorProto.FLOAT, ["batch", 2, 6, 7])],
                          [helper.make_tensor_value_info(k, TensorProto.FLOAT, ["batch"] + list(v.shape[1:]))
                           for k, v in want.items()], inits)
save_case(OUT, graph, 13, [x5, x4], [v.numpy().astype(np.float32) for v in want.values()])
print({k: tuple(v.shape) for k, v in want.items()})
