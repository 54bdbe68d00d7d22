#!/usr/bin/env python3
"""Writes tests/fixtures/onnx/dynamo_vit: a small vision transformer with a batch-norm CNN stem,
exported by PyTorch's dynamo exporter (torch.onnx.export(..., dynamo=True), onnxscript), with
test_data_set_0/{input,output}_0.pb: a batch of 3 images and PyTorch's outputs.
tests/onnx/test_onnx_nodes --fixtures replays it on every device (within 1e-4). The model:
conv 3x3 + batch norm + ReLU, a 7x7 patch embedding as a strided convolution, learned
positions, two pre-norm blocks (layer norm, attention written as matmul/softmax/matmul over
4 heads, GELU MLP) and a head on the mean token. What the dynamo exporter writes for them
differs from the TorchScript exporter's fixtures (tests/onnx/make_fixtures.py): opset 20,
LayerNormalization and Gelu as single ops, the batch norm folded into the convolution's new
bias, reshapes with a symbolic batch, Gemm only for the head.

Run with the venv of tools/bench/torch_venv.sh (PyPI torch) plus onnxscript:
    ~/.cache/clnet/torch-venv/bin/pip install onnxscript
    ~/.cache/clnet/torch-venv/bin/python tools/golden/make_dynamo_fixture.py
The versions used are written to the fixture's README.txt.
"""
import math
import os
import sys

import numpy as np
import onnx
import onnxscript
import torch
from onnx import numpy_helper
from torch import nn
from torch.nn import functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "onnx", "dynamo_vit")


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        # q, k and v of their own: one fused projection is unbound with Slice on a non-batch
        # axis, which the importer does not take yet (onnxops)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.heads = heads

    def attn(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = (f(x).view(b, t, h, d // h).transpose(1, 2) for f in (self.q, self.k, self.v))
        s = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        return self.o((torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, t, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class DynamoViT(nn.Module):
    def __init__(self, d=24):
        super().__init__()
        self.stem = nn.Conv2d(1, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.embed = nn.Conv2d(4, d, 7, stride=7)
        self.pos = nn.Parameter(torch.randn(1, 16, d) * 0.02)
        self.blocks = nn.Sequential(Block(d, 4), Block(d, 4))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.stem(x)))
        x = self.embed(x).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.ln(self.blocks(x)).mean(dim=1))


def main():
    torch.manual_seed(11)
    m = DynamoViT()
    with torch.no_grad():
        m.bn.weight.uniform_(0.5, 1.5)
        m.bn.bias.normal_(0, 0.1)
        m.train()
        m(torch.rand(8, 1, 28, 28))  # running statistics that are not the defaults
    m.eval()
    x = torch.rand(3, 1, 28, 28)
    os.makedirs(os.path.join(OUT, "test_data_set_0"), exist_ok=True)
    path = os.path.join(OUT, "model.onnx")
    batch = torch.export.Dim("batch", min=1, max=4096)
    prog = torch.onnx.export(m, (x,), dynamo=True, input_names=["input"], output_names=["output"],
                             dynamic_shapes={"x": {0: batch}}, external_data=False)
    prog.save(path)
    model = onnx.load(path)
    onnx.checker.check_model(model)
    with torch.no_grad():
        y = m(x)
    for kind, t in (("input", x), ("output", y)):
        with open(os.path.join(OUT, "test_data_set_0", kind + "_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t.numpy()).SerializeToString())
    with open(os.path.join(OUT, "README.txt"), "w") as f:
        f.write("Made by tools/golden/make_dynamo_fixture.py with torch %s (dynamo=True), onnxscript %s, onnx %s "
                "(python %s); opset %d\n" % (torch.__version__, onnxscript.__version__, onnx.__version__,
                                             sys.version.split()[0], model.opset_import[0].version))
    ops = sorted({n.op_type for n in model.graph.node})
    print(path, os.path.getsize(path), "bytes, opset", model.opset_import[0].version, ops)


main()
