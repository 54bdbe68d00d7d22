#!/usr/bin/python3
"""PyTorch side of tools/bench/compare_layers: the network of a clnet model file
(tools/golden/torch_netfile.py builds it, in NCHW as a PyTorch user writes it), trained with
clnet's defaults (Adam 1e-3, eps 1e-7, batch norm in training mode) on Fashion-MNIST's first
training images in order, then its batch-1 inference latency in eval mode. Prints one JSON line.

usage: torch_layers.py MODEL.net STEPS THREADS BATCH LATENCY_RUNS

Two untimed training steps come first (allocation, first-call costs), then STEPS timed ones;
latency: 20 untimed forward passes of one image, then LATENCY_RUNS timed ones under
torch.inference_mode(), median and p99 in microseconds.
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golden"))
import torch_models  # noqa: E402
import torch_netfile  # noqa: E402

WARMUP = 2


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    path, steps, threads, batch, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    with open(path) as f:
        model = torch_netfile.NetFile(f.read())
    n = (steps + WARMUP) * batch
    images = torch_models.fashion_mnist("train-images-idx3-ubyte")
    if n > 60000:
        sys.exit("torch_layers.py: %d images asked, Fashion-MNIST has 60000" % n)
    x = (torch.tensor(list(images[16:16 + n * 784]), dtype=torch.float32) / 255.0).reshape(n, 1, 28, 28)
    y = torch.tensor(list(torch_models.fashion_mnist("train-labels-idx1-ubyte")[8:8 + n]), dtype=torch.int64)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    model.train()
    t0 = None
    for s in range(steps + WARMUP):
        if s == WARMUP:
            t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(x[s * batch:(s + 1) * batch], channels_first=True), y[s * batch:(s + 1) * batch])
        loss.backward()
        opt.step()
    sec = time.perf_counter() - t0
    model.eval()
    one = x[:1].contiguous()
    lat = []
    with torch.inference_mode():
        for i in range(20 + runs):
            t = time.perf_counter()
            model(one, channels_first=True)
            if i >= 20:
                lat.append((time.perf_counter() - t) * 1e6)
    lat.sort()
    print(json.dumps({"model": os.path.basename(path), "steps": steps, "batch": batch, "threads": threads,
                      "torch": torch.__version__, "train_images_per_second": steps * batch / sec,
                      "latency_median_us": statistics.median(lat),
                      "latency_p99_us": lat[min(len(lat) - 1, int(0.99 * len(lat)))]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
