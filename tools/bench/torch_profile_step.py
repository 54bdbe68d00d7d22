#!/usr/bin/python3
"""PyTorch side of tools/bench/profile_step: torch.profiler over STEPS training steps of the
architectures of models/vit_fashion.net or models/char_gpt.net (tools/golden/torch_models.py),
after two untimed ones, on random inputs of clnet's shapes (the time of these ops does not
depend on the values). Prints one JSON line: the torch version, the profiled wall seconds per
step, the self CPU time per step of each category of tools/bench/profile_step, and every GEMM
(aten::mm, addmm, bmm) by shape with its self time.

usage: torch_profile_step.py vit|gpt STEPS THREADS BATCH [--attention manual|sdpa]

Each op's self time (its own time, not its children's) goes to one category, found from its
name and from its ancestors: anything under Optimizer.step is the optimizer; an op under the
autograd engine's evaluate_function is backward (which only splits attention in two).
"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golden"))
import torch_models  # noqa: E402

WARMUP = 2
GEMM = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm")
# Convolution is the ViT's patch embedding: clnet lowers it to im2col + GEMM.
CONV = ("aten::mkldnn_convolution", "aten::_convolution", "aten::convolution_backward", "aten::thnn_conv2d",
        "aten::_slow_conv2d_forward", "aten::_slow_conv2d_backward")
COPIES = ("aten::copy_", "aten::clone", "aten::contiguous", "aten::transpose", "aten::permute", "aten::t",
          "aten::view", "aten::reshape", "aten::_reshape_alias", "aten::_unsafe_view", "aten::expand",
          "aten::as_strided", "aten::cat", "aten::flatten", "aten::empty_like", "aten::unsqueeze", "aten::squeeze",
          "aten::select", "aten::slice", "aten::split", "aten::unbind", "aten::alias", "aten::detach")


def category(name, ancestors):
    if any(a.startswith("Optimizer.") for a in ancestors) or name.startswith("Optimizer."):
        return "optimizer"
    backward = any(a.startswith("autograd::engine::evaluate_function") for a in ancestors)
    low = name.lower()
    chain = [name] + ancestors
    if "scaled_dot_product" in low or "flash_attention" in low or name == "aten::bmm" or \
            any("BmmBackward" in a or "ScaledDotProduct" in a for a in chain) or name == "aten::masked_fill":
        return "attention backward" if backward else "attention forward"
    if name in GEMM or name in CONV:
        return "GEMMs"
    if "layer_norm" in low:
        return "layer norm"
    if "gelu" in low:
        return "GELU"
    if "softmax" in low or "nll_loss" in low or "cross_entropy" in low:
        return "softmax and loss"
    if name in COPIES:
        return "copies and transposes"
    return "other"


def ancestors_of(e):
    out, p = [], e.cpu_parent
    while p is not None:
        out.append(p.name)
        p = p.cpu_parent
    return out


def main():
    if "--attention" in sys.argv:
        i = sys.argv.index("--attention")
        torch_models.ATTENTION = sys.argv[i + 1]
        del sys.argv[i:i + 2]
    if len(sys.argv) != 5 or sys.argv[1] not in ("vit", "gpt"):
        sys.exit(__doc__)
    which, steps, threads, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if which == "vit":
        model = torch_models.ViT()
        x = torch.rand(batch, 28, 28, 1)
        y = torch.randint(0, 10, (batch,))
    else:
        model = torch_models.CharGPT()
        x = torch.randint(0, 256, (batch, 128))
        y = torch.randint(0, 256, (batch, 128))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)

    def step():
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()

    for _ in range(WARMUP):
        step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        wall = time.perf_counter() - t0
    cats, names, gemms = {}, {}, {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CPU:
            continue
        us = e.self_cpu_time_total
        c = category(e.name, ancestors_of(e))
        cats[c] = cats.get(c, 0.0) + us * 1e-6 / steps
        names[(c, e.name)] = names.get((c, e.name), 0.0) + us * 1e-6 / steps
        if e.name in GEMM and e.input_shapes:
            key = "%s %s" % (e.name, json.dumps(e.input_shapes))
            g = gemms.setdefault(key, {"op": e.name, "shapes": e.input_shapes, "calls": 0, "seconds": 0.0})
            g["calls"] += 1
            g["seconds"] += e.cpu_time_total * 1e-6
    print(json.dumps({"model": which, "torch": torch.__version__, "attention": torch_models.ATTENTION,
                      "threads": threads, "batch": batch, "steps": steps, "wall_per_step": wall / steps,
                      "categories": cats,
                      "ops": sorted([[c, n, s] for (c, n), s in names.items()], key=lambda r: -r[2]), "gemms": list(gemms.values())}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
