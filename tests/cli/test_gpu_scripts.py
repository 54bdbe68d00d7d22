#!/usr/bin/env python3
"""The GPU check's tools on a machine without a GPU (stdlib only):

  - scripts/gpu_bundle.sh makes a bundle from an existing build: binaries, model, data, the
    report tools and the .deb files of the ICD loader, CLBlast and libgomp;
  - the bundle's gpu_check.sh runs against the machine's CPU drivers (POCL here) with the
    bundled loader and CLBlast unpacked into its own directory and a private OCL_ICD_VENDORS:
    every GPU step says "no GPU", clnet bench measures the CPU devices, the speed-up table
    lists them, and the run passes;
  - tools/bench/gpu_report.py, given a GPU row and a PyTorch figure, prints clnet against
    PyTorch with the ratios (epoch and SGEMM), computed from its inputs;
  - tools/bench/torch_gpu.py measures the same figures with PyTorch on the host CPU when
    python3-torch is installed (skipped otherwise).

usage: test_gpu_scripts.py SOURCE_ROOT BUILD_DIR
"""
import atexit
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT, BUILD = (os.path.abspath(p) for p in sys.argv[1:3])
TMP = tempfile.mkdtemp(prefix="clnet-gpu-scripts-")
atexit.register(shutil.rmtree, TMP, True)
results = {"passed": 0, "failed": 0, "skipped": 0}


def check(name, cond, detail=""):
    results["passed" if cond else "failed"] += 1
    print(("ok   " if cond else "FAIL ") + name + ("" if cond or not detail else "\n" + detail))
    return cond


def run(cmd, timeout=900, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, **kw)
    return p.returncode, p.stdout


def test_bundle_and_check():
    bundle = os.path.join(TMP, "bundle")
    rc, out = run([os.path.join(ROOT, "scripts", "gpu_bundle.sh"), "--build", BUILD, "--out", bundle])
    if not check("gpu_bundle.sh makes a bundle", rc == 0, out):
        return
    for f in ("gpu_check.sh", "bin/clnet", "bin/test_ops", "lib/libclnet.so", "models/seed_cnn.net", "tools/torch_gpu.py",
              "tools/gpu_report.py", "README.txt", "data/train-images-idx3-ubyte.gz", "data/t10k-labels-idx1-ubyte.gz"):
        check(f"bundle holds {f}", os.path.exists(os.path.join(bundle, f)))
    for p in ("ocl-icd-libopencl1", "libclblast1", "libgomp1"):
        check(f"bundle holds the {p} .deb", len(glob.glob(os.path.join(bundle, "debs", p + "_*.deb"))) == 1)

    out_dir = os.path.join(TMP, "check")
    rc, out = run([os.path.join(bundle, "gpu_check.sh"), "--steps", "2", "--out", out_dir])
    check("gpu_check.sh passes without a GPU", rc == 0, out[-6000:])
    check("the GPU steps say 'no GPU'", out.count("no GPU") >= 3, out[-6000:])
    check("the bundled loader and CLBlast were unpacked",
          glob.glob(os.path.join(out_dir, "runtime", "usr", "lib", "*", "libOpenCL.so.1")) and
          glob.glob(os.path.join(out_dir, "runtime", "usr", "lib", "*", "libclblast.so.1")))
    icds = glob.glob(os.path.join(out_dir, "vendors", "*.icd"))
    check("the machine's OpenCL driver is registered in the private vendors directory",
          any("pocl" in open(f).read() for f in icds), str(icds))
    try:
        bench = json.load(open(os.path.join(out_dir, "bench.json")))
    except (OSError, ValueError) as e:
        bench = []
        check("clnet bench wrote its JSON", False, str(e))
    devices = [r["device"] for r in bench]
    check("clnet bench measured omp and the POCL device", "omp" in devices and "cl:0" in devices, str(devices))
    report = open(os.path.join(out_dir, "report.md")).read() if os.path.exists(os.path.join(out_dir, "report.md")) else ""
    check("the speed-up table lists every measured device",
          all(f"| {d} | CPU |" in report for d in devices) and devices, report)


def test_report_with_a_gpu():
    bench = [{"device": "omp", "name": "host", "train_images_per_second": 500.0, "epoch_seconds": 120.0,
              "latency_median_us": 900.0, "latency_p99_us": 1500.0, "sgemm_gflops": 40.0},
             {"device": "cl:1", "name": "Some GPU", "train_images_per_second": 20000.0, "epoch_seconds": 3.0,
              "latency_median_us": 300.0, "latency_p99_us": 400.0, "sgemm_gflops": 7000.0}]
    torch = {"runner": "PyTorch x (CUDA y)", "device": "Some GPU", "train_images_per_second": 30000.0,
             "epoch_seconds": 2.0, "latency_median_us": 250.0, "latency_p99_us": 350.0, "sgemm_gflops": 10000.0}
    bj, tj = os.path.join(TMP, "b.json"), os.path.join(TMP, "t.json")
    json.dump(bench, open(bj, "w"))
    json.dump(torch, open(tj, "w"))
    rc, out = run([sys.executable, os.path.join(ROOT, "tools", "bench", "gpu_report.py"), "--clnet", bj, "--gpu", "cl:1",
                   "--torch", tj])
    check("gpu_report.py runs", rc == 0, out)
    epoch = f"| seed CNN epoch s | 3.0 | 2.0 | {3.0 / 2.0:.2f} |"
    sgemm = f"| SGEMM 1024^3 GFLOP/s | 7000.0 | 10000.0 | {7000.0 / 10000.0:.2f} |"
    speedup = f"| cl:1 | GPU | Some GPU | 20000 | 3.0 | {120.0 / 3.0:.2f}x |"
    check("clnet vs PyTorch: epoch and SGEMM ratios, and the GPU's speed-up over the CPU",
          epoch in out and sgemm in out and speedup in out, out)


def test_torch_on_the_host():
    if run(["/usr/bin/python3", "-c", "import torch, numpy"])[0] != 0:
        results["skipped"] += 1
        print("skip torch_gpu.py on the host CPU: python3-torch is not installed")
        return
    j = os.path.join(TMP, "torch.json")
    rc, out = run(["/usr/bin/python3", os.path.join(ROOT, "tools", "bench", "torch_gpu.py"), "--device", "cpu",
                   "--steps", "2", "--json", j], env=dict(os.environ, OMP_NUM_THREADS="1"))
    ok = rc == 0 and os.path.exists(j)
    r = json.load(open(j)) if ok else {}
    check("torch_gpu.py measures the seed CNN, latency and SGEMM (host CPU)",
          ok and all(r.get(k, 0) > 0 for k in ("train_images_per_second", "epoch_seconds", "latency_median_us",
                                                "sgemm_gflops")), out)


test_bundle_and_check()
test_report_with_a_gpu()
test_torch_on_the_host()
print(f"{results['passed']} passed, {results['failed']} failed, {results['skipped']} skipped")
sys.exit(1 if results["failed"] else 0)
