#!/usr/bin/env python3
"""The tables of scripts/gpu_check.sh, from `clnet bench --json` and tools/bench/torch_gpu.py:

  1. the course's CPU-vs-GPU table: every measured device's seed-CNN training speed and epoch
     time, and its speed-up over the fastest CPU-type device measured;
  2. clnet against PyTorch on the same GPU: epoch time, batch-1 latency and SGEMM 1024^3, with
     the ratios the project targets (epoch <= 1.0x PyTorch's, SGEMM >= 70% of cuBLAS).

usage: gpu_report.py --clnet BENCH.json [--gpu SEL]... [--torch TORCH.json | --torch-note TEXT]
                     [--markdown FILE]
"""
import argparse
import json
import sys


def fmt(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clnet", required=True, help="clnet bench --json output")
    ap.add_argument("--gpu", action="append", default=[], help="selector of a GPU among the measured devices")
    ap.add_argument("--torch", help="torch_gpu.py output")
    ap.add_argument("--torch-note", default="PyTorch with CUDA or ROCm is not installed",
                    help="what to say when there is no PyTorch figure")
    ap.add_argument("--markdown", help="also write the tables to this file")
    a = ap.parse_args()
    with open(a.clnet) as f:
        runs = json.load(f)
    torch = None
    if a.torch:
        with open(a.torch) as f:
            torch = json.load(f)

    out = ["## clnet: CPU vs GPU (seed CNN, batch 64, Adam; epoch = 60,000 images)", ""]
    cpus = [r for r in runs if r["device"] not in a.gpu]
    ref = max(cpus, key=lambda r: r["train_images_per_second"]) if cpus else None
    ref_name = f"{ref['device']}" if ref else "none"
    out += [f"| device | kind | name | train img/s | epoch s | speed-up vs {ref_name} |", "|---|---|---|---|---|---|"]
    for r in runs:
        up = ref["epoch_seconds"] / r["epoch_seconds"] if ref and r["epoch_seconds"] > 0 else None
        out.append(f"| {r['device']} | {'GPU' if r['device'] in a.gpu else 'CPU'} | {r['name']} | "
                   f"{r['train_images_per_second']:.0f} | {r['epoch_seconds']:.1f} | {fmt(up, 2)}x |")
    if not a.gpu:
        out += ["", "no GPU: no OpenCL GPU device was found, so there is no GPU row and no PyTorch comparison."]

    for sel in a.gpu:
        g = next((r for r in runs if r["device"] == sel), None)
        out += ["", f"## clnet vs PyTorch on {g['name'] if g else sel}", ""]
        if g is None:
            out.append(f"clnet bench did not measure {sel} (see its messages above).")
            continue
        if torch is None:
            out.append(f"no PyTorch figure: {a.torch_note}.")
            continue
        note = "" if torch["device"] == g["name"] else f" (PyTorch ran on '{torch['device']}')"
        out += [f"| figure | clnet {sel} | {torch['runner']}{note} | clnet / PyTorch | target |",
                "|---|---|---|---|---|"]
        rows = [("seed CNN epoch s", "epoch_seconds", "<= 1.00"),
                ("training img/s", "train_images_per_second", ""),
                ("batch-1 latency median us", "latency_median_us", ""),
                ("batch-1 latency p99 us", "latency_p99_us", ""),
                ("SGEMM 1024^3 GFLOP/s", "sgemm_gflops", ">= 0.70")]
        for label, key, target in rows:
            c, t = g.get(key), torch.get(key)
            ratio = c / t if c is not None and t else None
            out.append(f"| {label} | {fmt(c)} | {fmt(t)} | {fmt(ratio, 2)} | {target} |")
    text = "\n".join(out)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
