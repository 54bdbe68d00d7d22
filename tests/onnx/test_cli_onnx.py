"""ONNX from the command line: clnet run on .npy inputs (a free batch, bad inputs named),
clnet export of a checkpoint and its run, clnet summary of an ONNX file. Python 3 stdlib."""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import clitest  # noqa: E402
from clitest import DEVICE, ROOT, check, fails, ok, path, run, test, write  # noqa: E402

FIX = os.path.join(ROOT, "tests", "fixtures", "onnx")


def npy(name, shape, values, descr="<f4"):
    """A .npy file (format 1.0) of the given values."""
    dict_ = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % d for d in shape))
    head = dict_ + " " * ((64 - (10 + len(dict_) + 1) % 64) % 64) + "\n"
    fmt = {"<f4": "f", "<i8": "q", "<i4": "i"}[descr]
    body = struct.pack("<%d%s" % (len(values), fmt), *values)
    return write(name, b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + body)


def read_npy(p):
    raw = open(p, "rb").read()
    hlen = struct.unpack("<H", raw[8:10])[0]
    head = raw[10:10 + hlen].decode()
    data = raw[10 + hlen:]
    return head, struct.unpack("<%df" % (len(data) // 4), data)


def image(i, n):
    return [((i * 7919 + k * 104729) % 1000) / 1000.0 for k in range(n * 784)]


@test
def test_run_free_batch():
    m = os.path.join(FIX, "mlp", "model.onnx")
    x3, x1 = npy("x3.npy", (3, 1, 28, 28), image(1, 3)), npy("x1.npy", (1, 1, 28, 28), image(1, 1))
    ok(run(["run", m, "--input", "input=" + x3, "--output", path("y3.npy"), "--device", DEVICE]))
    ok(run(["run", m, "--input", x1, "--output=" + path("y1.npy"), "--device", DEVICE]))
    h3, y3 = read_npy(path("y3.npy"))
    h1, y1 = read_npy(path("y1.npy"))
    check("'shape': (3, 10" in h3 and "'<f4'" in h3, "output header %r" % h3)
    check(y3[:10] == y1, "row 0 of a batch of 3 equals a batch of 1: %s vs %s" % (y3[:3], y1[:3]))
    r = run(["run", m, "--input", x1, "--device", DEVICE])
    ok(r)
    check(r.out.startswith("output [1,10]:"), "printed output: %r" % r.out)


@test
def test_run_bad_inputs():
    m = os.path.join(FIX, "gpt", "model.onnx")
    ids = npy("ids.npy", (2, 16), list(range(32)), "<i8")
    ok(run(["run", m, "--input", ids, "--device", DEVICE]))
    fails(run(["run", m, "--input", npy("f.npy", (2, 16), [0.0] * 32)]), 1, ["takes i32 values"])
    fails(run(["run", m, "--input", npy("s.npy", (2, 15), list(range(30)), "<i8")]), 1, ["has shape [batch,16]"])
    fails(run(["run", m, "--input", "nope=" + ids]), 1, ["no input 'nope'", "its inputs: input"])
    fails(run(["run", m]), 1, ["needs --input"])
    fails(run(["run", m, "--input", write("t.npy", open(ids, "rb").read()[:90])]), 1, ["truncated"])
    fails(run(["run", m, "--input", write("j.npy", b"junk")]), 1, ["not a NumPy .npy file"])
    fails(run(["run", m, "--input"]), 2, ["--input needs a value"])
    fails(run(["run", os.path.join(ROOT, "tests", "onnx", "bad", "cycle.onnx"), "--input", ids]), 1, ["reads 'relu_out'"])


@test
def test_run_tensorproto_input():
    d = os.path.join(FIX, "gpt")
    ok(run(["run", os.path.join(d, "model.onnx"), "--input", os.path.join(d, "test_data_set_0", "input_0.pb"),
            "--output", path("g.npy"), "--device", DEVICE]))
    head, y = read_npy(path("g.npy"))
    check("(3, 16, 64" in head, "output header %r" % head)
    fails(run(["run", os.path.join(d, "model.onnx"), "--input", write("bad.pb", b"\xff\xff\xff")]), 1,
          ["not an ONNX TensorProto"])


@test
def test_export_checkpoint_and_run():
    ckpt = os.path.join(ROOT, "tests", "fixtures", "old_cnn.ckpt")
    out = path("old.onnx")
    r = run(["export", ckpt, out])
    ok(r)
    check(os.path.getsize(out) > 1000, "wrote %s" % out)
    x = npy("nhwc.npy", (2, 28, 28, 1), image(2, 2))
    ok(run(["run", out, "--input", "images=" + x, "--output", "probabilities=" + path("p.npy"), "--device", DEVICE]))
    head, p = read_npy(path("p.npy"))
    check("(2, 10" in head and abs(sum(p[:10]) - 1) < 1e-5, "probabilities of row 0 sum to 1: %s" % (sum(p[:10]),))
    r = run(["summary", out])
    ok(r)
    check("conv2d_1.weight" in r.out and "[3,3,1,4]" in r.out and "images" in r.out, "summary: %r" % r.out)
    fails(run(["export", ckpt, ROOT]), 1, ["OUT.onnx", "is a directory"])
    fails(run(["export", ckpt, out, "--opset", "16"]), 2, ["--opset"])


sys.exit(clitest.main())
