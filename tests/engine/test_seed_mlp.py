"""The course's first example (tools/examples/seed_mlp.c) on every device clnet lists: its
printed layer output must equal sigmoid(W x) computed here, to the two decimals it prints.

    test_seed_mlp.py SEED_MLP CLNET
"""
import math
import subprocess
import sys

W = [[1, -2, 2], [2, 1, -4], [1, -1, 0]]
X = [0.5, 0.9, -0.3]


def main():
    seed_mlp, clnet = sys.argv[1], sys.argv[2]
    listing = subprocess.run([clnet, "devices"], capture_output=True, text=True, timeout=120, check=True).stdout
    selectors = [line.split()[0] for line in listing.splitlines()[1:] if line.strip()]
    want = [1 / (1 + math.exp(-sum(w * x for w, x in zip(row, X)))) for row in W]
    failed = 0
    for sel in selectors:
        r = subprocess.run([seed_mlp, sel], capture_output=True, text=True, timeout=300)
        got = r.stdout.split()
        # two decimals printed: each must be the rounding of the exact value (0.005 + f32 slack)
        ok = r.returncode == 0 and len(got) == 3 and all(abs(float(g) - w) <= 0.005 + 1e-6 for g, w in zip(got, want))
        print(f"{'ok  ' if ok else 'FAIL'} {sel}: {r.stdout.strip()} (sigmoid(Wx) = {' '.join(f'{v:.4f}' for v in want)}) {r.stderr.strip()}")
        failed += not ok
    if not selectors:
        print("FAIL: clnet devices listed nothing")
        failed = 1
    print(f"{len(selectors) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
