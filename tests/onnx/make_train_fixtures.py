#!/usr/bin/python3
"""Writes the fixtures of training and evaluating imported models (Debian's python3-torch 1.13,
TorchScript exporter, opset 13, a free batch; run again only to change a model):

- tests/fixtures/onnx/rgb_cnn: a small CNN taking 3x32x32 images, and eval.txt: PyTorch's
  (float64) mean cross-entropy and right predictions on the first 64 Fashion-MNIST test images
  fitted as `clnet eval MODEL.onnx` fits them (F.interpolate bilinear, align_corners=False,
  no antialiasing; the gray value in all 3 channels). tests/onnx/test_cli_onnx.py compares.
- tests/fixtures/onnx/resnet_bn: a ResNet-style CNN (batch norm after every convolution, two
  residual blocks, one with a strided 1x1 projection, global average pooling), exported in
  eval mode with running statistics that are not the defaults, and train_sgd.txt: 20 steps of
  SGD with momentum in float64 in training mode (batch statistics, running statistics
  updated), the loss before each step, then the eval-mode loss on the next batch after them
  (which reads the running statistics). tests/onnx/test_onnx_train.c replays it.
- tests/fixtures/onnx/dropout: x -> Dropout(0.5) -> + b, built with onnx.helper (PyTorch's
  exporter drops Dropout in eval mode), for the check that dropout is active in training only.
Each also gets test_data_set_0 (a batch of 3 and its eval-mode outputs) for test_onnx_nodes.
"""
import copy
import gzip
import os

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn
from torch.nn import functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "onnx")
DATA = "/usr/share/datasets/fashion-mnist"


def fashion(split, n):
    """The first n images (N,1,28,28 float64 in [0,1]) and labels of a Fashion-MNIST split."""
    with gzip.open(os.path.join(DATA, split + "-images-idx3-ubyte.gz")) as f:
        img = np.frombuffer(f.read(), np.uint8, offset=16)[: n * 784]
    with gzip.open(os.path.join(DATA, split + "-labels-idx1-ubyte.gz")) as f:
        lab = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
    return torch.from_numpy(img.reshape(n, 1, 28, 28).astype(np.float64) / 255.0), torch.from_numpy(lab.astype(np.int64))


def export(name, model, shape):
    """Eval mode, but PRESERVE: TrainingMode.EVAL would fold each batch norm into the
    convolution before it, leaving nothing to train in training mode."""
    model.eval()
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    torch.onnx.export(model, (torch.rand(*shape),), path, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=13,
                      do_constant_folding=True, training=torch.onnx.TrainingMode.PRESERVE)
    onnx.checker.check_model(onnx.load(path))
    x = torch.rand(*((3,) + tuple(shape[1:])))
    with torch.no_grad():
        y = model(x)
    data_set(d, x.numpy(), y.numpy())
    print(name, os.path.getsize(path), "bytes")
    return d


def data_set(d, x, y):
    """test_data_set_0: an input batch and the outputs, for tests/onnx/test_onnx_nodes --fixtures."""
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    for kind, t in (("input", x), ("output", y)):
        with open(os.path.join(d, "test_data_set_0", kind + "_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t.astype(np.float32)).SerializeToString())


class RgbCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        return self.fc(x.flatten(1))


def rgb_cnn():
    torch.manual_seed(5)
    m = RgbCNN()
    d = export("rgb_cnn", m, (2, 3, 32, 32))
    x, y = fashion("t10k", 64)
    x = F.interpolate(x, size=(32, 32), mode="bilinear", align_corners=False).repeat(1, 3, 1, 1)
    with torch.no_grad():
        logits = copy.deepcopy(m).double()(x)
    loss = F.cross_entropy(logits, y).item()
    right = int((logits.argmax(1) == y).sum())
    with open(os.path.join(d, "eval.txt"), "w") as f:
        f.write("# images, then PyTorch's float64 mean cross-entropy and right predictions on them\n")
        f.write("64\n%.12g\n%d\n" % (loss, right))


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.proj = None
        if stride != 1 or cin != cout:
            self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (x if self.proj is None else self.proj(x)))


class ResNetBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.block1 = Block(8, 8, 1)
        self.block2 = Block(8, 16, 2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.stem(x))), 2)
        x = self.block2(self.block1(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def resnet_bn(steps=20, batch=16, lr=0.01, momentum=0.9):
    torch.manual_seed(7)
    m = ResNetBN()
    with torch.no_grad():
        # gammas and betas of their own: equal initializers (all ones) would be merged into one
        # by the exporter, and shared weights train otherwise
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.normal_(0, 0.1)
        m.train()  # running statistics that are not the defaults, in the file
        for _ in range(3):
            m(torch.rand(8, 1, 28, 28))
    d = export("resnet_bn", m, (2, 1, 28, 28))
    t = copy.deepcopy(m).double().train()
    opt = torch.optim.SGD(t.parameters(), lr=lr, momentum=momentum)
    x, y = fashion("train", (steps + 1) * batch)
    with open(os.path.join(d, "train_sgd.txt"), "w") as f:
        f.write("# steps batch lr momentum, the loss before each step (PyTorch float64, training mode),\n"
                "# then the eval-mode loss on the next batch after the steps\n%d %d %g %g\n" % (steps, batch, lr, momentum))
        for s in range(steps):
            loss = F.cross_entropy(t(x[s * batch:(s + 1) * batch]), y[s * batch:(s + 1) * batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            f.write("%.12g\n" % loss.item())
        t.eval()
        with torch.no_grad():
            f.write("%.12g\n" % F.cross_entropy(t(x[steps * batch:]), y[steps * batch:]).item())


def dropout():
    d = os.path.join(OUT, "dropout")
    os.makedirs(d, exist_ok=True)
    n = helper.make_node
    graph = helper.make_graph(
        [n("Dropout", ["x"], ["h"], ratio=0.5), n("Add", ["h", "b"], ["y"])], "dropout",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])],
        [numpy_helper.from_array(np.zeros(64, np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(d, "model.onnx"))
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    data_set(d, x, x)  # inference: dropout passes x through


rgb_cnn()
resnet_bn()
dropout()
