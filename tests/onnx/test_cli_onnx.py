"""ONNX from the command line: clnet run on .npy inputs (a free batch, bad inputs named),
clnet export of a checkpoint and its run, clnet summary of an ONNX file (ops and FLOPs),
clnet train and eval of an imported image classifier. Python 3 stdlib."""
import os
import re
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import clitest  # noqa: E402
from clitest import DATA, DEVICE, ROOT, Skip, check, fails, ok, path, run, test, write  # noqa: E402

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
    r = run(["run", m, "--input", x3, "--device", DEVICE, "--repeat", "3"])
    ok(r)
    check(re.search(r"\ntiming: 3 runs after 1 untimed: median [0-9.]+ ms, fastest [0-9.]+ ms", r.out) is not None,
          "--repeat times the runs", r)


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


def need_data():
    if not os.path.exists(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")) and \
            not os.path.exists(os.path.join(DATA, "t10k-labels-idx1-ubyte")):
        raise Skip("no Fashion-MNIST in %s" % DATA)


def number(text, key):
    """The number after `key` (e.g. 'val_loss ') in text."""
    m = re.search(re.escape(key) + r"([0-9.]+)", text)
    check(m is not None, "%r in %r" % (key, text))
    return float(m.group(1))


@test
def test_summary_ops_and_flops():
    """summary MODEL.onnx and summary MODEL list the ops and FLOPs of a forward pass. The seed
    CNN's matrix products, counted by hand (a multiply-add = 2): three 3x3 convolutions
    (26x26x32 from 1 channel, 11x11x64 from 32, 3x3x64 from 64) and two dense layers."""
    want = 2 * (26 * 26 * 32 * 9 * 1 + 11 * 11 * 64 * 9 * 32 + 3 * 3 * 64 * 9 * 64 + 576 * 64 + 64 * 10)
    for model in (os.path.join(FIX, "seed_cnn", "model.onnx"), os.path.join(ROOT, "models", "seed_cnn.net")):
        r = run(["summary", model])
        ok(r)
        m = re.search(r"\n  matmul +5 nodes +(\d+) FLOPs", r.out)
        check(m is not None and int(m.group(1)) == want, "matmul FLOPs of %s: want %d" % (model, want), r)
        check("  maxpool " in r.out and "  im2col " in r.out and "cross_entropy" not in r.out, "op kinds", r)
        total = int(re.search(r"Forward FLOPs per sample, every op: .* \((\d+)\)", r.out).group(1))
        check(want < total < want * 1.05, "the total adds the small ops: %d vs %d" % (total, want), r)


@test
def test_train_eval_onnx():
    """clnet train MODEL.onnx trains the imported seed CNN; eval MODEL.onnx --weights CKPT gives
    the validation numbers train printed (same weights, same images); --resume continues."""
    need_data()
    m, ck = os.path.join(FIX, "seed_cnn", "model.onnx"), path("tuned.ckpt")
    common = ["--data", DATA, "--limit", "64", "--batch", "16", "--device", DEVICE]
    r = run(["train", m, "--epochs", "1", "--optimizer", "sgd", "--lr", "0.05", "--save", ck] + common)
    ok(r)
    check("input: 1x28x28 (NCHW), the data set's images as they are" in r.out and "93322 parameters" in r.out,
          "header", r)
    val = number(r.out, "val_loss ")
    e = run(["eval", m, "--weights", ck] + common[:4] + common[6:])
    ok(e)
    check(number(e.out, "loss ") == val and number(e.out, "accuracy ") == number(r.out, "val_accuracy "),
          "eval with the checkpoint's weights repeats train's validation (%s)" % val, e)
    tuned = path("tuned.onnx")
    ok(run(["export", ck, tuned]))
    e1 = run(["eval", tuned] + common[:4] + common[6:])
    ok(e1)
    check(number(e1.out, "loss ") == val, "the exported fine-tuned model evaluates as its checkpoint", e1)
    r2 = run(["train", m, "--epochs", "2", "--resume", ck, "--save", ck] + common)
    ok(r2)
    check("resumed: 1 epochs done, step 4" in r2.out and "epoch 2/2" in r2.out, "resumed", r2)
    fails(run(["eval", m, "--text", m]), 1, ["--text"])
    fails(run(["train", m, "--text", m, "--limit", "8"]), 1, ["--text"])
    fails(run(["eval", os.path.join(FIX, "gpt", "model.onnx"), "--data", DATA]), 1, ["not an image batch"])
    fails(run(["eval", os.path.join(ROOT, "tests", "fixtures", "old_cnn.ckpt"), "--weights", ck]), 1, ["--weights"])


@test
def test_eval_exported_model_file():
    """A model file's checkpoint exported to ONNX (NHWC input, every layer's output, logits and
    probabilities) evaluates as the checkpoint does."""
    need_data()
    ckpt, out = os.path.join(ROOT, "tests", "fixtures", "old_cnn.ckpt"), path("old_eval.onnx")
    ok(run(["export", ckpt, out]))
    a = run(["eval", ckpt, "--data", DATA, "--limit", "100", "--device", DEVICE])
    b = run(["eval", out, "--data", DATA, "--limit", "100", "--device", DEVICE])
    ok(a)
    ok(b)
    check("input: 1x28x28 (NHWC)" in b.out, "NHWC input", b)
    check(number(a.out, "loss ") == number(b.out, "loss ") and number(a.out, "accuracy ") == number(b.out, "accuracy "),
          "same loss and accuracy: %s vs %s" % (a.out, b.out), b)


@test
def test_eval_onnx_resized_rgb():
    """A model taking 3x32x32 images is fed the 28x28 gray ones resized bilinearly with the gray
    in every channel: eval's loss and right predictions on 64 images are PyTorch's
    (make_train_fixtures.py: F.interpolate, align_corners=False, float64) within 1e-4
    relative plus the 5e-5 of printing 4 decimals."""
    need_data()
    d = os.path.join(FIX, "rgb_cnn")
    n, want, right = [x for x in open(os.path.join(d, "eval.txt")).read().split("\n")[1:4]]
    r = run(["eval", os.path.join(d, "model.onnx"), "--data", DATA, "--limit", n, "--device", DEVICE])
    ok(r)
    check("input: 3x32x32 (NCHW), resized bilinearly from 28x28, gray copied into 3 channels" in r.out, "fit", r)
    loss = number(r.out, "loss ")
    check(abs(loss - float(want)) <= 1e-4 * float(want) + 5e-5, "loss %s vs PyTorch %s" % (loss, want), r)
    check("(%s correct)" % right in r.out, "PyTorch's %s right predictions" % right, r)
    ck, tuned = path("rgb.ckpt"), path("rgb_tuned.onnx")
    args = ["train", os.path.join(d, "model.onnx"), "--data", DATA, "--limit", "32", "--batch", "8", "--epochs", "1",
            "--save", ck, "--lr-schedule", "cosine", "--warmup", "1"]
    t = run(args + ["--devices", "omp,cl:0"])
    if t.rc != 0 and "cl:0" in t.err and "no device" in t.err:
        t = run(args + ["--device", "omp"])
    ok(t)
    check("epoch 1/1 - loss " in t.out, "trained", t)
    # its strided, padded convolutions are stored in the checkpoint's program (version 3)
    ok(run(["export", ck, tuned]))
    e = run(["eval", tuned, "--data", DATA, "--limit", "32", "--device", "omp"])  # replica 0 validated
    ok(e)
    check(number(e.out, "loss ") == number(t.out, "val_loss "), "the exported fine-tuned model evaluates as trained", e)


sys.exit(clitest.main())
