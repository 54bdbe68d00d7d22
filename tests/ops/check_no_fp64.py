#!/usr/bin/env python3
"""fp64 is optional on OpenCL devices (absent on many Intel and mobile GPUs): no kernel may use
double precision. Fails naming each file and line that declares a double (scalar or vector) or
enables cl_khr_fp64. Comments are ignored. The GEMM tuner's double-precision checks run on the
host, never on the device.

usage: check_no_fp64.py KERNELS_DIR"""
import os
import re
import sys

BAD = re.compile(r"\bdouble(2|3|4|8|16)?\b|cl_khr_fp64|__opencl_c_fp64")


def strip_comments(text):
    # keep line numbers: replace comment bodies by as many newlines as they held
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    bad = checked = 0
    for name in sorted(os.listdir(sys.argv[1])):
        if not name.endswith(".cl"):
            continue
        checked += 1
        with open(os.path.join(sys.argv[1], name)) as f:
            for no, line in enumerate(strip_comments(f.read()).split("\n"), 1):
                if BAD.search(line):
                    print(f"FAIL {name}:{no}: double precision in a kernel: {line.strip()}")
                    bad += 1
    if checked == 0:
        sys.exit(f"no .cl files in {sys.argv[1]}")
    print(f"{checked} kernel sources checked: {bad} uses of double precision")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
