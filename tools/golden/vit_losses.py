#!/usr/bin/python3
"""Writes tests/fixtures/vit_fashion_losses.txt: PyTorch's first training losses of the ViT of
models/vit_fashion.net, from weights and batches that clnet can rebuild exactly
(golden_train.py says how).

Run with Debian's PyTorch: /usr/bin/python3 tools/golden/vit_losses.py [OUT]
tests/engine/test_torch_models.c replays the fixture on every device without Python.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_train as gt  # noqa: E402
import torch_models  # noqa: E402

OUT = os.path.join(gt.ROOT, "tests", "fixtures", "vit_fashion_losses.txt")
SEED, BATCH, STEPS, LR, EPS = 20261124, 16, 20, 1e-3, 1e-7


def recipe(name, shape):
    """(center, half) of a parameter: Glorot-uniform weights, small biases, layer norm scales
    near 1, embeddings of standard deviation 0.02."""
    if name.startswith("layer_norm") and name.endswith(".weight"):
        return 1.0, 0.1
    if name.endswith(".bias"):
        return 0.0, 0.05
    if name.endswith(".position"):
        return 0.0, 0.02 * 3 ** 0.5
    return 0.0, gt.glorot_half(shape)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else OUT
    model = torch_models.ViT(image=28, channels=1, patch=4, width=64, heads=4, blocks=2, mlp=128, classes=10)
    lines = gt.header("The first %d training losses of models/vit_fashion.net" % STEPS, "models/vit_fashion.net", SEED,
                      BATCH, STEPS, LR, EPS)
    gt.set_weights(torch_models.clnet_params(model), recipe, SEED, torch_models.clnet_shape, torch_models.to_torch,
                   lines)
    x, y = gt.fashion_batches(BATCH, STEPS)
    gt.train(model, x, y, BATCH, STEPS, LR, EPS, lines)
    gt.write(out, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
