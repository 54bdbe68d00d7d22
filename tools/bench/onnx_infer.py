#!/usr/bin/env python3
"""One side of tools/bench/compare_onnx: times RUNS inferences (after one untimed) of a model
on one .npy input with THREADS threads and prints "timing: ... median X ms" as `clnet run
--repeat` does, and the runner's version.

usage: onnx_infer.py ort MODEL.onnx X.npy THREADS RUNS     (ONNX Runtime, CPU provider)
       onnx_infer.py torch MODEL.pt X.npy THREADS RUNS     (PyTorch, a TorchScript module)
Each run hands the input over and takes the output back as a NumPy array, as clnet's run feeds
and fetches.
"""
import statistics
import sys
import time

import numpy as np


def main():
    kind, model, xfile, threads, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    x = np.load(xfile)
    if kind == "ort":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        once = lambda: sess.run(None, {name: x})  # noqa: E731
        version = "onnxruntime %s" % ort.__version__
    else:
        import torch
        torch.set_num_threads(threads)
        m = torch.jit.load(model).eval()

        def once():
            with torch.inference_mode():
                return m(torch.from_numpy(x)).numpy()
        version = "torch %s" % torch.__version__
    once()
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        once()
        t.append(time.perf_counter() - t0)
    print("%s\ntiming: %d runs after 1 untimed: median %.3f ms, fastest %.3f ms" %
          (version, runs, statistics.median(t) * 1e3, min(t) * 1e3))


main()
