#!/usr/bin/python3
"""The models of tools/bench/compare_onnx, made once per size into a cache folder with Debian's
python3-torch and python3-torchvision (the versions the table prints): torchvision's ResNet-18
and MobileNet-v2 with seeded random weights (torch.manual_seed(0), weights=None: no download),
in eval mode,
  NAME_SIZE.onnx  exported by the TorchScript exporter, opset 13, a free batch, SIZE x SIZE RGB;
  NAME_SIZE.pt    the same module traced to TorchScript, which the PyTorch runner loads (so the
                  PyTorch side runs the very same weights without torchvision installed);
and x_SIZE_bBATCH.npy, seeded uniform [0,1) inputs.

usage: onnx_models.py DIR SIZE[,SIZE..] BATCH[,BATCH..] NAME[,NAME..]
"""
import os
import sys

import numpy as np
import torch
import torchvision

MODELS = {"resnet18": torchvision.models.resnet18, "mobilenet_v2": torchvision.models.mobilenet_v2}


def main():
    out, sizes, batches, names = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), sys.argv[4].split(",")
    os.makedirs(out, exist_ok=True)
    for size in map(int, sizes):
        for b in map(int, batches):
            p = os.path.join(out, "x_%d_b%d.npy" % (size, b))
            if not os.path.exists(p):
                np.save(p, np.random.default_rng(size * 1000 + b).random((b, 3, size, size), dtype=np.float32))
        for name in names:
            onnx_path = os.path.join(out, "%s_%d.onnx" % (name, size))
            pt_path = os.path.join(out, "%s_%d.pt" % (name, size))
            if os.path.exists(onnx_path) and os.path.exists(pt_path):
                continue
            torch.manual_seed(0)
            m = MODELS[name](weights=None).eval()
            x = torch.rand(2, 3, size, size)
            torch.onnx.export(m, (x,), onnx_path + ".tmp", input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=13,
                              do_constant_folding=True)
            with torch.no_grad():
                torch.jit.trace(m, x).save(pt_path + ".tmp")
            os.replace(onnx_path + ".tmp", onnx_path)
            os.replace(pt_path + ".tmp", pt_path)
            print("onnx_models: wrote %s and %s" % (onnx_path, pt_path), file=sys.stderr)
    print("torch %s, torchvision %s" % (torch.__version__, torchvision.__version__))


main()
