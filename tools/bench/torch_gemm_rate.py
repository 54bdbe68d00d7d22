#!/usr/bin/python3
"""PyTorch side of tools/bench/gemm_shapes: GFLOP/s of torch.mm / torch.addmm / torch.bmm on
the shapes read from stdin, in build/tools/gemm_rate's format (B M N K TA TB BIAS per line:
op(a) [B,M,K] times op(b) [B,K,N], a transposed operand passed as a transposed view as
nn.Linear's backward does, BIAS 1: addmm with a bias [N]).

usage: torch_gemm_rate.py THREADS [REPS]

Prints each line back with the best GFLOP/s of 3 rounds of REPS calls (default 50) after one
untimed round, and a first line "torch VERSION".
"""
import sys
import time

import torch


def rate(b, m, n, k, ta, tb, bias, reps):
    a = torch.rand(b, k, m) if ta else torch.rand(b, m, k)
    w = torch.rand(b, n, k) if tb else torch.rand(b, k, n)
    a, w = (a.transpose(1, 2) if ta else a), (w.transpose(1, 2) if tb else w)
    c = torch.rand(n)
    if b == 1:
        a, w = a[0], w[0]
        f = (lambda: torch.addmm(c, a, w)) if bias else (lambda: torch.mm(a, w))
    else:
        f = lambda: torch.bmm(a, w)  # noqa: E731
    best = float("inf")
    with torch.no_grad():
        for r in range(4):
            t0 = time.perf_counter()
            for _ in range(reps):
                f()
            dt = time.perf_counter() - t0
            if r > 0:
                best = min(best, dt)
    return 2.0 * b * m * n * k * reps / best * 1e-9


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    torch.set_num_threads(int(sys.argv[1]))
    reps = int(sys.argv[2]) if len(sys.argv) == 3 else 50
    print("torch", torch.__version__, flush=True)
    for line in sys.stdin:
        f = line.split()
        if len(f) != 7:
            continue
        b, m, n, k, ta, tb, bias = (int(x) for x in f)
        print(b, m, n, k, ta, tb, bias, "%.3f" % rate(b, m, n, k, ta, tb, bias, reps), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
