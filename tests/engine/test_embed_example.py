"""The embedder's example (tools/examples/embed.c) on every device clnet lists, in two
processes: `make` writes an inference checkpoint of a program built in code; `use` rebuilds
the program from the file alone, must discover its inputs (names, shapes with the batch,
dtypes), predict from the probabilities without labels, and fine-tune to every point right.

    test_embed_example.py EMBED CLNET
"""
import os
import subprocess
import sys
import tempfile

WANT = [
    "input  features       [batch,2]  f32",
    "input  labels         [batch]    i32",
    "output probabilities  [batch,2]  f32",
    "stored program.graph",
    "after fine-tuning: 4 of 4 right",
]


def main():
    embed, clnet = sys.argv[1], sys.argv[2]
    listing = subprocess.run([clnet, "devices"], capture_output=True, text=True, timeout=120, check=True).stdout
    selectors = [line.split()[0] for line in listing.splitlines()[1:] if line.strip()]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for sel in selectors:
            path = os.path.join(tmp, sel.replace(":", "_") + ".ckpt")
            made = subprocess.run([embed, sel, "make", path], capture_output=True, text=True, timeout=300)
            used = subprocess.run([embed, sel, "use", path], capture_output=True, text=True, timeout=300)
            out = used.stdout
            missing = [w for w in WANT if w not in out]
            # an inference checkpoint holds no optimizer state
            state = [line for line in out.splitlines() if line.startswith("stored") and (".m " in line or ".v " in line)]
            ok = made.returncode == 0 and used.returncode == 0 and not missing and not state
            print(f"{'ok  ' if ok else 'FAIL'} {sel}")
            if not ok:
                print(made.stdout + made.stderr + out + used.stderr)
                print(f"missing lines: {missing}; optimizer state stored: {state}")
            failed += not ok
    if not selectors:
        print("FAIL: clnet devices listed nothing")
        failed = 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
