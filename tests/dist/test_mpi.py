"""clnet train under mpirun on this machine (loopback only: mpitest.mpi() passes --mca btl
self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo; every run bounded in time):

- 2 and 3 ranks with global batch B train the seed CNN like one process with batch B: the
  epoch's training loss (a global metric) and the test loss of the checkpoints they write agree within 1e-4
  relative. Both average the gradients of the same B rows; only the order of the sums differs
  (shard means weighted in double, then rounded to f32: about 1e-7 relative per step, measured
  1e-6 or less after 16 steps), while a gradient not averaged or counted twice moves the loss by
  more than 1e-2 within a few steps;
- 2 ranks with two devices each (omp + POCL: the in-process sum, then MPI) agree likewise;
- the all-reduce overlapped with the backward pass (the default; the CNN's gradients make 4
  buckets) and not (CLNET_MPI_OVERLAP=0) write byte-identical checkpoints on 2 and on 3
  ranks, and -v reports the exposed communication per step;
- a checkpoint written by 2 ranks resumes on 1 rank and on 2, one written by 1 process on 2;
- a model, data set or batch that differs between ranks is refused at start, naming it;
- a rank whose device fails mid-run (its memory cap leaves no room for the validation pass)
  ends every rank non-zero within 60 s, and the message names the device;
- a rank killed with SIGKILL ends the whole run with a non-zero status within 60 s, and the
  checkpoint of the last finished epoch stays loadable.

    test_mpi.py CLNET MPIRUN SOURCE_ROOT
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

from mpitest import DATA, check, close, mpi, result, scratch, write

CLNET, MPIRUN, ROOT = sys.argv[1], sys.argv[2], sys.argv[3]
MPI = mpi(MPIRUN)


def run(args, timeout=240, env=None):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env=None if env is None else {**os.environ, **env})


def timed(args, limit):
    """Runs args, which must end by themselves within limit seconds: (returncode or None, stderr, seconds)."""
    t0 = time.time()
    try:
        r = run(args, timeout=limit)
    except subprocess.TimeoutExpired:
        return None, "", limit
    return r.returncode, r.stderr, time.time() - t0


def test_loss(ck):
    r = run([CLNET, "eval", ck, "--data", DATA, "--limit", "512", "--device", "omp"])
    return float(r.stdout.split("loss ")[1].split()[0]) if r.returncode == 0 else float("nan")


def report_loss(path):
    try:
        return json.load(open(path))[-1]["loss"]
    except (OSError, ValueError, IndexError, KeyError):
        return float("nan")


def same_bytes(a, b):
    return os.path.exists(a) and os.path.exists(b) and open(a, "rb").read() == open(b, "rb").read()


def main():
    p = scratch("clnet-mpi-")
    model = write(p("mlp.net"), "input 28 28 1\nflatten\ndense 32 relu\ndense 10\n")
    other = write(p("other.net"), "input 28 28 1\nflatten\ndense 16 relu\ndense 10\n")
    common = ["--data", DATA, "--limit", "1024", "--device", "omp", "--batch", "64", "-q"]

    # one process against 2 and 3 ranks, overlapped and not: the seed CNN, whose gradients
    # make 4 buckets (a one-bucket model would overlap nothing)
    cnn = os.path.join(ROOT, "models", "seed_cnn.net")
    r1 = run([CLNET, "train", cnn, "--epochs", "1", "--save", p("one.ckpt"), "--report", p("one.json"), *common])
    check(r1.returncode == 0, "one process trains", r1)
    a = test_loss(p("one.ckpt"))
    for n in (2, 3):
        ck, ck0, rep = p(f"np{n}.ckpt"), p(f"np{n}-no-overlap.ckpt"), p(f"np{n}.json")
        r = run(MPI + ["-np", str(n), CLNET, "train", cnn, "--epochs", "1", "--save", ck, "--report", rep, "-v",
                       *common])
        check(r.returncode == 0, f"mpirun -np {n} trains", r)
        b = test_loss(ck)
        check(close(a, b), f"{n} ranks match one process: test loss {b:.7f} vs {a:.7f}")
        la, lb = report_loss(p("one.json")), report_loss(rep)
        check(close(la, lb), f"{n} ranks match one process: training loss {lb:.7f} vs {la:.7f}")
        m = re.search(r"MPI: (\d+) steps.* in (\d+) buckets, overlapped.*exposed ([0-9.]+) ms per step, of which "
                      r"([0-9.]+) ms waiting", r.stderr)
        check(m is not None and int(m.group(2)) > 1,
              f"-v reports the exposed communication per step of several buckets ({n} ranks)", r)
        r0 = run(MPI + ["-np", str(n), "-x", "CLNET_MPI_OVERLAP=0", CLNET, "train", cnn, "--epochs", "1",
                        "--save", ck0, "-v", *common])
        m0 = re.search(r"after the backward pass \(not overlapped\); exposed ([0-9.]+) ms per step", r0.stderr)
        check(r0.returncode == 0 and m0 is not None, f"CLNET_MPI_OVERLAP=0 turns the overlap off ({n} ranks)", r0)
        check(same_bytes(ck, ck0), f"overlapped and not: byte-identical checkpoints ({n} ranks)")
        if m and m0:
            print(f"     {n} ranks, {m.group(2)} buckets: exposed {m.group(3)} ms per step overlapped "
                  f"({m.group(4)} ms waiting), {m0.group(1)} ms not (informational: this machine is shared)")

    # two devices per rank: the in-process sum, then MPI
    ck = p("hier.ckpt")
    r = run(MPI + ["-np", "2", CLNET, "train", cnn, "--epochs", "1", "--save", ck, *common[:-5], "--devices",
                   "omp,cl:0", *common[-3:]])
    if r.returncode != 0 and "cl:0" in r.stderr and "no device" in r.stderr:
        print("skip 2 ranks x (omp + POCL): no OpenCL device")
    else:
        check(r.returncode == 0, "mpirun -np 2 with --devices omp,cl:0 trains", r)
        b = test_loss(ck)
        check(close(a, b), f"2 ranks x 2 devices match one process: test loss {b:.7f} vs {a:.7f}")

    # resume with another number of ranks: 2 -> 1, 2 -> 2, 1 -> 2
    for src, np_ in (("np2.ckpt", 1), ("np2.ckpt", 2), ("one.ckpt", 2)):
        ck = p(f"resume-{src}-{np_}.ckpt")
        with open(p(src), "rb") as s, open(ck, "wb") as d:
            d.write(s.read())
        r = run(MPI + ["-np", str(np_), CLNET, "train", "-", "--resume", ck, "--save", ck, "--epochs", "2", *common])
        e = run([CLNET, "eval", ck, "--data", DATA, "--limit", "64", "--device", "omp"])
        check(r.returncode == 0 and "epoch 2" in e.stdout, f"a checkpoint of {src} resumes on {np_} rank(s)", r)

    # what differs between ranks is named at start
    for what, rank1 in (("batch", [model, *common[:-3], "--batch", "32", "-q"]),
                        ("model", [other, *common]),
                        ("training set size", [model, *common[:2], "--limit", "512", *common[4:]])):
        r = run(MPI + ["-np", "1", CLNET, "train", model, "--epochs", "1", *common, ":",
                       "-np", "1", CLNET, "train", *rank1, "--epochs", "1"])
        check(r.returncode != 0 and f"rank 1 has a different {what}" in r.stderr, f"a different {what} on rank 1 is named", r)

    # a device failing mid-run on rank 1: its cap fits training at batch 8 but not the plan of
    # the validation pass after the epoch (500 rows)
    small = ["--data", DATA, "--limit", "512", "--device", "omp", "--batch", "8", "--epochs", "1", "-q"]
    capped = ["env", "CLNET_MEMORY_LIMIT=1M", CLNET, "train", model, *small]
    r = run(capped)
    check(r.returncode == 1 and "device omp" in r.stderr and "batch of 500" in r.stderr,
          "one process: the capped device fails at the validation pass, naming the device", r)
    rc, err, took = timed(MPI + ["-np", "1", CLNET, "train", model, *small, ":", "-np", "1", *capped], 60)
    check(rc not in (None, 0) and "device omp" in err,
          f"a device failing mid-run on rank 1 ends every rank (rc {rc}, {took:.1f} s) and is named")

    # kill -9 of rank 1: the run ends, non-zero, and the last checkpoint stays loadable
    ck = p("killed.ckpt")
    proc = subprocess.Popen(MPI + ["-np", "2", CLNET, "train", model, "--epochs", "50", "--save", ck, "--data", DATA,
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
        out, err = proc.communicate(timeout=60)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        rc = None
    took = time.time() - t0
    check(rc not in (None, 0), f"killing rank 1 ends the run non-zero (rc {rc}, {took:.1f} s)")
    check(bool(err.strip()), "and says so on stderr")
    check(test_loss(ck) == test_loss(ck) and run([CLNET, "eval", ck, "--data", DATA, "--limit", "64",
                                                  "--device", "omp"]).returncode == 0,
          "the last checkpoint is still loadable")
    return result()


if __name__ == "__main__":
    sys.exit(main())
