#!/usr/bin/env python3
"""The figures `clnet bench` reports, measured with PyTorch on a CUDA or ROCm GPU, for
scripts/gpu_check.sh to set beside clnet on the same GPU:

  - the seed CNN (Conv32-pool-Conv64-pool-Conv64-Dense64-Dense10, Adam 1e-3, batch 64) training
    on real Fashion-MNIST batches: images/s over --steps steps after 5 warm-up steps, the loss
    read every step as `clnet train` does, and the implied 60,000-image epoch;
  - batch-1 inference latency: median and p99 of 300 runs after 30 warm-up runs;
  - SGEMM at 1024^3 (cuBLAS or rocBLAS through torch.matmul): best of 5 timed runs of 10.

Prints one JSON object (and writes it to --json). Exits 3, saying why, when PyTorch is missing
or sees no GPU, so the caller can report that instead of a number.

usage: torch_gpu.py [--data DIR] [--steps N] [--device cuda:N|cpu] [--json FILE]
"""
import argparse
import gzip
import json
import os
import statistics
import sys
import time


def idx(path, offset):
    import numpy as np
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--json")
    a = ap.parse_args()
    try:
        import torch
        import torch.nn as nn
    except ImportError as e:
        print(f"torch_gpu: PyTorch is not installed ({e})", file=sys.stderr)
        return 3
    dev = torch.device(a.device)
    if dev.type == "cpu":  # the same measurements on the host: how this script is tested without a GPU
        sync, runtime, name = (lambda: None), "CPU", "host CPU"
    elif not torch.cuda.is_available():
        print(f"torch_gpu: PyTorch {torch.__version__} sees no CUDA or ROCm GPU", file=sys.stderr)
        return 3
    else:
        sync, name = torch.cuda.synchronize, torch.cuda.get_device_name(dev)
        runtime = f"ROCm {torch.version.hip}" if getattr(torch.version, "hip", None) else f"CUDA {torch.version.cuda}"
    n = (a.steps + 5) * 64
    x = idx(os.path.join(a.data, "train-images-idx3-ubyte.gz"), 16).reshape(-1, 1, 28, 28)[:n]
    y = idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz"), 8)[:n]
    if len(x) < n:
        print(f"torch_gpu: {a.data} holds {len(x)} training images, {n} needed", file=sys.stderr)
        return 1
    xs = torch.tensor(x / 255.0, dtype=torch.float32, device=dev)
    ys = torch.tensor(y.astype("int64"), device=dev)
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Conv2d(64, 64, 3), nn.ReLU(), nn.Flatten(), nn.Linear(576, 64), nn.ReLU(),
                      nn.Linear(64, 10)).to(dev)
    opt = torch.optim.Adam(m.parameters(), 1e-3, eps=1e-7)
    lossf = nn.CrossEntropyLoss()

    def step(s):
        b = slice(s * 64, s * 64 + 64)
        opt.zero_grad()
        loss = lossf(m(xs[b]), ys[b])
        loss.backward()
        opt.step()
        return loss.item()  # a host sync per step, as clnet train reads its loss

    for s in range(5):
        step(s)
    sync()
    t0 = time.perf_counter()
    for s in range(a.steps):
        step(s + 5)
    sync()
    train_ips = a.steps * 64 / (time.perf_counter() - t0)

    m.eval()
    lat = []
    with torch.no_grad():
        for k in range(330):
            t = time.perf_counter()
            m(xs[k % 64:k % 64 + 1]).cpu()
            if k >= 30:
                lat.append((time.perf_counter() - t) * 1e6)
    lat.sort()

    A = torch.rand(1024, 1024, device=dev) - 0.5
    B = torch.rand(1024, 1024, device=dev) - 0.5
    torch.matmul(A, B)
    sync()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(10):
            torch.matmul(A, B)
        sync()
        best = min(best, (time.perf_counter() - t) / 10)
    r = {
        "runner": f"PyTorch {torch.__version__} ({runtime})",
        "device": name,
        "train_images_per_second": round(train_ips, 1),
        "epoch_seconds": round(60000 / train_ips, 2),
        "latency_median_us": round(statistics.median(lat), 1),
        "latency_p99_us": round(lat[len(lat) * 99 // 100], 1),
        "sgemm_gflops": round(2 * 1024 ** 3 / best / 1e9, 1),
    }
    text = json.dumps(r)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
