#!/usr/bin/python3
"""Writes OUT/<family>/: model.onnx exported by PyTorch from a torchvision classifier with
seeded random weights, and test_data_set_0/{input_0,output_0}.pb with a batch of 2 images
(64x64) and PyTorch's outputs: the layout of the ONNX project's backend tests, replayed by
test_onnx_nodes --fixtures OUT on every device. The files are too large to commit (ResNet-18
alone is 45 MB), so the test writes them from the pinned Debian packages (python3-torch 1.13,
python3-torchvision 0.14; scripts/setup.sh installs them): the same versions give the same
files.

Usage: make_torchvision.py OUT [--check TEST_ONNX_NODES] [NAME...]
  (exit 77, skipped, without torch or torchvision). The files are made once per build
  folder (OUT/stamp: the versions and this script's hash). With --check, test_onnx_nodes
  then replays them on every device, exports each imported program back to ONNX
  (cn_program_to_onnx), imports and replays that too, and Debian's onnx checker must accept
  every export.

The smallest variant of each family (issue 18 §3). Batch norm stays a BatchNormalization node
(TrainingMode.PRESERVE of a model in eval mode) so that the import path that fine-tuning uses
is the one tested; the default (EVAL) would fold it into the convolutions. Random weights
with default initialisation make deep nets' logits tiny or huge; each BatchNormalization's
running statistics are set from a batch of data first (a few steps in train mode without
gradients), so activations stay of order one through the depth and a 1e-4 comparison means
something."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "squeezenet1_1", "shufflenet_v2_x0_5",
            "efficientnet_b0", "densenet121", "regnet_y_400mf"]


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    try:
        import numpy as np  # noqa: F401
        import onnx
        import torch
        import torchvision
    except ImportError as e:
        print("skipped: %s (scripts/setup.sh installs python3-torch and python3-torchvision)" % e)
        return 77
    import hashlib
    import shutil
    import subprocess
    args = sys.argv[1:]
    out = args.pop(0)
    check = None
    if args[:1] == ["--check"]:
        check = args[1]
        args = args[2:]
    names = args or FAMILIES
    digest = hashlib.sha256()
    for script in ("make_torchvision.py", "make_fixtures.py"):
        with open(os.path.join(HERE, script), "rb") as f:
            digest.update(f.read())
    stamp = "%s %s %s %s\n" % (torch.__version__, torchvision.__version__, digest.hexdigest(), " ".join(names))
    stamp_path = os.path.join(out, "stamp")
    if not (os.path.exists(stamp_path) and open(stamp_path).read() == stamp):
        shutil.rmtree(out, ignore_errors=True)
        export(out, names, torch, torchvision)
        with open(stamp_path, "w") as f:
            f.write(stamp)
    if not check:
        return 0
    r = subprocess.run([check, "--fixtures", out, "--export"])
    if r.returncode != 0:
        return 1
    for name in names:
        onnx.checker.check_model(onnx.load(os.path.join(out, name, "clnet_export.onnx")), full_check=True)
        print("checker ok:", name, "exported by clnet")
    return 0


def export(out, names, torch, torchvision):
    sys.path.insert(0, HERE)
    import make_fixtures
    torch.set_num_threads(1)
    for name in names:
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None, num_classes=10)
        calib = torch.rand(8, 3, 64, 64)
        with torch.no_grad():
            model.train()  # running statistics of real activations (momentum None: a plain average)
            for m in model.modules():
                if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                    m.reset_running_stats()
                    m.momentum = None
            for _ in range(2):
                model(calib)
        model.eval()
        x = torch.rand(2, 3, 64, 64)
        make_fixtures.write(name, model, x, 14, keep_bn=True, out=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
