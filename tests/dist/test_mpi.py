"""clnet train under mpirun on this machine (loopback only, every run bounded in time):

- 2 ranks with global batch B follow one process with batch B: the checkpoints they write
  evaluate to the same test loss within 1e-4 relative (both average the gradients of the same
  B rows; the order of the sums differs, about 1e-7 relative per step, measured 1e-6 or less
  after 16 steps);
- a checkpoint written by 2 ranks resumes on 1 rank and on 2;
- a batch that differs between ranks is refused at start, naming it;
- a rank killed with SIGKILL ends the whole run with a non-zero status within 60 s, and the
  checkpoint of the last finished epoch stays loadable.

    test_mpi.py CLNET MPIRUN SOURCE_ROOT
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

CLNET, MPIRUN, ROOT = sys.argv[1], sys.argv[2], sys.argv[3]
DATA = os.environ.get("CLNET_TEST_DATA", "/usr/share/datasets/fashion-mnist")
# Loopback only: shared memory between ranks, TCP (if used at all) and the runtime on lo.
MPI = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader,tcp",
       "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo", "-x", "OMP_NUM_THREADS=1",
       "-x", "CLNET_CACHE_DIR"]
failed = passed = 0


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


def run(args, timeout=240):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_loss(ck):
    r = run([CLNET, "eval", ck, "--data", DATA, "--limit", "512", "--device", "omp"])
    return float(r.stdout.split("loss ")[1].split()[0]) if r.returncode == 0 else float("nan")


def main():
    tmp = tempfile.mkdtemp(prefix="clnet-mpi-")
    model = os.path.join(tmp, "mlp.net")
    with open(model, "w") as f:
        f.write("input 28 28 1\nflatten\ndense 32 relu\ndense 10\n")
    common = ["--data", DATA, "--limit", "1024", "--device", "omp", "--batch", "64", "-q"]
    one, two = os.path.join(tmp, "one.ckpt"), os.path.join(tmp, "two.ckpt")
    r1 = run([CLNET, "train", model, "--epochs", "1", "--save", one, *common])
    check(r1.returncode == 0, "one process trains", r1)
    r2 = run(MPI + ["-np", "2", CLNET, "train", model, "--epochs", "1", "--save", two, *common])
    check(r2.returncode == 0, "mpirun -np 2 trains", r2)
    a, b = test_loss(one), test_loss(two)
    check(abs(a - b) <= 1e-4 * abs(a), f"2 ranks match one process: test loss {b:.6f} vs {a:.6f}")

    # resume the 2-rank checkpoint on 1 rank and on 2 ranks
    for np_ in (1, 2):
        ck = os.path.join(tmp, f"resume{np_}.ckpt")
        with open(two, "rb") as src, open(ck, "wb") as dst:
            dst.write(src.read())
        r = run(MPI + ["-np", str(np_), CLNET, "train", "-", "--resume", ck, "--save", ck, "--epochs", "2", *common])
        e = run([CLNET, "eval", ck, "--data", DATA, "--limit", "64", "--device", "omp"])
        check(r.returncode == 0 and "epoch 2" in e.stdout, f"a 2-rank checkpoint resumes on {np_} rank(s)", r)

    # a batch that differs between ranks is named at start
    r = run(MPI + ["-np", "1", CLNET, "train", model, "--epochs", "1", *common, ":",
                   "-np", "1", CLNET, "train", model, "--epochs", "1", *common[:-3], "--batch", "32", "-q"])
    check(r.returncode != 0 and "batch" in r.stderr and "rank 1" in r.stderr, "a different batch on rank 1 is named", r)

    # kill -9 of rank 1: the run ends, non-zero, and the last checkpoint stays loadable
    ck = os.path.join(tmp, "killed.ckpt")
    p = subprocess.Popen(MPI + ["-np", "2", CLNET, "train", model, "--epochs", "50", "--save", ck, "--data", DATA,
                                "--limit", "4096", "--device", "omp", "--batch", "64"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not os.path.exists(ck):
        time.sleep(0.2)
    victim = None
    for pid in os.listdir("/proc"):
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if b"OMPI_COMM_WORLD_RANK=1" in env and b"train" in cmd and ck.encode() in cmd:
            victim = int(pid)
    check(victim is not None and os.path.exists(ck), "found rank 1 after the first checkpoint")
    t0 = time.time()
    if victim:
        os.kill(victim, signal.SIGKILL)
    try:
        out, err = p.communicate(timeout=60)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        rc = None
    took = time.time() - t0
    check(rc not in (None, 0), f"killing rank 1 ends the run non-zero (rc {rc}, {took:.1f} s)")
    check(bool(err.strip()), "and says so on stderr")
    check(test_loss(ck) == test_loss(ck) and run([CLNET, "eval", ck, "--data", DATA, "--limit", "64",
                                                  "--device", "omp"]).returncode == 0,
          "the last checkpoint is still loadable")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
