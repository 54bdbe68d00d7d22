#!/usr/bin/python3
"""Writes tests/fixtures/vit_fashion_losses.txt: PyTorch's first training losses of the ViT of
models/vit_fashion.net, from weights and batches that clnet can rebuild exactly.

Run with Debian's PyTorch: /usr/bin/python3 tools/golden/vit_losses.py
tests/engine/test_vit_torch.c replays the fixture on every device without Python.

- Weights: every parameter, by clnet's name, is `center + (2u - 1) * half` with u =
  cn_rng_uniform(seed, stream, k) for element k (row-major, clnet's layout), stream = the
  parameter's line in the fixture. The generator is clnet's counter-based one (engine/ops.h),
  written again below in integer arithmetic, so both sides draw the same float32 values. The
  fixture holds the recipe (center, half), not the 100k numbers, plus the sum of the values
  this script drew, which the C test compares first: a mismatch is then named as such.
- Batches: step s trains on training images [s*B, (s+1)*B) of Fashion-MNIST in file order,
  pixels byte / 255 rounded to float32 as clnet's reader does.
- Training: Adam (lr 1e-3, betas 0.9/0.999, eps 1e-7: clnet's defaults), mean cross-entropy;
  the loss of step s is the forward loss before its update, as clnet's step reports it.
- Precision: PyTorch runs in float64 from those float32 weights and pixels, so the fixture is
  the (nearly) exact trajectory; clnet's float32 run differs by its own rounding only.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "vit_fashion_losses.txt")
SEED, BATCH, STEPS, LR, EPS = 20261124, 16, 20, 1e-3, 1e-7

M64 = (1 << 64) - 1


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def rng_uniform(seed, step, index):
    """cn_rng_uniform: 24 bits of splitmix64(seed, step, index), exactly a float32."""
    z = mix64((seed * 0x9E3779B97F4A7C15 + mix64((step * 0xD1B54A32D192ED03 + index + 1) & M64)) & M64)
    return (z >> 40) * (1.0 / 16777216.0)


def draw(stream, shape, center, half):
    n = 1
    for d in shape:
        n *= d
    vals = [center + (2.0 * rng_uniform(SEED, stream, k) - 1.0) * half for k in range(n)]
    return torch.tensor(vals, dtype=torch.float32).reshape(shape)


def recipe(name, shape):
    """(center, half) of a parameter: Glorot-uniform weights, small biases, layer norm scales
    near 1, embeddings of standard deviation 0.02."""
    if name.startswith("layer_norm") and name.endswith(".weight"):
        return 1.0, 0.1
    if name.endswith(".bias"):
        return 0.0, 0.05
    if name.endswith(".position"):
        return 0.0, 0.02 * 3 ** 0.5
    receptive = 1
    for d in shape[:-2]:
        receptive *= d
    fan_in, fan_out = receptive * shape[-2], receptive * shape[-1]
    return 0.0, (6.0 / (fan_in + fan_out)) ** 0.5


def main():
    torch.manual_seed(0)
    model = torch_models.ViT(image=28, channels=1, patch=4, width=64, heads=4, blocks=2, mlp=128, classes=10)
    lines = ["# The first %d training losses of models/vit_fashion.net in PyTorch %s (float64), from the" % (STEPS, torch.__version__),
             "# weights and batches described here. Written by tools/golden/vit_losses.py; do not edit.",
             "# param NAME DIMS... center C half H sum S: element k = C + (2u - 1) H, u = cn_rng_uniform(seed,",
             "# line index of the param, k); S is the sum of those float32 values, as drawn by the script.",
             "model models/vit_fashion.net", "seed %d" % SEED, "batch %d" % BATCH, "steps %d" % STEPS,
             "lr %r" % LR, "eps %r" % EPS]
    with torch.no_grad():
        for stream, (name, param, how) in enumerate(torch_models.clnet_params(model)):
            shape = torch_models.clnet_shape(param, how)
            center, half = recipe(name, shape)
            value = draw(stream, shape, center, half)
            param.copy_(torch_models.to_torch(value, how))
            lines.append("param %s %s center %r half %r sum %r" % (name, " ".join(map(str, shape)), center, half,
                                                                   value.double().sum().item()))
    images = torch_models.fashion_mnist("train-images-idx3-ubyte")
    labels = torch_models.fashion_mnist("train-labels-idx1-ubyte")
    n = BATCH * STEPS
    x = torch.tensor(list(images[16:16 + n * 784]), dtype=torch.float32).reshape(n, 28, 28, 1) / 255.0
    y = torch.tensor(list(labels[8:8 + n]), dtype=torch.int64)
    model = model.double()
    opt = torch.optim.Adam(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=EPS)
    for s in range(STEPS):
        xb, yb = x[s * BATCH:(s + 1) * BATCH].double(), y[s * BATCH:(s + 1) * BATCH]
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        lines.append("loss %d %r" % (s + 1, loss.item()))
        print("step %2d loss %.9f" % (s + 1, loss.item()))
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", os.path.relpath(OUT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
