#!/usr/bin/env python3
"""libclnet exports exactly the functions engine/include/clnet.h declares (with the clnet_*.h
parts it includes).

usage: check_exports.py NM LIBCLNET.so CLNET.h

Fails (exit 1) naming every exported symbol the header does not declare (an internal
function leaking into the ABI) and every declared function the library does not export (a
public call an embedding program could not link)."""
import os
import re
import subprocess
import sys

# Symbols the toolchain defines in every shared object.
TOOLCHAIN = {"_init", "_fini", "_edata", "_end", "__bss_start"}


def declared(header_text):
    text = re.sub(r"/\*.*?\*/", " ", header_text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^\s*#.*?(?<!\\)$", " ", text, flags=re.M | re.S)  # preprocessor lines
    # A function declaration names the function right before its parameter list. In a pointer
    # typedef, "cn_status (*cn_grad_hook)(", the return type is followed by "(*" and the
    # typedef's name by ")": neither is matched.
    return set(re.findall(r"\b(cn_\w+)\s*\((?!\s*\*)", text))


def exported(nm, lib):
    out = subprocess.run([nm, "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            names.add(parts[-1].split("@")[0])
    return names - TOOLCHAIN


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    nm, lib, header = sys.argv[1:]
    with open(header, encoding="utf-8") as f:
        text = f.read()
    # The parts clnet.h includes by quoted name, from its own folder.
    for part in re.findall(r'^\s*#\s*include\s+"(clnet_\w+\.h)"', text, flags=re.M):
        with open(os.path.join(os.path.dirname(header), part), encoding="utf-8") as f:
            text += "\n" + f.read()
    want = declared(text)
    have = exported(nm, lib)
    if len(want) < 20:
        print(f"only {len(want)} declarations found in {header}: the parser is broken", file=sys.stderr)
        return 1
    leaked, missing = sorted(have - want), sorted(want - have)
    for s in leaked:
        print(f"exported but not declared in clnet.h: {s}")
    for s in missing:
        print(f"declared in clnet.h but not exported: {s}")
    print(f"{len(have)} exported, {len(want)} declared, {len(leaked)} leaked, {len(missing)} missing")
    return 1 if leaked or missing else 0


if __name__ == "__main__":
    sys.exit(main())
