#!/usr/bin/python3
"""PyTorch side of tools/bench/compare_transformers: trains the architectures of
models/vit_fashion.net and models/char_gpt.net (tools/golden/torch_models.py) with clnet's
defaults (Adam 1e-3, eps 1e-7) and prints their training throughput as one JSON line.

usage: torch_transformers.py vit|gpt STEPS THREADS BATCH [TEXT] [--attention manual|sdpa]
           [--gpt T,D,L] [--device cpu|cuda[:N]] [--autocast bf16|fp16]

vit trains on Fashion-MNIST's first STEPS*BATCH training images in order; gpt on windows of T+1
bytes cut from TEXT in order. Two untimed steps come first (allocation, first-call costs), then
STEPS timed ones: {"model": ..., "steps": ..., "seconds": ..., "images_per_second" or
"tokens_per_second": ...}. --attention sdpa computes attention with
F.scaled_dot_product_attention (torch >= 2.0) instead of writing softmax(QK^T)V out.
--gpt T,D,L trains a char-GPT of context T, width D and L blocks (4 heads, an MLP of 4D)
instead of models/char_gpt.net's 128,128,4 (tools/bench/scaling_steps writes the same model
for clnet). --device trains on a GPU instead of the CPU (the timing then ends with a
synchronize); --autocast runs the forward in torch.autocast with that dtype (fp16 with a
GradScaler), the mixed precision that clnet's --precision is compared with.
"""
import contextlib
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golden"))
import torch_models  # noqa: E402

WARMUP = 2


def main():
    if "--attention" in sys.argv:
        i = sys.argv.index("--attention")
        if i + 1 >= len(sys.argv) or sys.argv[i + 1] not in ("manual", "sdpa"):
            sys.exit("torch_transformers.py: --attention takes manual or sdpa")
        torch_models.ATTENTION = sys.argv[i + 1]
        del sys.argv[i:i + 2]
        if torch_models.ATTENTION == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
            sys.exit("torch_transformers.py: torch %s has no F.scaled_dot_product_attention (2.0 or newer has)"
                     % torch.__version__)
    shape = (128, 128, 4)
    if "--gpt" in sys.argv:
        i = sys.argv.index("--gpt")
        try:
            shape = tuple(int(v) for v in sys.argv[i + 1].split(","))
        except (IndexError, ValueError):
            shape = ()
        if len(shape) != 3 or min(shape) < 1 or shape[1] % 4:
            sys.exit("torch_transformers.py: --gpt takes T,D,L (positive, D a multiple of 4)")
        del sys.argv[i:i + 2]
    device, autocast = "cpu", None
    for flag in ("--device", "--autocast"):
        if flag in sys.argv:
            i = sys.argv.index(flag)
            if i + 1 >= len(sys.argv):
                sys.exit("torch_transformers.py: %s needs a value" % flag)
            if flag == "--device":
                device = sys.argv[i + 1]
            elif sys.argv[i + 1] in ("bf16", "fp16"):
                autocast = torch.bfloat16 if sys.argv[i + 1] == "bf16" else torch.float16
            else:
                sys.exit("torch_transformers.py: --autocast takes bf16 or fp16")
            del sys.argv[i:i + 2]
    if len(sys.argv) < 5 or sys.argv[1] not in ("vit", "gpt") or (sys.argv[1] == "gpt" and len(sys.argv) < 6):
        sys.exit(__doc__)
    which, steps, threads, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    n = (steps + WARMUP) * batch
    if which == "vit":
        model = torch_models.ViT()
        images = torch_models.fashion_mnist("train-images-idx3-ubyte")
        x = torch.tensor(list(images[16:16 + n * 784]), dtype=torch.float32)
        x = x.reshape(n, 28, 28, 1) / 255.0
        y = torch.tensor(list(torch_models.fashion_mnist("train-labels-idx1-ubyte")[8:8 + n]), dtype=torch.int64)
    else:
        t, width, blocks = shape
        model = torch_models.CharGPT(context=t, width=width, blocks=blocks, mlp=4 * width)
        data = open(sys.argv[5], "rb").read()
        if len(data) < n * t + 1:
            sys.exit("torch_transformers.py: %s is too short for %d windows" % (sys.argv[5], n))
        w = torch.tensor(list(data[:n * t + 1]), dtype=torch.int64)
        x = w[:-1].reshape(n, t)
        y = w[1:].reshape(n, t)
    model, x, y = model.to(device), x.to(device), y.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    cuda = device.startswith("cuda")
    scaler = torch.cuda.amp.GradScaler() if cuda and autocast == torch.float16 else None
    t0 = None
    for s in range(steps + WARMUP):
        if s == WARMUP:
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        xb, yb = x[s * batch:(s + 1) * batch], y[s * batch:(s + 1) * batch]
        opt.zero_grad()
        with torch.autocast(device.split(":")[0], dtype=autocast) if autocast else contextlib.nullcontext():
            out = model(xb)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), yb.reshape(-1))
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
    if cuda:
        torch.cuda.synchronize()
    sec = time.perf_counter() - t0
    res = {"model": which, "steps": steps, "batch": batch, "threads": threads, "seconds": sec, "torch": torch.__version__,
           "attention": torch_models.ATTENTION, "device": device,
           "autocast": str(autocast).replace("torch.", "") if autocast else "fp32"}
    if which == "vit":
        res["images_per_second"] = steps * batch / sec
    else:
        res["tokens_per_second"] = steps * batch * t / sec
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
