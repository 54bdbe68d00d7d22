#!/usr/bin/env python3
"""The clnet CLI against hostile and unlucky input (issue 11): devices and pipes where a
checkpoint belongs, a FIFO, valid checkpoints whose model text is huge or asks for memory it
does not hold, sizes that overflow, bad environment settings. Every case must end promptly
with exit status 1 and a message naming the problem; none may crash, hang or start work.

Usage: test_hostile.py PATH/TO/clnet [SOURCE_ROOT] (the harness is tests/cli/clitest.py).
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz"))
import make_corpus  # noqa: E402  (its checkpoint encoder)
import clitest as T  # noqa: E402  (same argv: the binary and the source root)

test = T.test


def checkpoint(model_text, tensors=()):
    """A valid checkpoint of f32 tensors (name, dims, values)."""
    return make_corpus.checkpoint(model_text, [(n, 0, d, struct.pack("<%df" % len(v), *v)) for n, d, v in tensors])


def all_ckpt_commands(p, want):
    img = T.pgm("hostile.pgm", 28, 28)
    for args in (["eval", p, "--device", "omp", "--data", T.DATA, "--limit", "16"],
                 ["predict", p, img, "--device", "omp"],
                 ["train", "-", "--resume", p, "--device", "omp", "--data", T.DATA, "--limit", "16"],
                 ["summary", p]):
        T.fails(T.run(args, timeout=120), 1, want)


@test
def test_checkpoint_not_a_regular_file():
    """/dev/zero, a pipe and a FIFO without a writer are refused at once, never read."""
    img = T.pgm("hostile.pgm", 28, 28)
    for args in (["eval", "/dev/zero", "--device", "omp", "--data", T.DATA], ["predict", "/dev/zero", img],
                 ["train", "-", "--resume", "/dev/zero", "--device", "omp", "--data", T.DATA]):
        T.fails(T.run(args, timeout=60), 1, ["/dev/zero", "not a regular file"])
    fifo = T.path("ckpt.fifo")
    os.mkfifo(fifo)
    T.fails(T.run(["eval", fifo, "--device", "omp", "--data", T.DATA], timeout=60), 1, ["not a regular file"])
    # --resume of a pipe holding a valid checkpoint
    rd, wr = os.pipe()
    os.write(wr, checkpoint("input 2 2 1\nflatten\ndense 2\n"))
    os.close(wr)
    try:
        r = T.run(["train", "-", "--resume", "/dev/stdin", "--device", "omp", "--data", T.DATA], timeout=60, stdin=rd)
    finally:
        os.close(rd)
    T.fails(r, 1, ["/dev/stdin", "not a regular file"])


@test
def test_model_from_a_pipe():
    """A model description may come from a pipe; summary reads it once (looking for a
    checkpoint's magic first must not eat its first bytes)."""
    rd, wr = os.pipe()
    os.write(wr, b"input 28 28 1\nflatten\ndense 10\n")
    os.close(wr)
    try:
        r = T.run(["summary", "/dev/stdin"], timeout=60, stdin=rd)
    finally:
        os.close(rd)
    T.ok(r)
    T.check("Total params: %d " % (28 * 28 * 10 + 10) in r.out, "the piped model is summarised whole", r)


@test
def test_huge_model_text_in_a_checkpoint():
    """A valid checkpoint holding 1 MB of 'relu' lines: refused at the layer cap, promptly."""
    text = "input 4 4 1\n" + "relu\n" * ((1 << 20) // 5 - 4)
    all_ckpt_commands(T.write("relu.ckpt", checkpoint(text)), ["CN_MODEL_MAX_LAYERS"])
    text = "input 4 4 1\n" + "#" * 1000 + "\n" + ("relu\n" * 1000 + "#" * 1000 + "\n") * 200
    all_ckpt_commands(T.write("bigtext.ckpt", checkpoint(text)), ["CN_MODEL_MAX_TEXT"])


@test
def test_small_checkpoint_big_model():
    """A 93-byte checkpoint whose model wants 12.5 GB of weights it lacks: refused before any
    allocation, naming the missing weight."""
    p = T.write("tiny.ckpt", checkpoint("input 28 28 1\nflatten\ndense 4000000\n", [("b", [2], [1.0, -2.0])]))
    img = T.pgm("hostile.pgm", 28, 28)
    for args in (["eval", p, "--device", "omp", "--data", T.DATA, "--limit", "16"],
                 ["predict", p, img, "--device", "omp"],
                 ["train", "-", "--resume", p, "--device", "omp", "--data", T.DATA, "--limit", "16"]):
        T.fails(T.run(args, timeout=120), 1, ["dense_1.weight"])


@test
def test_sizes_that_overflow():
    """Counts past 64 bits are refused naming the layer, never printed wrapped."""
    for name, text, layer in (("dense", "input 65536 65536 65536\nflatten\ndense 16777216\n", "layer 2 (dense"),
                              ("conv", "input 65536 65536 65536\nconv2d 65536 1024\n", "layer 1 (conv2d"),
                              ("pool", "input 65536 65536 65536\nmaxpool2d 1024 1\n", "layer 1 (maxpool2d")):
        r = T.run(["summary", T.write("overflow-%s.net" % name, text)])
        T.fails(r, 1, [layer, "64 bits"])


@test
def test_bad_environment():
    """CLNET_GEMM=garbage and an over-long CLNET_CL_OPTIONS fail the OpenCL device's open, naming
    the variable, before any work."""
    T.need_data()
    r = T.run(["devices"])
    if "cl:0" not in r.out:
        raise T.Skip("no OpenCL device")
    model = T.write("env.net", "input 28 28 1\nflatten\ndense 10\n")
    for env, want in (({"CLNET_GEMM": "garbage"}, ["CLNET_GEMM", "garbage"]),
                      ({"CLNET_CL_OPTIONS": "-DX=1 " * 300}, ["CLNET_CL_OPTIONS", "1800 bytes"])):
        r = T.run(["train", model, "--device", "cl:0", "--data", T.DATA, "--limit", "64"], env=env)
        T.fails(r, 1, want)
        T.check("epoch" not in r.out, "refused before training", r)
    T.ok(T.run(["train", model, "--device", "omp", "--data", T.DATA, "--limit", "64", "--epochs", "1"],
               env={"CLNET_GEMM": "garbage"}))


if __name__ == "__main__":
    sys.exit(T.main())
