"""Replica groups under mpirun and --devices (issue 15's defects), on this machine, bound to
loopback like test_mpi.py (mpitest.mpi(): --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo),
every run bounded in time:

- a last batch with fewer rows than ranks (--limit 129 --batch 64 on 2 ranks: the last step
  has 1 row) finishes every epoch, with and without -q, and saves a checkpoint whose test loss
  matches one process's within 1e-4 relative (same global batches; only the order of the sums
  differs, see test_mpi.py);
- ranks given different --epochs or --steps, or resumed from different checkpoints, stop at
  start with a message naming what differs, never hang;
- ranks that differ in optimizer, weight decay, schedule, image data (one pixel) or a seed
  above 2^53 (equal as doubles) are refused, naming it;
- --devices with a last batch smaller than the device count (--limit 65 --batch 64) finishes
  both epochs and saves, like one device;
- two devices per rank overlap the all-reduce with the backward pass, and -v reports the
  exposed communication of it;
- tools/examples/train_group (clnet.h only) trains on every device of each of 2 ranks.

    test_group.py CLNET MPIRUN TRAIN_GROUP
"""
import gzip
import os
import re
import signal
import subprocess
import sys

from mpitest import DATA, check, close, mpi, result, scratch, write

CLNET, MPIRUN, EXAMPLE = sys.argv[1], sys.argv[2], sys.argv[3]
MPI = mpi(MPIRUN)
LIMIT = 90  # seconds any run here may take; a hang fails the check instead of the suite


class Hung:
    returncode, stdout, stderr = None, "", "(timed out: hung)"


