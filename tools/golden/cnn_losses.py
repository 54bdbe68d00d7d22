#!/usr/bin/python3
"""Writes the PyTorch equivalence fixtures of the batch-norm models (issue 16 §4): for a model
file, PyTorch's first 20 training losses (batch norm in training mode) and every batch norm's
running statistics after them, from weights and batches that clnet can rebuild exactly
(golden_train.py says how; the network comes from the model file itself, torch_netfile.py).

Run with Debian's PyTorch:
    /usr/bin/python3 tools/golden/cnn_losses.py                 # every model below
    /usr/bin/python3 tools/golden/cnn_losses.py MODEL.net OUT   # one model
    /usr/bin/python3 tools/golden/cnn_losses.py --conditioning MODEL.net
tests/engine/test_torch_models.c replays each fixture on every device without Python.

Optimizer: SGD with momentum 0.9, lr 0.01, not Adam. Batch norm makes some parameters
invisible to the loss: the bias of a convolution it reads (the batch's mean removes it) and,
in a MobileNet, the shift of a linear bottleneck's batch norm (the next batch norm, behind a
1x1 convolution, removes it). Their gradient is 0 in exact arithmetic and float32 rounding
noise otherwise, which Adam divides by its own size: such a parameter takes steps of up to lr
in float32 and none in float64, and the running means, which include it, follow. PyTorch's
own float32 run of these fixtures under Adam leaves its float64 run's running statistics by up
to 4e-3 (measured 2026-11-25, torch 1.13) while the losses agree; SGD moves such a parameter
by lr times the noise, nothing. Adam's equivalence is the ViT fixture's (vit_losses.py). The
rate is modest for a second reason: a ReLU input within rounding of 0 can fall on the other
side on another device, changing one gradient element by that element's dy; at lr 0.02 one
such flip (step 12 of resnet_tiny on omp) had grown to 1.4e-4 of the loss by step 18, at lr
0.01 (batches of 8, which also keep the test short) every device stays within 1.1e-7
(tests/engine/test_torch_models.c prints its figures).

Recipe: conv and dense weights Glorot-uniform by clnet's shape, biases U(-0.05, 0.05), batch
norm scales 1 + U(-0.1, 0.1) and shifts U(-0.05, 0.05) (not 1 and 0, so that a swapped scale
and shift shows). Dropout, if a model has it, is left out on both sides (its masks cannot be
the same); the fixture says so and the C test does the same.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_train as gt  # noqa: E402
import torch_netfile as tn  # noqa: E402

SEED, BATCH, STEPS, LR, EPS, MOMENTUM = 20261125, 8, 20, 0.01, 1e-7, 0.9
MODELS = [("tests/fixtures/models/resnet_tiny.net", "tests/fixtures/resnet_tiny_torch.txt"),
          ("tests/fixtures/models/mobilenet_tiny.net", "tests/fixtures/mobilenet_tiny_torch.txt")]


def recipe(name, shape):
    if name.startswith("batch_norm") and name.endswith(".weight"):
        return 1.0, 0.1
    if name.endswith(".bias"):
        return 0.0, 0.05
    return 0.0, gt.glorot_half(shape)


def fixture(model_path, out):
    with open(os.path.join(gt.ROOT, model_path)) as f:
        text = f.read()
    dropout = any(w.split("#")[0].split()[:1] == ["dropout"] for w in text.splitlines())
    model = tn.NetFile(text, skip_dropout=True)
    lines = gt.header("The first %d training losses and the running statistics after them of %s" % (STEPS, model_path),
                      model_path, SEED, BATCH, STEPS, LR, EPS)
    lines.append("optimizer sgd %r" % MOMENTUM)
    if dropout:
        lines.append("without_dropout")
    gt.set_weights(model.clnet_params(), recipe, SEED, tn.clnet_shape, tn.to_torch, lines)
    x, y = gt.fashion_batches(BATCH, STEPS)
    gt.train(model, x, y, BATCH, STEPS, LR, EPS, lines, MOMENTUM)
    for name, bn, how in model.clnet_params():
        if how == "running":
            lines.append("running %s %s" % (name, " ".join(repr(v) for v in tn.running(bn).tolist())))
    gt.write(os.path.join(gt.ROOT, out), lines)


def conditioning(model_path, trials=3):
    """How far PyTorch's float64 trajectory moves when every weight moves by one float32 ulp
    (6e-8 relative, random signs): the largest relative change of the 20 losses and of the
    running statistics (of max(|v|, 1)) over a few trials. A model for which this is near 1e-4
    cannot be held to 1e-4 by any float32 engine."""
    import copy

    import torch
    with open(os.path.join(gt.ROOT, model_path)) as f:
        model = tn.NetFile(f.read(), skip_dropout=True)
    gt.set_weights(model.clnet_params(), recipe, SEED, tn.clnet_shape, tn.to_torch, [])
    x, y = gt.fashion_batches(BATCH, STEPS)

    def run(m):
        lines = []
        gt.train(m, x, y, BATCH, STEPS, LR, EPS, lines, MOMENTUM)
        return [float(v.split()[2]) for v in lines], [tn.running(b) for _, b, h in m.clnet_params() if h == "running"]

    base, run0 = run(copy.deepcopy(model))
    for t in range(trials):
        m = copy.deepcopy(model)
        g = torch.Generator().manual_seed(t)
        with torch.no_grad():
            for q in m.parameters():
                q.mul_(1 + 6e-8 * (2 * torch.rand(q.shape, generator=g) - 1))
        losses, runs = run(m)
        print("%s, trial %d: losses %.1e, running statistics %.1e" % (
            model_path, t + 1, max(abs(a - b) / abs(a) for a, b in zip(base, losses)),
            max(((a - b).abs() / a.abs().clamp(min=1)).max().item() for a, b in zip(run0, runs))))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--conditioning":
        conditioning(sys.argv[2])
    elif len(sys.argv) == 3:
        fixture(sys.argv[1], sys.argv[2])
    elif len(sys.argv) == 1:
        for model_path, out in MODELS:
            fixture(model_path, out)
    else:
        sys.exit("usage: cnn_losses.py [MODEL.net OUT | --conditioning MODEL.net]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
