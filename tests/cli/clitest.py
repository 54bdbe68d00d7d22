"""The harness of the CLI tests (stdlib only): run the built clnet, check its exit status and
output, register checks and run them in file order, in a scratch directory.

A test file is run as test_X.py PATH/TO/clnet [SOURCE_ROOT]; it registers checks with @test and
ends with sys.exit(clitest.main()). Each check prints one line, the run ends with "N passed, N
failed" and exits 1 if any check failed. CLNET_CLI_TESTS (comma-separated names) runs a subset.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

CLNET = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
ROOT = os.environ.get("CLNET_SOURCE_ROOT") or (sys.argv[2] if len(sys.argv) > 2 else
                                               os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.environ.get("CLNET_TEST_DATA", "/usr/share/datasets/fashion-mnist")
DEVICE = os.environ.get("CLNET_TEST_DEVICE", "omp")

SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "runtime error:")

results = {"passed": 0, "failed": 0, "skipped": 0}
TMP = tempfile.mkdtemp(prefix="clnet-cli-test-")


class Skip(Exception):
    pass


class Result:
    def __init__(self, args, rc, out, err, seconds, raw=b""):
        self.args, self.rc, self.out, self.err, self.seconds = args, rc, out, err, seconds
        self.raw = raw  # stdout as bytes

    @property
    def both(self):
        return self.out + self.err

    def describe(self):
        return "clnet %s -> rc %s (%.1fs)\n--- stdout:\n%s--- stderr:\n%s" % (
            " ".join(self.args), self.rc, self.seconds, self.out[-3000:], self.err[-3000:])


def run(args, env=None, timeout=300, stdin=None):
    full_env = dict(os.environ)
    full_env.pop("CLNET_DEVICE", None)
    if env:
        full_env.update(env)
    t0 = time.monotonic()
    try:
        p = subprocess.run([CLNET] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env,
                           timeout=timeout, stdin=subprocess.DEVNULL if stdin is None else stdin, cwd=TMP)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("clnet %s timed out after %ss" % (" ".join(args), e.timeout))
    return Result(args, p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"),
                  time.monotonic() - t0, p.stdout)


def check(cond, msg, r=None):
    if not cond:
        raise AssertionError(msg + ("\n" + r.describe() if r is not None else ""))


def no_crash(r):
    """A clean exit: no signal (negative rc from subprocess, or a shell-style 128+N), no
    sanitizer report."""
    check(0 <= r.rc < 128, "crashed or killed (rc %s)" % r.rc, r)
    for m in SANITIZER_MARKERS:
        check(m not in r.err, "sanitizer report (%s)" % m, r)


def fails(r, rc=None, want=()):
    """Exited non-zero without crashing, with every string of want in stdout+stderr."""
    no_crash(r)
    check(r.rc != 0, "expected a non-zero exit status", r)
    if rc is not None:
        check(r.rc == rc, "expected exit status %d" % rc, r)
    for w in want:
        check(w in r.both, "expected %r in the output" % w, r)


def ok(r):
    no_crash(r)
    check(r.rc == 0, "expected exit status 0", r)


TESTS = []


def test(fn):
    """Registers a check; main() runs them in file order."""
    TESTS.append(fn)
    return fn


def run_test(fn):
    name = fn.__name__[len("test_"):]
    try:
        fn()
    except Skip as e:
        results["skipped"] += 1
        print("SKIP %s: %s" % (name, e), flush=True)
    except AssertionError as e:
        results["failed"] += 1
        print("FAIL %s: %s" % (name, e), flush=True)
    except Exception as e:  # a bug in the test itself counts as a failure too
        results["failed"] += 1
        print("FAIL %s: unexpected %s: %s" % (name, type(e).__name__, e), flush=True)
    else:
        results["passed"] += 1
        print("ok   %s" % name, flush=True)


def need_data():
    names = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
    for n in names:
        if not (os.path.exists(os.path.join(DATA, n)) or os.path.exists(os.path.join(DATA, n + ".gz"))):
            raise Skip("no Fashion-MNIST files in %s (set CLNET_TEST_DATA)" % DATA)


def path(name):
    return os.path.join(TMP, name)


def write(name, data):
    p = path(name)
    with open(p, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    return p


def pgm(name, w, h, pixels=None):
    if pixels is None:  # a bright blob on black, like a Fashion-MNIST item
        pixels = bytes(255 if (abs(x - w / 2) < w / 4 and abs(y - h / 2) < h / 3) else 0
                       for y in range(h) for x in range(w))
    return write(name, b"P5\n%d %d\n255\n" % (w, h) + pixels)


def main():
    if not CLNET or not os.access(CLNET, os.X_OK):
        print("usage: %s PATH/TO/clnet [SOURCE_ROOT]" % os.path.basename(sys.argv[0]))
        print("0 passed, 1 failed")
        return 1
    only = os.environ.get("CLNET_CLI_TESTS")  # comma-separated subset, for debugging
    try:
        for fn in TESTS:
            if not only or fn.__name__[len("test_"):] in only.split(","):
                run_test(fn)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    if results["skipped"]:
        print("%d skipped" % results["skipped"])
    print("%d passed, %d failed" % (results["passed"], results["failed"]))
    return 1 if results["failed"] else 0
