#!/usr/bin/python3
"""Writes tests/fixtures/onnx/<model>/: model.onnx exported by PyTorch (TorchScript exporter,
Debian's python3-torch 1.13; scripts/setup.sh installs it) with a free
batch, and test_data_set_0/{input,output}_N.pb (ONNX TensorProto files, the layout of the
ONNX project's own backend tests) holding a batch of 3 and PyTorch's outputs for it.
tests/onnx/test_onnx_nodes replays them on every device. Run again only to change a model.

The models: an MLP, the course's seed CNN (models/seed_cnn.net, NCHW), a small ViT and a
small GPT-style causal transformer, written so that the exporter emits what real models
make it emit: shape arithmetic for x.view(x.size(0), -1), layer norm and GELU as their
decompositions (opset 14: LayerNormalization and Gelu did not exist yet), attention as
batched MatMul and Softmax, token embeddings as Gather. Then issue 16's layers: a CNN with
batch norm kept as nodes (and 20 SGD steps of PyTorch losses, for fine-tuning with batch
statistics) and one with every layer PyTorch exports for them. Then attention with a fused q/k/v
projection split on its last axis by Split and by Slice, and unbound after a permute (qkv).

Usage: make_fixtures.py [NAME...]   (default: every fixture)"""
import math
import os

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "onnx")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        return torch.log_softmax(self.fc2(torch.relu(self.fc1(x.flatten(1)))), dim=1)


class SeedCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.conv3 = nn.Conv2d(64, 64, 3)
        self.fc1 = nn.Linear(64 * 3 * 3, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.relu(self.conv3(x))
        x = x.view(x.size(0), -1)  # Shape, Gather, Unsqueeze, Concat, Reshape
        return self.fc2(torch.relu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, d, heads, causal, t):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.heads = heads
        if causal:
            self.register_buffer("mask", torch.triu(torch.full((t, t), float("-inf")), diagonal=1))
        else:
            self.mask = None

    def attn(self, x):
        b, t, d = x.shape
        h = self.heads
        q = self.q(x).view(b, t, h, d // h).transpose(1, 2)
        k = self.k(x).view(b, t, h, d // h).transpose(1, 2)
        v = self.v(x).view(b, t, h, d // h).transpose(1, 2)
        s = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        if self.mask is not None:
            s = s + self.mask
        y = torch.softmax(s, dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(b, t, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class ViT(nn.Module):
    def __init__(self, d=32, patch=7):
        super().__init__()
        self.embed = nn.Conv2d(1, d, patch, stride=patch)
        self.pos = nn.Parameter(torch.randn(1, (28 // patch) ** 2, d) * 0.02)
        self.blocks = nn.Sequential(Block(d, 4, False, 16), Block(d, 4, False, 16))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.ln(self.blocks(x)).mean(dim=1))


class GPT(nn.Module):
    def __init__(self, vocab=64, d=32, t=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, t, d) * 0.02)
        self.blocks = nn.Sequential(Block(d, 4, True, t), Block(d, 4, True, t))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        return self.head(self.ln(self.blocks(self.tok(ids) + self.pos)))


class FusedQKV(nn.Module):
    """Attention with one fused q/k/v projection, as GPT-2 and timm's ViT write it: the
    [B,T,3D] product split on its last axis (the exporter's Split), or sliced with
    qkv[..., a:b] (its Slice), then the heads' reshape and transpose; or, as timm's ViT, reshaped
    to [B,T,3,H,hd], permuted to [3,B,H,T,hd] (the batch second) and unbound on the first axis."""

    def __init__(self, d=32, heads=4, t=8, sliced=False, unbind=False):
        super().__init__()
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.heads, self.sliced, self.unbind, self.t = heads, sliced, unbind, t

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        qkv = self.qkv(x)
        if self.unbind:  # timm's ViT: [3,B,H,T,hd], then the first axis taken apart (Gather)
            q, k, v = qkv.reshape(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4).unbind(0)
            y = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // h), dim=-1) @ v
            return self.o(y.transpose(1, 2).reshape(b, t, d))
        if self.sliced:
            q, k, v = qkv[:, :, :d], qkv[:, :, d:2 * d], qkv[:, :, 2 * d:]
        else:
            q, k, v = qkv.split(d, dim=2)
        q, k, v = (z.reshape(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
        y = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // h), dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(b, t, d))


class QKV(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.a, self.b, self.c = FusedQKV(d), FusedQKV(d, sliced=True), FusedQKV(d, unbind=True)

    def forward(self, x):
        x = x + self.a(x)
        x = x + self.b(x)
        return x + self.c(x)


class BNCNN(nn.Module):
    """Batch norm after a plain and a depthwise convolution, ReLU6 and a global pool: the
    layers of issue 16 that an imported classifier trains through (batch statistics)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 10)
        with torch.no_grad():  # running statistics away from 0 and 1, so that they matter
            for bn in (self.bn1, self.bn2):
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.2, 0.2)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = nn.functional.relu6(self.bn2(self.dw(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Layers(nn.Module):
    """Issue 16's layers in the forms PyTorch 1.13 exports them at opset 13: dilated, grouped,
    depthwise and asymmetrically padded convolutions, transposed convolution, upsampling
    (nearest and bilinear), reflect padding, padded ceil-mode average pooling without the
    padding in the count, a channel split and shuffle, concatenation of computed values,
    squeeze-and-excitation with x.mean((2, 3)), SiLU, hard swish as x * HardSigmoid(x),
    leaky ReLU, ELU, softplus and global max pooling."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 8, 3, padding=2, dilation=2)
        self.group = nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.dw = nn.Conv2d(4, 4, 3, stride=2, groups=4)
        self.se1, self.se2 = nn.Conv2d(8, 4, 1), nn.Conv2d(4, 8, 1)
        self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = nn.functional.silu(self.stem(x))                                     # 28x28x8
        x = nn.functional.leaky_relu(self.group(nn.functional.pad(x, (0, 1, 0, 1))), 0.1)[:, :, :28, :28]
        a, b = x.chunk(2, dim=1)                                                  # Split
        b = nn.functional.elu(self.dw(nn.functional.pad(b, (1, 0, 1, 0))))       # 14x14x4
        a = nn.functional.avg_pool2d(a[:, :, 1:27, 1:27], 3, 2, padding=1, ceil_mode=True, count_include_pad=False)
        x = torch.cat([a, b], 1)                                                  # 14x14x8
        n, c, h, w = x.shape
        x = x.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)       # channel shuffle
        s = torch.sigmoid(self.se2(torch.relu(self.se1(x.mean((2, 3), keepdim=True)))))
        x = nn.functional.hardswish(x * s)
        x = nn.functional.interpolate(nn.functional.pad(x, (1, 1, 1, 1), mode="reflect"), scale_factor=2)
        x = nn.functional.softplus(self.up(nn.functional.max_pool2d(x, 2)))      # 32x32x4
        x = nn.functional.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        return self.fc(torch.cat([nn.functional.adaptive_max_pool2d(x, 1), nn.functional.adaptive_avg_pool2d(x, 1)], 1).flatten(1))


def write(name, model, x, opset, keep_bn=False, out=None):
    """keep_bn: BatchNormalization nodes stay (TrainingMode.PRESERVE of a model in eval mode,
    training_mode=0 in the file); the default (EVAL) folds them into the convolutions. out:
    the folder (default: the committed fixtures; make_torchvision.py writes elsewhere)."""
    torch.manual_seed(1)
    model.eval()
    d = os.path.join(out or OUT, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    path = os.path.join(d, "model.onnx")
    torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=opset,
                      do_constant_folding=True,
                      training=torch.onnx.TrainingMode.PRESERVE if keep_bn else torch.onnx.TrainingMode.EVAL)
    onnx.checker.check_model(onnx.load(path))
    with torch.no_grad():
        y = model(x)
    for kind, t in (("input", x), ("output", y)):
        with open(os.path.join(d, "test_data_set_0", kind + "_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t.numpy()).SerializeToString())
    print(name, os.path.getsize(path), "bytes, output scale %.3g" % y.abs().max().item())


def fashion(n):
    """The first n training images (NCHW float in [0,1]) and labels of Fashion-MNIST."""
    import gzip
    d = "/usr/share/datasets/fashion-mnist"
    with gzip.open(os.path.join(d, "train-images-idx3-ubyte.gz")) as f:
        img = np.frombuffer(f.read(), np.uint8, offset=16)[: n * 784]
    with gzip.open(os.path.join(d, "train-labels-idx1-ubyte.gz")) as f:
        lab = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
    return img.reshape(n, 1, 28, 28).astype(np.float64) / 255.0, lab.astype(np.int64)


def train_losses(name, model, steps=20, batch=16, lr=0.01):
    """20 steps of plain SGD from the exported weights, in float64 (the exact trajectory that
    clnet's float32 run is compared with), on Fashion-MNIST's first images in file order."""
    import copy
    m = copy.deepcopy(model).double().train()
    opt = torch.optim.SGD(m.parameters(), lr=lr)
    x, y = fashion(steps * batch)
    with open(os.path.join(OUT, name, "train_sgd.txt"), "w") as f:
        f.write("# steps batch lr, then the loss before each step (PyTorch float64)\n%d %d %g\n" % (steps, batch, lr))
        for s in range(steps):
            xb = torch.from_numpy(x[s * batch:(s + 1) * batch])
            yb = torch.from_numpy(y[s * batch:(s + 1) * batch])
            loss = nn.functional.cross_entropy(m(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            f.write("%.12g\n" % loss.item())


def main(only):
    """Every model is built and exported in the same order whatever is asked (each export
    reseeds and consumes the generator, so the order fixes every fixture's weights); those
    not asked for go to a scratch folder."""
    global OUT
    import tempfile
    real, scratch = OUT, tempfile.mkdtemp()

    def pick(name):
        global OUT
        OUT = real if not only or name in only else scratch

    torch.manual_seed(0)
    img = torch.rand(3, 1, 28, 28)
    pick("mlp")
    write("mlp", MLP(), img, 13)
    cnn = SeedCNN()
    pick("seed_cnn")
    write("seed_cnn", cnn, img, 13)
    train_losses("seed_cnn", cnn)
    pick("vit")
    write("vit", ViT(), img, 14)
    pick("gpt")
    write("gpt", GPT(), torch.randint(0, 64, (3, 16)), 14)
    pick("bn_cnn")
    torch.manual_seed(2)
    bn = BNCNN()
    write("bn_cnn", bn, img, 14, keep_bn=True)
    train_losses("bn_cnn", bn)
    pick("layers")
    torch.manual_seed(3)
    write("layers", Layers(), img, 13)
    pick("qkv")
    torch.manual_seed(4)
    write("qkv", QKV(), torch.randn(3, 8, 32), 14)


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])  # names: only those fixtures (default: all)