def run(args, env=None):
    """Runs args for at most LIMIT seconds. A hung mpirun gets SIGTERM first, which it passes on
    to its ranks (a SIGKILL would leave them spinning in MPI), then its whole session SIGKILL."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            env=None if env is None else {**os.environ, **env})
    try:
        out, err = proc.communicate(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        return Hung()
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def test_loss(ck):
    r = run([CLNET, "eval", ck, "--data", DATA, "--limit", "256", "--device", "omp"])
    return float(r.stdout.split("loss ")[1].split()[0]) if r.returncode == 0 else float("nan")


def epochs_of(ck):
    r = run([CLNET, "eval", ck, "--data", DATA, "--limit", "16", "--device", "omp"])
    m = re.search(r"epoch (\d+)", r.stdout) if r.returncode == 0 else None
    return int(m.group(1)) if m else -1


def two_ranks(rank0, rank1):
    """rank 0 and rank 1 with their own clnet train arguments."""
    return run(MPI + ["-np", "1", CLNET, "train", *rank0, ":", "-np", "1", CLNET, "train", *rank1])


def refused(r, what):
    return r.returncode not in (None, 0) and f"rank 1 has a different {what}" in r.stderr


def main():
    p = scratch("clnet-group-")
    model = write(p("mlp.net"), "input 28 28 1\nflatten\ndense 16 relu\ndense 10\n")
    base = ["--data", DATA, "--device", "omp", "--batch", "64"]

    # a last batch of 1 row on 2 ranks
    one = p("short-one.ckpt")
    r1 = run([CLNET, "train", model, *base, "--limit", "129", "--epochs", "3", "-q", "--save", one])
    check(r1.returncode == 0, "one process trains 3 epochs of 129 rows", r1)
    for quiet in ([], ["-q"]):
        ck = p(f"short{len(quiet)}.ckpt")
        r = run(MPI + ["-np", "2", CLNET, "train", model, *base, "--limit", "129", "--epochs", "3", *quiet,
                       "--save", ck])
        check(r.returncode == 0 and epochs_of(ck) == 3,
              f"2 ranks, last batch of 1 row{' (-q)' if quiet else ''}: all 3 epochs run and saved", r)
        a, b = test_loss(one), test_loss(ck)
        check(close(a, b), f"and match one process: test loss {b:.7f} vs {a:.7f}")

    # different lengths and resumed states
    short = [model, *base, "--limit", "256", "-q"]
    check(refused(two_ranks([*short, "--epochs", "2"], [*short, "--epochs", "3"]), "--epochs"),
          "different --epochs are refused, not a hang")
    check(refused(two_ranks([*short, "--epochs", "2", "--steps", "5"], [*short, "--epochs", "2", "--steps", "6"]),
                  "--steps"), "different --steps are refused, not a hang")
    e1, e2 = p("e1.ckpt"), p("e2.ckpt")
    r = run([CLNET, "train", *short, "--epochs", "1", "--save", e1])
    r2 = run([CLNET, "train", "-", "--resume", e1, *short[1:], "--epochs", "2", "--save", e2])
    if r.returncode == 0 and r2.returncode == 0:
        e1b = p("e1-copy.ckpt")
        with open(e1, "rb") as s, open(e1b, "wb") as d:
            d.write(s.read())
        r = two_ranks(["-", "--resume", e1b, "--save", e1b, *short[1:], "--epochs", "3"],
                      ["-", "--resume", e2, *short[1:], "--epochs", "3"])
        check(refused(r, "checkpoint"), "ranks resumed from different checkpoints are refused, not a hang", r)
    else:
        check(False, "the checkpoints to resume from were written", r if r.returncode else r2)

    # settings and data that determine the result
    img = p("data")
    os.mkdir(img)
    for name in os.listdir(DATA):
        if name.startswith("train-images"):
            raw = bytearray(gzip.open(os.path.join(DATA, name)).read() if name.endswith(".gz")
                            else open(os.path.join(DATA, name), "rb").read())
            raw[16 + 400] ^= 0x01  # one pixel of the first image, one grey level
            open(os.path.join(img, "train-images-idx3-ubyte"), "wb").write(raw)
        else:
            os.symlink(os.path.join(DATA, name), os.path.join(img, name))
    one_epoch = [model, *base, "--limit", "128", "--epochs", "1", "-q"]
    for what, extra in (("optimizer", ["--optimizer", "sgd"]), ("weight decay", ["--weight-decay", "0.01"]),
                        ("learning-rate schedule", ["--lr-schedule", "cosine"]),
                        ("training images", ["--data", img]), ("seed", ["--seed", "9007199254740993"])):
        rank0 = one_epoch + (["--seed", "9007199254740992"] if what == "seed" else [])
        r = two_ranks(rank0, one_epoch + extra)
        check(refused(r, what), f"a different {what} on rank 1 is refused", r)

    # --devices with a last batch smaller than the devices
    ck = p("devices.ckpt")
    r = run([CLNET, "train", model, *base[:2], "--devices", "omp,cl:0", "--batch", "64", "--limit", "65",
             "--epochs", "2", "-q", "--save", ck])
    if r.returncode != 0 and "no device" in r.stderr:
        print("skip --devices omp,cl:0: no OpenCL device")
    else:
        check(r.returncode == 0 and epochs_of(ck) == 2, "--devices, last batch of 1 row: both epochs run and saved", r)

    # two devices per rank: overlapped, and reported
    cnn = os.path.join(os.environ.get("CLNET_SOURCE_ROOT", "."), "models", "seed_cnn.net")
    r = run(MPI + ["-np", "2", CLNET, "train", cnn, "--data", DATA, "--devices", "omp,cl:0", "--batch", "64",
                   "--limit", "512", "--epochs", "1", "-q", "-v"])
    if r.returncode != 0 and "no device" in r.stderr:
        print("skip 2 ranks x (omp + POCL): no OpenCL device")
    else:
        m = re.search(r"MPI: (\d+) steps, 2 devices per rank, .* in (\d+) buckets, overlapped with the backward "
                      r"pass; exposed ([0-9.]+) ms per step, of which ([0-9.]+) ms waiting", r.stderr)
        check(r.returncode == 0 and m is not None and int(m.group(2)) > 1,
              "2 ranks x 2 devices: the all-reduce overlaps the backward pass, and -v reports its exposed time", r)
        if m:
            print(f"     2 ranks x 2 devices, {m.group(2)} buckets: exposed {m.group(3)} ms per step "
                  f"({m.group(4)} ms waiting; informational: this machine is shared)")

    # the example: every device of each rank, through clnet.h alone
    r = run(MPI + ["-np", "2", EXAMPLE])
    check(r.returncode == 0 and "x 2 rank(s)" in r.stdout, "tools/examples/train_group trains on 2 ranks", r)
    print(r.stdout.strip())
    return result()


if __name__ == "__main__":
    sys.exit(main())
