#!/usr/bin/env python3
"""Tables of `clnet train --report` runs in each precision, for scripts/gpu_check.sh (issue 17:
on a GPU, what 16-bit storage gains in speed and memory against float32).

usage: precision_report.py DIR [--markdown FILE]

DIR holds reports named prec-DEVICE-MODEL-PRECISION-rROUND.json (DEVICE with ':' as '_'); the
last round of each is quoted (the earlier ones warm the driver's kernel cache). Per model and
device: training images/s in fp32, bf16 and fp16, each 16-bit one's time against fp32's, and
the peak device bytes of each (peak_device_bytes, over the whole run) against fp32's.
"""
import argparse
import glob
import json
import os
import re
import sys

NAME = re.compile(r"prec-(?P<dev>[^-]+)-(?P<model>.+)-(?P<prec>fp32|bf16|fp16)-r(?P<round>\d+)\.json$")
PRECISIONS = ("fp32", "bf16", "fp16")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    runs = {}  # (model, dev) -> prec -> (round, img/s, peak)
    for path in sorted(glob.glob(os.path.join(a.dir, "prec-*.json"))):
        m = NAME.search(os.path.basename(path))
        if not m:
            continue
        try:
            rec = json.load(open(path))[-1]
        except (OSError, ValueError, IndexError) as e:
            print("precision_report: %s unreadable (%s)" % (path, e), file=sys.stderr)
            continue
        dev = m["dev"].replace("_", ":")
        peak = rec.get("peak_device_bytes", {}).get(dev)
        key, rnd = (m["model"], dev), int(m["round"])
        old = runs.setdefault(key, {}).get(m["prec"])
        if old is None or rnd > old[0]:
            runs[key][m["prec"]] = (rnd, rec["images_per_second"], peak)
    if not runs:
        sys.exit("precision_report: no prec-*.json report in %s" % a.dir)

    def cell(prec, got, col):
        if prec not in got:
            return "failed"
        v = got[prec][col]
        if v is None:
            return "?"
        text = "%.0f" % v if col == 1 else "%.1f MiB" % (v / 1048576)
        if prec != "fp32" and "fp32" in got and got["fp32"][col]:
            ratio = got["fp32"][1] / v if col == 1 else v / got["fp32"][col]
            text += " (%.2fx %s)" % (ratio, "the time" if col == 1 else "fp32's")
        return text

    lines = ["| model | device | " + " | ".join("%s img/s" % p for p in PRECISIONS) + " | " +
             " | ".join("%s peak" % p for p in PRECISIONS) + " |", "|---|---|" + "---|" * 6]
    for (model, dev), got in sorted(runs.items()):
        lines.append("| %s | %s | " % (model, dev) + " | ".join(cell(p, got, 1) for p in PRECISIONS) + " | " +
                     " | ".join(cell(p, got, 2) for p in PRECISIONS) + " |")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.markdown:
        with open(a.markdown, "a") as f:
            f.write("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
