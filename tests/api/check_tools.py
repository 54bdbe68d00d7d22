#!/usr/bin/env python3
"""tools/ is a client of the public library: it includes <clnet.h> and its own headers only,
and its programs link libclnet.so, not the internal static library.

usage: check_tools.py SOURCE_ROOT NM LIBCLNET_INTERNAL.a TOOLS_BUILD_DIR PROGRAM...

Fails (exit 1) naming, for every file under tools/, each #include of an engine, backend or
kernel header (by any path: "session.h", "data/checkpoint.h", "../../backends/x.h", <plan.h>)
and each quoted #include that is not clnet.h and does not resolve to a file in tools/; and,
for every PROGRAM, any function of the internal library it contains (it was linked with the
internal library) or the absence of any undefined cn_ call (it does not use libclnet.so).
Every executable directly in TOOLS_BUILD_DIR is checked too, so a program added to tools/
is covered before anyone adds it to the list."""
import os
import re
import subprocess
import sys

INTERNAL_DIRS = ("engine", "backends", "kernels_cl")
PUBLIC = "clnet.h"
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def internal_headers(root):
    """Paths (relative to the source root) of every header the library keeps to itself."""
    out = []
    for d in INTERNAL_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in files:
                if f.endswith(".h") and f != PUBLIC:
                    out.append(os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/"))
    return out


def tool_sources(root):
    for dirpath, _, files in os.walk(os.path.join(root, "tools")):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                yield os.path.join(dirpath, f)


def include_problems(root):
    internal = internal_headers(root)
    if not any(h.endswith("/session.h") for h in internal):
        return ["no engine headers found under %s: the scan is broken" % root]
    tools = os.path.realpath(os.path.join(root, "tools"))
    problems, scanned = [], 0
    for path in tool_sources(root):
        scanned += 1
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in INCLUDE.finditer(text):
            kind, inc = m.group(1), m.group(2).strip()
            line = text.count("\n", 0, m.start()) + 1
            where = "%s:%d" % (os.path.relpath(path, root), line)
            if os.path.basename(inc) == PUBLIC and ".." not in inc:
                continue
            # a quoted include is first looked up beside the file (a relative path that climbs
            # out of tools/, ../../backends/..., is judged by where it lands), then in tools/
            target = os.path.realpath(os.path.join(os.path.dirname(path), inc))
            if kind == '"' and not os.path.exists(target):
                target = os.path.realpath(os.path.join(tools, inc))
            if kind == '"' and os.path.exists(target) and target.startswith(tools + os.sep):
                continue
            norm = os.path.normpath(inc).replace(os.sep, "/")
            hit = [h for h in internal if h == norm or h.endswith("/" + norm.lstrip("./"))]
            if hit or os.path.exists(target):
                problems.append("%s includes %s%s%s, an internal header (%s): use <clnet.h>" %
                                (where, kind, inc, ">" if kind == "<" else '"', hit[0] if hit else target))
            elif kind == '"':
                problems.append('%s includes "%s", which is neither clnet.h nor a header of tools/' % (where, inc))
    if scanned < 10:
        problems.append("only %d files found under tools/: the scan is broken" % scanned)
    return problems


def symbols(nm, path, *flags):
    out = subprocess.run([nm, *flags, path], check=True, capture_output=True, text=True).stdout
    return [line.split() for line in out.splitlines() if line.strip() and not line.endswith(":")]


def link_problems(nm, internal_lib, programs):
    # the functions the internal library defines (globals: T), each linked into a program that
    # takes the library statically
    lib = {s[-1] for s in symbols(nm, internal_lib, "--defined-only") if len(s) >= 3 and s[-2] == "T"}
    if len(lib) < 100:
        return ["only %d functions found in %s: the scan is broken" % (len(lib), internal_lib)]
    problems = []
    for prog in programs:
        name = os.path.basename(prog)
        defined = {s[-1] for s in symbols(nm, prog, "--defined-only") if len(s) >= 3}
        inside = sorted(defined & lib)
        if inside:
            problems.append("%s contains %d functions of the internal library (%s, ...): link libclnet.so "
                            "(clnet_public_dep)" % (name, len(inside), ", ".join(inside[:3])))
        calls = [s[-1] for s in symbols(nm, prog, "-D", "--undefined-only") if s[-1].startswith("cn_")]
        if not calls:
            problems.append("%s calls nothing of libclnet.so dynamically" % name)
    return problems


def executables(directory):
    for f in sorted(os.listdir(directory)):
        p = os.path.join(directory, f)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            with open(p, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    yield p


def main():
    if len(sys.argv) < 6:
        print(__doc__, file=sys.stderr)
        return 2
    root, nm, internal_lib, build_dir = sys.argv[1:5]
    programs = list(dict.fromkeys([os.path.realpath(p) for p in sys.argv[5:]] +
                                  [os.path.realpath(p) for p in executables(build_dir)]))
    problems = include_problems(root) + link_problems(nm, internal_lib, programs)
    for p in problems:
        print(p)
    print("%d problems in tools/ (%d programs checked)" % (len(problems), len(programs)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
