#!/usr/bin/python3
"""Writes the golden fixtures of issue 16's layer ops into tests/fixtures/*.bin: the new
activations, the channel ops (squeeze-and-excitation, global pooling) and batch norm in
training and inference mode, with the running statistics PyTorch's update gives.

Run with any PyTorch (tools/golden/make_fixtures.py describes the format and precision):
    python3 tools/golden/make_layer_fixtures.py
Images are NHWC on clnet's side; PyTorch's NCHW layers see them permuted. The existing
fixtures are not rewritten (this script has its own seeded generator).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402

mf.gen = torch.Generator().manual_seed(20261125)
uniform = mf.uniform


def nchw(x):
    return x.permute(0, 3, 1, 2)


def nhwc(x):
    return x.permute(0, 2, 3, 1)


def main():
    acts = {
        "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), -4, 4, {"alpha": 0.2}),
        "elu": (lambda x: F.elu(x, 1.3), -4, 4, {"alpha": 1.3}),
        "relu6": (lambda x: F.relu6(x), -8, 8, {}),
        "silu": (lambda x: F.silu(x), -8, 8, {}),
        "hard_sigmoid": (lambda x: F.hardsigmoid(x), -5, 5, {}),
        "hard_swish": (lambda x: F.hardswish(x), -5, 5, {}),
        "softplus": (lambda x: F.softplus(x), -25, 25, {}),  # past the threshold 20 both ways
    }
    for name, (fn, lo, hi, params) in acts.items():
        mf.write(name, {"x": uniform((4, 9), lo, hi)}, params, lambda x, fn=fn: fn(x))

    mf.write("channel_mul", {"x": uniform((2, 3, 4, 5)), "s": uniform((2, 5))}, {},
             lambda x, s: x * s[:, None, None, :])
    mf.write("channel_add", {"x": uniform((2, 3, 4, 5)), "s": uniform((2, 5))}, {},
             lambda x, s: x + s[:, None, None, :])
    mf.write("global_avgpool", {"x": uniform((2, 3, 4, 5))}, {},
             lambda x: F.adaptive_avg_pool2d(nchw(x), 1).flatten(1))
    mf.write("global_maxpool", {"x": uniform((2, 3, 4, 5))}, {},
             lambda x: F.adaptive_max_pool2d(nchw(x), 1).flatten(1))

    # pools with padding and ceil mode: on 8x8, k3 s2 p1 rounds 3.5 up to 5 windows, the last
    # one starting at row 7 and clipped to the padded 9 (a divisor of 2 rows, not 3)
    geo = {"kernel": 3, "stride": 2, "pad": 1}
    mf.write("maxpool_ceil", {"x": uniform((2, 8, 8, 3))}, geo,
             lambda x: nhwc(F.max_pool2d(nchw(x), 3, 2, 1, ceil_mode=True)))
    for include in (True, False):
        mf.write("avgpool_ceil_" + ("include_pad" if include else "exclude_pad"), {"x": uniform((2, 8, 8, 3))}, geo,
                 lambda x, include=include: nhwc(F.avg_pool2d(nchw(x), 3, 2, 1, ceil_mode=True,
                                                              count_include_pad=include)))

    eps, momentum, C = 1e-5, 0.1, 5
    for mode in ("train", "eval"):
        run_mean, run_var = uniform((C,), -0.5, 0.5), uniform((C,), 0.5, 2.0)
        before = torch.stack([run_mean, run_var]).clone()
        rm, rv = run_mean.clone(), run_var.clone()  # F.batch_norm updates these in place
        inputs = {"x": uniform((4, 3, 3, C), -1, 3), "gamma": uniform((C,), 0.5, 1.5), "beta": uniform((C,), -0.5, 0.5)}

        def bn(x, gamma, beta, rm=rm, rv=rv, training=mode == "train"):
            return nhwc(F.batch_norm(nchw(x), rm, rv, gamma, beta, training=training, momentum=momentum, eps=eps))

        mf.write("batch_norm_" + mode, inputs, {"eps": eps, "momentum": momentum}, bn,
                 extra=lambda before=before, rm=rm, rv=rv: [("const:running", before),
                                                             ("expect:running", torch.stack([rm, rv]))])
    # a vector batch: batch norm over the features of [N, C]
    run = torch.stack([torch.zeros(C, dtype=torch.float64), torch.ones(C, dtype=torch.float64)])
    rm, rv = run[0].clone(), run[1].clone()
    mf.write("batch_norm_vectors", {"x": uniform((6, C), -2, 2), "gamma": uniform((C,), 0.5, 1.5),
                                    "beta": uniform((C,), -0.5, 0.5)}, {"eps": eps, "momentum": momentum},
             lambda x, gamma, beta: F.batch_norm(x, rm, rv, gamma, beta, training=True, momentum=momentum, eps=eps),
             extra=lambda: [("const:running", run), ("expect:running", torch.stack([rm, rv]))])
    return 0


if __name__ == "__main__":
    sys.exit(main())
