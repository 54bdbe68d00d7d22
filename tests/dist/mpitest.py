"""What the dist tests share: the data, mpirun bound to loopback, and counted checks."""
import os
import tempfile

DATA = os.environ.get("CLNET_TEST_DATA", "/usr/share/datasets/fashion-mnist")
TOL = 1e-4  # relative, between N ranks and one process: see test_mpi.py
failed = passed = 0


def mpi(mpirun):
    """mpirun on loopback only: shared memory between ranks, TCP (if used at all) and the
    runtime on lo."""
    return [mpirun, "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader,tcp",
            "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo", "-x", "OMP_NUM_THREADS=1",
            "-x", "CLNET_CACHE_DIR"]


def check(cond, what, r=None):
    global failed, passed
    if cond:
        passed += 1
        print("ok   " + what)
    else:
        failed += 1
        print("FAIL " + what)
        if r is not None:
            print("  rc", r.returncode, "\n  stdout:", r.stdout[-2000:], "\n  stderr:", r.stderr[-2000:])


def scratch(prefix):
    """A new directory, and a function naming files in it."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    return lambda name: os.path.join(tmp, name)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def close(a, b):
    return abs(a - b) <= TOL * abs(a)


def result():
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0
