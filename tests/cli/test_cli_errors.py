#!/usr/bin/env python3
"""CLI tests of issue 19's error items (stdlib only): --seed is decimal; generate refuses a
vocabulary above 256; a non-causal token model is warned about in train and generate; FIFOs
as model file or text corpus neither hang nor pass silently; control bytes from files and
the environment reach the terminal escaped; the strict on/off variables; an unusable
CLNET_CACHE_DIR is named; the first OpenCL compile is announced once; clnet bench runs
outside the checkout and the shipped models are installed.

Usage: test_cli_errors.py PATH/TO/clnet [SOURCE_ROOT]
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

from clitest import CLNET, DEVICE, Skip, check, fails, main, need_data, no_crash, ok, path, run, test, write

TINY = """input tokens 8 256
embed 8
transformer 2 16 %s
layer_norm
dense %d
"""
LOSS = re.compile(r"^epoch 1/1 - loss ([0-9.]+) ", re.M)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

state = {}


def corpus():
    if "corpus" not in state:
        state["corpus"] = write("errors_corpus.txt", "In the beginning God created the heaven and the earth.\n" * 60)
    return state["corpus"]


def model(name, causal=True, vocab=256):
    return write(name, TINY % ("causal" if causal else "", vocab))


def train_text(model_path, *extra, save=None):
    args = ["train", model_path, "--text", corpus(), "--epochs", "1", "--batch", "8", "--limit", "32", "--device",
            DEVICE] + list(extra)
    if save:
        args += ["--save", save]
    return run(args)


@test
def test_seed_is_decimal():
    m = model("seed.net")
    runs = {s: train_text(m, "--seed", s) for s in ("010", "10", "8", "08")}
    for s, r in runs.items():
        ok(r)
    loss = {s: LOSS.search(r.out).group(1) for s, r in runs.items()}
    check(loss["010"] == loss["10"], "--seed 010 is ten: losses %s" % loss)
    check(loss["08"] == loss["8"], "--seed 08 is eight: losses %s" % loss)
    check(loss["10"] != loss["8"], "seeds 10 and 8 differ (else the test shows nothing): %s" % loss)
    fails(run(["train", m, "--text", corpus(), "--seed", "0x10", "--device", DEVICE]), 2, ["--seed"])


def read_ckpt(raw):
    """(header fields, model text, [(name, dtype, dims, data)]) of a checkpoint (docs/CHECKPOINT.md)."""
    o = 12
    opt, epoch, step, rng, tl = struct.unpack_from("<IiQQI", raw, o)
    o += 28
    text = raw[o:o + tl].decode()
    o += tl
    (n,) = struct.unpack_from("<I", raw, o)
    o += 4
    tensors = []
    for _ in range(n):
        (nl,) = struct.unpack_from("<I", raw, o)
        name = raw[o + 4:o + 4 + nl].decode()
        o += 4 + nl
        dtype, nd = struct.unpack_from("<II", raw, o)
        dims = list(struct.unpack_from("<%dq" % nd, raw, o + 8))
        o += 8 + 8 * nd
        (nb,) = struct.unpack_from("<Q", raw, o)
        tensors.append((name, dtype, dims, raw[o + 8:o + 8 + nb]))
        o += 8 + nb
    return (opt, epoch, step, rng), text, tensors


def write_ckpt(fields, text, tensors):
    t = text.encode()
    b = b"CLNETCKP" + struct.pack("<IIiQQI", 1, *fields, len(t)) + t + struct.pack("<I", len(tensors))
    for name, dtype, dims, data in tensors:
        b += struct.pack("<I", len(name)) + name.encode() + struct.pack("<II", dtype, len(dims))
        b += b"".join(struct.pack("<q", d) for d in dims) + struct.pack("<Q", len(data)) + data
    return b + struct.pack("<I", zlib.crc32(b) & 0xFFFFFFFF)


def widen(dims, data, to):
    """A row-major f32 tensor with every dim of 256 widened to `to`, new entries 0 (bias: 10)."""
    vals = struct.unpack("<%df" % (len(data) // 4), data)
    if dims == [256]:
        return [to], struct.pack("<%df" % to, *(list(vals) + [10.0] * (to - 256)))
    if dims[0] == 256:  # an embedding table: new rows
        return [to] + dims[1:], data + bytes(4 * (to - 256) * dims[1])
    rows, cols = dims[0], dims[1]  # a dense layer's weight: new columns
    out = []
    for r in range(rows):
        out += list(vals[r * cols:(r + 1) * cols]) + [0.0] * (to - cols)
    return [rows, to], struct.pack("<%df" % len(out), *out)


@test
def test_generate_refuses_vocab_above_256():
    """A 300-token model (from the C API; the CLI trains byte models only), made here from a
    trained 256-token one by widening its vocabulary, with ids 256..299 the likeliest: before,
    generate wrote id & 255 and fed it back in."""
    ck = path("v256.ckpt")
    ok(train_text(model("v256.net"), save=ck))
    fields, text, tensors = read_ckpt(open(ck, "rb").read())
    text = text.replace("input tokens 8 256", "input tokens 8 300").replace("dense 256", "dense 300")
    wide = []
    for name, dtype, dims, data in tensors:
        if 256 in dims and name.endswith(("weight", "bias")):
            dims, data = widen(dims, data, 300)
        elif 256 in dims:
            continue  # optimizer moments: an inference load does not need them
        wide.append((name, dtype, dims, data))
    ck300 = write("v300.ckpt", write_ckpt(fields, text, wide))
    ok(run(["summary", ck300]))
    r = run(["generate", ck300, "--prompt", "In the", "--tokens", "20", "--device", DEVICE])
    fails(r, 1, ["300 tokens", "at most 256"])
    check(r.out == "", "nothing generated before the refusal", r)


@test
def test_non_causal_warning():
    ck = path("noncausal.ckpt")
    r = train_text(model("noncausal.net", causal=False), save=ck)
    ok(r)
    check("not a causal model" in r.err and "noncausal.net" in r.err, "train warns about a non-causal model", r)
    r = run(["generate", ck, "--prompt", "In", "--tokens", "4", "--device", DEVICE])
    ok(r)
    check("not a causal model" in r.err and "noncausal.ckpt" in r.err, "generate warns too", r)
    ck = path("causal.ckpt")
    r = train_text(model("causal.net"), save=ck)
    ok(r)
    check("causal" not in r.err, "no warning for a causal model", r)
    r = run(["generate", ck, "--prompt", "In", "--tokens", "4", "--device", DEVICE])
    ok(r)
    check("causal" not in r.err, "no warning from generate for a causal model", r)


@test
def test_fifo_without_writer():
    fifo = path("errors.fifo")
    os.mkfifo(fifo)
    # before: open() waited for a writer forever (the timeout turns that into a failure)
    fails(run(["train", fifo, "--device", "omp", "--epochs", "1"], timeout=30), 1, ["FIFO", "no writer"])
    fails(run(["summary", fifo], timeout=30), 1, ["FIFO"])
    fails(run(["train", model("fifo.net"), "--text", fifo, "--device", "omp"], timeout=30), 1, ["FIFO", "no writer"])


@test
def test_fifo_with_writer():
    """A FIFO with a writer is still read, to its end. The writer here is this process, holding
    the FIFO open (read-write, so that opening does not wait) with the model in it until clnet
    has it open too; then it closes, and clnet sees the end of the file."""
    fifo = path("errors_w.fifo")
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDWR)
    os.write(fd, (TINY % ("causal", 256)).encode())
    p = subprocess.Popen([CLNET, "summary", fifo], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=path(""))
    try:
        for _ in range(3000):  # until clnet holds the FIFO open (30 s at most)
            try:
                fds = os.listdir("/proc/%d/fd" % p.pid)
                if any(os.path.realpath("/proc/%d/fd/%s" % (p.pid, f)) == os.path.realpath(fifo) for f in fds):
                    break
            except OSError:
                break  # clnet exited already
            time.sleep(0.01)
    finally:
        os.close(fd)
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and b"Embed" in out, "the model read from the FIFO: rc %d, %s" % (p.returncode, err[-500:]))


@test
def test_control_bytes_escaped():
    bad = write("evil.net", "input 28 28 1\n\x1b]0;pwned\x07\x1b[2Jdense 10\n")
    r = run(["summary", bad])
    fails(r, 1, ["\\x1b]0;pwned\\x07"])
    check(not CONTROL.search(r.err), "no raw control byte on stderr", r)
    r = run(["train", model("esc.net"), "--text", corpus()], env={"CLNET_DEVICE": "gpu-\x1b[2J"})
    no_crash(r)
    check(r.rc != 0 and "\\x1b[2J" in r.err and not CONTROL.search(r.err), "the device selector is escaped", r)
    r = run(["train", model("esc2.net"), "--text", corpus(), "--device", "omp"], env={"CLNET_MEMORY_LIMIT": "5\x1b[2J"})
    fails(r, 1, ["CLNET_MEMORY_LIMIT", "\\x1b[2J"])
    check(not CONTROL.search(r.err), "the environment value is escaped", r)


@test
def test_on_off_variables():
    m = model("flags.net")
    for var in ("CLNET_LOG_PLACEMENT", "CLNET_PROFILE", "CLNET_CACHE", "CLNET_MPI_OVERLAP"):
        fails(run(["train", m, "--text", corpus(), "--epochs", "1", "--limit", "32", "--device", "omp"],
                  env={var: "yes"}), 1, [var, "yes", "0 or 1"])


def opencl_device():
    r = run(["devices"])
    if "cl:0" not in r.out:
        raise Skip("no OpenCL device")
    return "cl:0"


@test
def test_first_compile_announced_and_cache_dir_named():
    dev = opencl_device()
    cache = tempfile.mkdtemp(prefix="clnet-kcache-")
    try:
        m = model("compile.net")
        args = ["train", m, "--text", corpus(), "--epochs", "1", "--batch", "8", "--limit", "32", "--device", dev]
        r = run(args, env={"CLNET_CACHE_DIR": cache})
        ok(r)
        check(r.err.count("compiling OpenCL kernels") == 1 and "first run only" in r.err and cache in r.err,
              "the first run says once that it compiles, and where the kernels go", r)
        r = run(args, env={"CLNET_CACHE_DIR": cache})
        ok(r)
        check("compiling OpenCL kernels" not in r.err, "a warm run says nothing", r)
        unusable = os.path.join(m, "cache")  # below a regular file: cannot be created
        r = run(args, env={"CLNET_CACHE_DIR": unusable})
        ok(r)
        check("CLNET_CACHE_DIR" in r.err and unusable in r.err, "an unusable cache directory is named", r)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


@test
def test_bench_outside_the_checkout():
    """Run from a temporary directory (run() always is): before, 'cannot open
    models/seed_cnn.net'. The install puts the models where an installed binary looks."""
    need_data()
    r = run(["bench", "--device", "omp", "--steps", "1"], timeout=600)
    ok(r)
    check("| omp |" in r.out, "bench measured the seed CNN", r)
    build = os.path.dirname(os.path.dirname(CLNET))
    p = subprocess.run(["meson", "introspect", "--installed", build], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Skip("meson introspect failed: %s" % p.stderr.decode()[-300:])
    dests = json.loads(p.stdout).values()
    for name in ("seed_cnn.net", "char_gpt.net", "vit_fashion.net"):
        check(any(d.endswith("/share/clnet/models/" + name) for d in dests), "the install holds models/" + name)


if __name__ == "__main__":
    sys.exit(main())
