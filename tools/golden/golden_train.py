"""Training fixtures that clnet's C tests replay without Python (tests/engine/test_torch_models.c):
PyTorch trains a model from weights and batches that clnet can rebuild exactly, and the fixture
records how to rebuild them and what PyTorch computed. Used by vit_losses.py and cnn_losses.py.

- Weights: every parameter, by clnet's name, is `center + (2u - 1) * half` with u =
  cn_rng_uniform(seed, stream, k) for element k (row-major, clnet's layout), stream = the
  parameter's line in the fixture. The generator is clnet's counter-based one (engine/ops.h),
  written again below in integer arithmetic, so both sides draw the same float32 values. The
  fixture holds the recipe (center, half), not the numbers, plus the sum of the values drawn
  here, which the C test compares first: a mismatch is then named as such. Batch norm's running
  statistics are not drawn: both sides start them at mean 0, variance 1.
- Batches: step s trains on training images [s*B, (s+1)*B) of Fashion-MNIST in file order,
  pixels byte / 255 rounded to float32 as clnet's reader does.
- Training: Adam (betas 0.9/0.999, eps 1e-7: clnet's defaults) or SGD with momentum
  (PyTorch's: no dampening, not Nesterov; the fixture says "optimizer sgd MOMENTUM"), mean
  cross-entropy; the loss of step s is the forward loss before its update, as clnet's step
  reports it.
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
M64 = (1 << 64) - 1


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def rng_uniform(seed, step, index):
    """cn_rng_uniform: 24 bits of splitmix64(seed, step, index), exactly a float32."""
    z = mix64((seed * 0x9E3779B97F4A7C15 + mix64((step * 0xD1B54A32D192ED03 + index + 1) & M64)) & M64)
    return (z >> 40) * (1.0 / 16777216.0)


def draw(seed, stream, shape, center, half):
    n = 1
    for d in shape:
        n *= d
    vals = [center + (2.0 * rng_uniform(seed, stream, k) - 1.0) * half for k in range(n)]
    return torch.tensor(vals, dtype=torch.float32).reshape(shape)


def glorot_half(shape):
    """Glorot-uniform's bound for a clnet weight shape: fans from the last two dims times the rest."""
    receptive = 1
    for d in shape[:-2]:
        receptive *= d
    fan_in, fan_out = receptive * shape[-2], receptive * shape[-1]
    return (6.0 / (fan_in + fan_out)) ** 0.5


def fashion_batches(batch, steps):
    """The first batch * steps training images (NHWC float32) and labels of Fashion-MNIST."""
    images = torch_models.fashion_mnist("train-images-idx3-ubyte")
    labels = torch_models.fashion_mnist("train-labels-idx1-ubyte")
    n = batch * steps
    x = torch.tensor(list(images[16:16 + n * 784]), dtype=torch.float32).reshape(n, 28, 28, 1) / 255.0
    y = torch.tensor(list(labels[8:8 + n]), dtype=torch.int64)
    return x, y


def header(what, model_path, seed, batch, steps, lr, eps):
    return ["# %s in PyTorch %s (float64), from the" % (what, torch.__version__),
            "# weights and batches described here. Written by tools/golden/%s; do not edit."
            % os.path.basename(sys.argv[0]),
            "# param NAME DIMS... center C half H sum S: element k = C + (2u - 1) H, u = cn_rng_uniform(seed,",
            "# line index of the param, k); S is the sum of those float32 values, as drawn by the script.",
            "model %s" % model_path, "seed %d" % seed, "batch %d" % batch, "steps %d" % steps,
            "lr %r" % lr, "eps %r" % eps]


def set_weights(params, recipe, seed, shape_of, to_torch, lines):
    """Draws every (name, tensor, how) of params by recipe(name, clnet shape) -> (center, half),
    copies it into the tensor and appends its param line."""
    stream = 0
    with torch.no_grad():
        for name, param, how in params:
            if how == "running":
                continue
            shape = shape_of(param, how)
            center, half = recipe(name, shape)
            value = draw(seed, stream, shape, center, half)
            param.copy_(to_torch(value, how))
            lines.append("param %s %s center %r half %r sum %r" % (name, " ".join(map(str, shape)), center, half,
                                                                   value.double().sum().item()))
            stream += 1


def train(model, x, y, batch, steps, lr, eps, lines, momentum=None):
    """Adam (momentum None) or SGD with that momentum, in float64; one loss line per step. The
    model is left in float64."""
    model.double().train()
    if momentum is None:
        opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=eps)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    for s in range(steps):
        xb, yb = x[s * batch:(s + 1) * batch].double(), y[s * batch:(s + 1) * batch]
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        lines.append("loss %d %r" % (s + 1, loss.item()))
        print("step %2d loss %.9f" % (s + 1, loss.item()))


def write(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", os.path.relpath(path))
