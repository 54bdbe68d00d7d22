#!/usr/bin/env python3
"""An embedder's build against the build tree: a tiny program that includes <clnet.h>,
compiled and linked with nothing but `pkg-config --cflags --libs clnet` pointed at meson's
uninstalled .pc file, then run against the libclnet.so it names.

    check_pkgconfig.py PKG_CONFIG UNINSTALLED_DIR LIBCLNET SANITIZE CC...
"""
import os
import subprocess
import sys
import tempfile

PROGRAM = r"""
#include <clnet.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    cn_program *p;
    if (cn_program_create(&p) != CN_OK) return 1;
    cn_input(p, "x", 2, (int64_t[]){CN_BATCH, 3}, CN_F32);
    const char *name = NULL;
    int64_t shape[CN_MAX_DIMS];
    int ok = cn_program_num_inputs(p) == 1 && cn_program_input_info(p, 0, &name, NULL, shape, NULL) == CN_OK &&
             strcmp(name, "x") == 0 && shape[0] == CN_BATCH;
    cn_program_free(p);
    printf("clnet %s: %s\n", cn_version(), ok ? "ok" : "wrong");
    return ok ? 0 : 1;
}
"""


def main():
    pkg_config, uninstalled, lib, sanitize, cc = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
    env = dict(os.environ, PKG_CONFIG_PATH=uninstalled)
    flags = subprocess.run([pkg_config, "--cflags", "--libs", "clnet"], env=env, check=True, capture_output=True,
                           text=True).stdout.split()
    print("pkg-config --cflags --libs clnet:", " ".join(flags))
    # a sanitizer build's library needs its runtime in the program too
    extra = ["-fsanitize=" + sanitize] if sanitize not in ("", "none") else []
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "embed.c"), os.path.join(tmp, "embed")
        with open(src, "w") as f:
            f.write(PROGRAM)
        r = subprocess.run(cc + ["-std=c11", src, "-o", exe] + flags + extra, capture_output=True, text=True)
        if r.returncode:
            print(r.stdout + r.stderr)
            print("FAIL: compiling against the uninstalled clnet.pc")
            return 1
        run_env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(os.path.abspath(lib)))
        r = subprocess.run([exe], env=run_env, capture_output=True, text=True)
        print(r.stdout + r.stderr, end="")
        return r.returncode


if __name__ == "__main__":
    sys.exit(main())
