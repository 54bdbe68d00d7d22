#!/usr/bin/python3
"""The ViT of models/vit_fashion.net trained by PyTorch as `clnet train models/vit_fashion.net`
trains it: all 60,000 Fashion-MNIST training images, batch 64, a new shuffle per epoch,
cross-entropy, and the optimizer and learning-rate schedule that clnet's flags of the same
names give (betas 0.9/0.999 and eps 1e-7 as clnet's defaults; the schedule is clnet's
cn_optimizer_lr_at, as a LambdaLR); after every epoch the test accuracy on the 10,000 test
images. The accuracy beside clnet's for the same architecture and hyperparameters.

usage: torch_vit_accuracy.py [--epochs 10] [--threads 2] [--optimizer adam|adamw] [--lr 1e-3]
                             [--weight-decay 0] [--lr-schedule constant|cosine] [--warmup 0]
                             [--min-lr 0]
prints: epoch N: train S s (I img/s), loss L, test accuracy A
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golden"))
import torch_models  # noqa: E402


def images(split):
    x = torch_models.fashion_mnist("%s-images-idx3-ubyte" % split)
    y = torch_models.fashion_mnist("%s-labels-idx1-ubyte" % split)
    n = (len(x) - 16) // 784
    xs = torch.frombuffer(bytearray(x[16:16 + n * 784]), dtype=torch.uint8).float().reshape(n, 28, 28, 1) / 255.0
    return xs, torch.frombuffer(bytearray(y[8:8 + n]), dtype=torch.uint8).long()


def lr_factor(a, steps_per_epoch):
    """clnet's schedule for step t (1-based) over the base rate; LambdaLR passes t - 1."""
    total = a.epochs * steps_per_epoch

    def f(k):
        t = k + 1
        if a.warmup > 0 and t <= a.warmup:
            return t / a.warmup
        if a.lr_schedule == "constant":
            return 1.0
        if t - a.warmup >= total - a.warmup:
            return a.min_lr / a.lr
        c = 0.5 * (1 + math.cos(math.pi * (t - a.warmup) / (total - a.warmup)))
        return (a.min_lr + (a.lr - a.min_lr) * c) / a.lr
    return f


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--optimizer", choices=["adam", "adamw"], default="adam")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--lr-schedule", choices=["constant", "cosine"], default="constant")
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--min-lr", type=float, default=0.0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    xtr, ytr = images("train")
    xte, yte = images("t10k")
    model = torch_models.ViT()
    # Adam's weight decay is L2 added to the gradient, AdamW's is decoupled: as in clnet
    kind = torch.optim.AdamW if a.optimizer == "adamw" else torch.optim.Adam
    opt = kind(model.parameters(), lr=a.lr, eps=1e-7, weight_decay=a.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(a, (len(xtr) + 63) // 64))
    print("settings: %s" % vars(a), flush=True)
    for ep in range(a.epochs):
        model.train()
        t0, perm = time.time(), torch.randperm(len(xtr))
        for i in range(0, len(xtr), 64):
            b = perm[i:i + 64]
            opt.zero_grad()
            loss = F.cross_entropy(model(xtr[b]), ytr[b])
            loss.backward()
            opt.step()
            sched.step()
        sec = time.time() - t0
        model.eval()
        with torch.no_grad():
            right = sum((model(xte[i:i + 500]).argmax(1) == yte[i:i + 500]).sum().item() for i in range(0, len(xte), 500))
        print("epoch %d: train %.1f s (%.0f img/s), loss %.4f, test accuracy %.4f" %
              (ep + 1, sec, len(xtr) / sec, loss.item(), right / len(xte)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
