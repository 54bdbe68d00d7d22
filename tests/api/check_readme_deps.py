#!/usr/bin/env python3
"""The README's Dependencies section names every Debian package scripts/setup.sh installs,
each once (it once listed half of them twice, mid-sentence).

    check_readme_deps.py README.md scripts/setup.sh
"""
import re
import sys


def main():
    readme, setup = open(sys.argv[1]).read(), open(sys.argv[2]).read()
    section = readme.split("## Dependencies", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`([a-z0-9][a-z0-9.+-]*)`", section)
    pkgs = set()
    for m in re.finditer(r"PKGS(?:\+)?=\(([^)]*)\)", setup):
        body = re.sub(r"#[^\n]*", "", m.group(1))
        pkgs.update(body.split())
    twice = sorted({n for n in named if named.count(n) > 1})
    missing = sorted(pkgs - set(named))
    for n in twice:
        print(f"FAIL: README Dependencies names `{n}` {named.count(n)} times")
    for n in missing:
        print(f"FAIL: scripts/setup.sh installs {n}, which README Dependencies does not name")
    print(f"{len(pkgs)} packages in setup.sh, {len(set(named))} named in the README")
    return 1 if twice or missing else 0


if __name__ == "__main__":
    sys.exit(main())
