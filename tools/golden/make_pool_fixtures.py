#!/usr/bin/python3
"""Writes the golden fixtures of the folded ReLU and max-pool gradients (issue 20) into
tests/fixtures/relu_maxpool*.bin: out = max_pool2d(relu(x)), and PyTorch's gradient of
sum(out * R) w.r.t. x, which clnet computes as RELU_GRAD(MAXPOOL_GRAD(dy, y), y) and the planner
folds into one MAXPOOL_GRAD with relu_mask (engine/planner.c, fuse_pool_relu_grad).

Run with any PyTorch (tools/golden/make_fixtures.py describes the format and precision):
    /usr/bin/python3 tools/golden/make_pool_fixtures.py
x is drawn from [-1, 0.6), so many windows hold only negatives: their ReLU outputs tie at 0,
the pool's gradient goes to one of them and the ReLU's gradient zeroes it, whichever PyTorch
picks. Its own seeded generator: the other fixtures are not rewritten.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402

mf.gen = torch.Generator().manual_seed(20261126)


def main():
    # disjoint 2x2 windows over 16 channels (POCL's vector row kernel, the seed CNN's pools),
    # then overlapping 3x3 windows at stride 2 with padding over 3 channels (the generic kernels)
    for name, shape, k, s, p in (("relu_maxpool", (2, 6, 6, 16), 2, 2, 0),
                                 ("relu_maxpool_overlap", (2, 7, 7, 3), 3, 2, 1)):
        mf.write(name, {"x": mf.uniform(shape, -1.0, 0.6)}, {"kernel": k, "stride": s, "pad": p},
                 lambda x, k=k, s=s, p=p: F.max_pool2d(F.relu(x).permute(0, 3, 1, 2), k, s, p).permute(0, 2, 3, 1))


if __name__ == "__main__":
    main()
