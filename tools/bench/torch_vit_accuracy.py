#!/usr/bin/python3
"""The ViT of models/vit_fashion.net trained by PyTorch as `clnet train models/vit_fashion.net`
trains it: all 60,000 Fashion-MNIST training images, batch 64, a new shuffle per epoch, Adam
(lr 1e-3, betas 0.9/0.999, eps 1e-7: clnet's defaults), cross-entropy; after every epoch the
test accuracy on the 10,000 test images. The accuracy beside clnet's for the same
architecture and hyperparameters.

usage: torch_vit_accuracy.py [EPOCHS] [THREADS]      (default 10 epochs, 2 threads)
prints: epoch N: train S s (I img/s), loss L, test accuracy A
"""
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


def main():
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    xtr, ytr = images("train")
    xte, yte = images("t10k")
    model = torch_models.ViT()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    for ep in range(epochs):
        model.train()
        t0, perm = time.time(), torch.randperm(len(xtr))
        for i in range(0, len(xtr), 64):
            b = perm[i:i + 64]
            opt.zero_grad()
            loss = F.cross_entropy(model(xtr[b]), ytr[b])
            loss.backward()
            opt.step()
        sec = time.time() - t0
        model.eval()
        with torch.no_grad():
            right = sum((model(xte[i:i + 500]).argmax(1) == yte[i:i + 500]).sum().item() for i in range(0, len(xte), 500))
        print("epoch %d: train %.1f s (%.0f img/s), loss %.4f, test accuracy %.4f" %
              (ep + 1, sec, len(xtr) / sec, loss.item(), right / len(xte)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
