#!/usr/bin/env python3
"""End-to-end tests of the clnet command-line tool (stdlib only).

Usage: test_cli.py PATH/TO/clnet [SOURCE_ROOT]

Runs the built binary and checks its exit statuses and messages: strict flag parsing, missing
data, model files with errors, corrupt checkpoints and images (an error, never a crash), the
device listing without any OpenCL driver, the model summary, and a tiny training run on the
OpenMP device (--report JSON, --save, eval, predict, --resume, --steps, the progress bar on a
pseudo-terminal), the placement and profile logs, device names and the memory limit. Prints one line per check and a final "N passed, N failed" line; exits 1 if
any check failed. Checks that need the Fashion-MNIST files are skipped (and counted as such)
when CLNET_TEST_DATA (default /usr/share/datasets/fashion-mnist) does not hold them.
"""
import json
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time

from clitest import (CLNET, DATA, DEVICE, ROOT, TMP, Result, Skip, check, fails, main, need_data, no_crash, ok, path,
                     pgm, run, test, write)

MODEL = os.path.join(ROOT, "models", "seed_cnn.net")
TINY = ["--limit", "256", "--epochs", "1", "--device", DEVICE]

EPOCH_LINE = re.compile(r"^epoch (\d+)/(\d+) - loss ([0-9.]+) - accuracy ([0-9.]+) - val_loss ([0-9.]+) - "
                        r"val_accuracy ([0-9.]+) - ([0-9.]+)s - ([0-9]+) img/s$")
REPORT_KEYS = ("epoch", "loss", "accuracy", "val_loss", "val_accuracy", "seconds", "images_per_second")


def need_model():
    if not os.path.exists(MODEL):
        raise Skip("%s is missing" % MODEL)


# State shared by the training checks.
state = {}


@test
def test_version_and_help():
    r = run(["--version"])
    ok(r)
    check(re.search(r"clnet \d+\.\d+\.\d+", r.out) is not None, "--version prints 'clnet X.Y.Z'", r)
    r = run(["--help"])
    ok(r)
    for c in ("devices", "train", "eval", "predict", "summary", "CLNET_DEVICE"):
        check(c in r.out, "--help mentions %s" % c, r)
    ok(run(["help"]))
    for c in ("devices", "train", "eval", "predict", "summary"):
        r = run([c, "--help"])
        ok(r)
        check(("clnet " + c) in r.out and "Usage" in r.out, "%s --help prints its usage" % c, r)
        r2 = run(["help", c])
        ok(r2)
        check(r2.out == r.out, "'clnet help %s' equals '%s --help'" % (c, c), r2)
    r = run(["train", "--help"])
    for flag in ("--data", "--epochs", "--batch", "--lr", "--optimizer", "--device", "--seed", "--limit", "--save",
                 "--resume", "--report", "--quiet", "--steps"):
        check(flag in r.out, "train --help documents %s" % flag, r)


@test
def test_bad_flags():
    r = run(["--bogus"])
    fails(r, 2, ["--bogus"])
    r = run([])
    fails(r, 2, ["Usage"])
    r = run(["frobnicate"])
    fails(r, 2, ["frobnicate", "Usage"])
    r = run(["help", "frobnicate"])
    fails(r, 2, ["frobnicate"])
    model = MODEL if os.path.exists(MODEL) else "model.net"
    cases = [
        (["train", model, "--bogus-flag"], ["--bogus-flag", "Usage", "--help"]),
        (["train", model, "--epoch", "3"], ["--epoch", "--epochs"]),  # with a suggestion
        (["train", model, "--epochs", "abc"], ["--epochs", "abc"]),
        (["train", model, "--epochs", "2x"], ["--epochs"]),
        (["train", model, "--epochs", "0"], ["--epochs", "range"]),
        (["train", model, "--epochs", "-3"], ["--epochs"]),
        (["train", model, "--epochs", "99999999999999999999999"], ["--epochs"]),
        (["train", model, "--batch", "0"], ["--batch"]),
        (["train", model, "--batch", ""], ["--batch"]),
        (["train", model, "--lr", "nan"], ["--lr"]),
        (["train", model, "--lr", "inf"], ["--lr"]),
        (["train", model, "--lr", "-0.1"], ["--lr"]),
        (["train", model, "--lr", "fast"], ["--lr"]),
        (["train", model, "--seed", "-1"], ["--seed"]),
        (["train", model, "--limit", "1.5"], ["--limit"]),
        (["train", model, "--optimizer", "rmsprop"], ["--optimizer", "rmsprop", "adam"]),
        (["train", model, "--save"], ["--save"]),  # missing value
        (["train", model, "--save", "--quiet"], ["--save"]),  # a flag is not a value
        (["train", model, "--quiet=1"], ["--quiet"]),
        (["train"], ["MODEL"]),
        (["train", model, "extra"], ["extra"]),
        (["eval"], ["CKPT"]),
        (["eval", "x.ckpt", "--limit", "many"], ["--limit"]),
        (["predict", "x.ckpt"], ["IMAGE"]),
        (["predict", "x.ckpt", "a.pgm", "b.pgm"], ["b.pgm"]),
        (["summary"], ["MODEL"]),
        (["devices", "extra"], ["extra"]),
        (["devices", "--fast"], ["--fast"]),
    ]
    for args, want in cases:
        fails(run(args), 2, want)


@test
def test_devices():
    r = run(["devices"])
    ok(r)
    check(re.search(r"^omp\s+openmp\s+CPU", r.out, re.M) is not None, "the table lists omp", r)
    for col in ("SELECTOR", "BACKEND", "TYPE", "VENDOR", "NAME", "CU", "MEMORY", "VERSION", "FP16", "FP64"):
        check(col in r.out, "the table has a %s column" % col, r)
    r = run(["devices", "--long"])
    ok(r)
    check("compute units:" in r.out and "global memory:" in r.out, "--long prints every field", r)
    r = run(["devices"], env={"CLNET_VISIBLE_DEVICES": "omp"})
    ok(r)
    check(re.search(r"^cl:", r.out, re.M) is None, "CLNET_VISIBLE_DEVICES=omp hides the OpenCL devices", r)


@test
def test_devices_without_opencl():
    r = run(["devices"], env={"OCL_ICD_VENDORS": "/nonexistent", "OCL_ICD_FILENAMES": ""})
    ok(r)
    check(re.search(r"^omp\s", r.out, re.M) is not None, "omp is listed without OpenCL", r)
    check(re.search(r"^cl:", r.out, re.M) is None, "no OpenCL device is listed", r)
    m = re.search(r"^hint: (.+)$", r.out, re.M)
    check(m is not None and len(m.group(1).strip()) > 10, "the hint (cn_device_hint) is printed", r)


@test
def test_summary():
    need_model()
    r = run(["summary", MODEL])
    ok(r)
    layers = [l for l in open(MODEL).read().splitlines() if l.split("#")[0].strip()]
    lines = [l for l in r.out.splitlines() if l.strip()]
    check(len(lines) >= len(layers), "one table row per layer at least", r)
    check(re.search(r"param", r.out, re.I) is not None, "the table shows parameter counts", r)
    check("93322" in r.out.replace(",", ""), "the seed CNN has 93322 parameters", r)


@test
def test_bad_model_file():
    need_model()
    lines = open(MODEL).read().splitlines()
    # garbage inserted as line 3 (after the comment and the input line of the seed model)
    bad = lines[:2] + ["frobnicate 12 wat"] + lines[2:]
    p = write("bad.net", "\n".join(bad) + "\n")
    line_no = re.compile(r"(:3\b|line 3\b)")
    for args in (["summary", p], ["train", p, "--data", DATA, "--device", DEVICE, "--limit", "16", "--epochs", "1"]):
        r = run(args)
        fails(r, 1, ["bad.net", "clnet: error:"])
        check(line_no.search(r.err) is not None, "the message names line 3", r)
    # a shape that cannot fit: a 5x5 convolution after the image has shrunk to 3x3
    bad2 = [l for l in lines]
    bad2.insert(len(bad2) - 3, "conv2d 8 5 relu")
    p2 = write("bad_shape.net", "\n".join(bad2) + "\n")
    r = run(["summary", p2])
    fails(r, 1, ["bad_shape.net"])
    r = run(["summary", path("does-not-exist.net")])
    fails(r, 1, ["does-not-exist.net"])
    r = run(["summary", write("empty.net", "")])
    fails(r, 1, ["empty.net"])
    r = run(["summary", write("binary.net", bytes(range(256)) * 8)])
    fails(r, 1)


@test
def test_missing_data_dir():
    need_model()
    missing = path("no-such-dataset-dir")
    r = run(["train", MODEL, "--data", missing] + TINY)
    fails(r, 1, [missing, "clnet: error:"])
    empty = path("empty-dataset-dir")
    os.makedirs(empty, exist_ok=True)
    r = run(["train", MODEL, "--data", empty] + TINY)
    fails(r, 1, [empty])
    # truncated / garbage IDX files
    junk = path("junk-dataset-dir")
    os.makedirs(junk, exist_ok=True)
    for n in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
              "t10k-labels-idx1-ubyte"):
        with open(os.path.join(junk, n), "wb") as f:
            f.write(b"\x00\x00\x08\x03\x00\x00\x00\x10\x00\x00\x00\x1c")  # header cut short
    r = run(["train", MODEL, "--data", junk] + TINY)
    fails(r, 1)


@test
def test_bad_device():
    need_model()
    need_data()
    r = run(["train", MODEL, "--device", "cl:99", "--data", DATA, "--limit", "16"])
    fails(r, 1, ["cl:99"])
    r = run(["train", MODEL, "--data", DATA, "--limit", "16"], env={"CLNET_DEVICE": "nosuchdevice"})
    fails(r, 1, ["nosuchdevice"])


@test
def test_corrupt_checkpoints():
    img = pgm("probe.pgm", 28, 28)
    files = {
        "empty.ckpt": b"",
        "text.ckpt": b"this is not a checkpoint\n" * 10,
        "magic_only.ckpt": b"CLNETCKP",
        "magic_junk.ckpt": b"CLNETCKP" + bytes((i * 37 + 11) & 255 for i in range(4096)),
        "huge_len.ckpt": b"CLNETCKP\x01\x00\x00\x00" + b"\xff" * 64,
    }
    paths = [write(n, d) for n, d in files.items()]
    paths.append(path("missing.ckpt"))
    paths.append(TMP)  # a directory
    for p in paths:
        fails(run(["eval", p, "--device", DEVICE, "--data", DATA, "--limit", "16"]), 1)
        fails(run(["predict", p, img, "--device", DEVICE]), 1)
        fails(run(["train", "-", "--resume", p, "--device", DEVICE, "--data", DATA, "--limit", "16"]), 1)


# ---- training: tiny runs on the OpenMP device ----

@test
def test_train_tiny():
    need_model()
    need_data()
    report, ckpt = path("report.json"), path("tiny.ckpt")
    r = run(["train", MODEL, "--report", report, "--save", ckpt, "--data", DATA] + TINY)
    ok(r)
    check(re.search(r"^device: %s \(" % re.escape(DEVICE), r.out, re.M) is not None, "prints the device", r)
    lines = [l for l in r.out.splitlines() if l.startswith("epoch ")]
    check(len(lines) == 1, "exactly one line per epoch when not on a terminal", r)
    m = EPOCH_LINE.match(lines[0])
    check(m is not None and m.group(1) == "1" and m.group(2) == "1", "epoch line format", r)
    check("\r" not in r.out and "[===" not in r.out and "Epoch 1/1" not in r.out, "no progress bar in a pipe", r)
    with open(report) as f:
        rep = json.load(f)
    check(isinstance(rep, list) and len(rep) == 1, "the report is an array with one object per epoch", r)
    for k in REPORT_KEYS:
        check(k in rep[0], "report key %s" % k, r)
        check(isinstance(rep[0][k], (int, float)) and math.isfinite(rep[0][k]), "report %s is a number" % k, r)
    e = rep[0]
    check(e["epoch"] == 1, "epoch is 1", r)
    check(0 <= e["accuracy"] <= 1 and 0 <= e["val_accuracy"] <= 1, "accuracies in [0,1]", r)
    check(e["loss"] > 0 and e["val_loss"] > 0 and e["seconds"] > 0 and e["images_per_second"] > 0,
          "positive loss, time, throughput", r)
    check(abs(e["images_per_second"] - 256 / e["seconds"]) <= 0.02 * e["images_per_second"] + 1,
          "images_per_second = training images / training seconds", r)
    check(abs(float(m.group(6)) - e["val_accuracy"]) < 1e-3, "the line and the report agree", r)
    # the engine's own high-water mark per device: at least the f32 parameters, their
    # gradients and Adam's two moments (4 x 93322 floats), which the session holds throughout
    peak = e.get("peak_device_bytes")
    check(isinstance(peak, dict) and list(peak) == [DEVICE] and isinstance(peak[DEVICE], int)
          and peak[DEVICE] >= 4 * 93322 * 4, "peak_device_bytes names the device with its peak: %r" % (peak,), r)
    check(os.path.getsize(ckpt) > 93322 * 4, "the checkpoint holds the weights", r)
    check(not [n for n in os.listdir(TMP) if ".tmp" in n], "no temporary files left behind", r)
    state.update(report=e, ckpt=ckpt, report_path=report)


@test
def test_eval():
    if "ckpt" not in state:
        raise Skip("needs the checkpoint of train_tiny")
    r = run(["eval", state["ckpt"], "--data", DATA, "--limit", "256", "--device", DEVICE])
    ok(r)
    m = re.search(r"loss ([0-9.]+) - accuracy ([0-9.]+)", r.out)
    check(m is not None, "eval prints loss and accuracy", r)
    check(abs(float(m.group(2)) - state["report"]["val_accuracy"]) < 1e-3,
          "eval of the saved weights reproduces the epoch's val_accuracy", r)
    check(abs(float(m.group(1)) - state["report"]["val_loss"]) < 1e-3 * max(1.0, state["report"]["val_loss"]),
          "and its val_loss", r)
    r = run(["eval", state["ckpt"], "--data", path("no-such-dataset-dir"), "--device", DEVICE])
    fails(r, 1, ["no-such-dataset-dir"])


@test
def test_predict():
    if "ckpt" not in state:
        raise Skip("needs the checkpoint of train_tiny")
    img = pgm("item.pgm", 28, 28)
    r = run(["predict", state["ckpt"], img, "--device", DEVICE])
    ok(r)
    m = re.search(r"^class: (\d+) \(([^)]+)\)$", r.out, re.M)
    check(m is not None and 0 <= int(m.group(1)) <= 9, "prints the class index and name", r)
    probs = [float(x) for x in re.findall(r"^\s+\d+\s+.*?\s([01]\.\d{4})(?:\s+<)?$", r.out, re.M)]
    check(len(probs) == 10, "prints 10 probabilities", r)
    check(abs(sum(probs) - 1.0) < 0.01, "probabilities sum to 1", r)
    check(probs.index(max(probs)) == int(m.group(1)), "the class is the most probable", r)
    # P2 (ASCII) works too
    p2 = write("item_ascii.pgm", "P2\n28 28\n255\n" + " ".join("0" if i % 3 else "200" for i in range(784)) + "\n")
    ok(run(["predict", state["ckpt"], p2, "--device", DEVICE]))
    # wrong size, corrupt and missing images
    r = run(["predict", state["ckpt"], pgm("small.pgm", 10, 10), "--device", DEVICE])
    fails(r, 1, ["10x10", "28x28"])
    for name, data in (("trunc.pgm", b"P5\n28 28\n255\n" + b"\x00" * 100), ("junk.pgm", b"GIF89a" + b"\x00" * 800),
                       ("huge.pgm", b"P5\n99999999 99999999\n255\n\x00"), ("empty.pgm", b"")):
        fails(run(["predict", state["ckpt"], write(name, data), "--device", DEVICE]), 1, [name])
    fails(run(["predict", state["ckpt"], path("nope.pgm"), "--device", DEVICE]), 1, ["nope.pgm"])


@test
def test_damaged_real_checkpoint():
    if "ckpt" not in state:
        raise Skip("needs the checkpoint of train_tiny")
    data = open(state["ckpt"], "rb").read()
    img = pgm("item.pgm", 28, 28)
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x40
    variants = {"half.ckpt": data[: len(data) // 2], "minus1.ckpt": data[:-1], "flip.ckpt": bytes(flipped),
                "head.ckpt": data[:64], "plus.ckpt": data + b"\x00" * 7}
    for n, d in variants.items():
        p = write(n, d)
        fails(run(["eval", p, "--device", DEVICE, "--data", DATA, "--limit", "16"]), 1)
        fails(run(["predict", p, img, "--device", DEVICE]), 1)


@test
def test_resume():
    if "ckpt" not in state:
        raise Skip("needs the checkpoint of train_tiny")
    ck2 = path("resumed.ckpt")
    shutil.copy(state["ckpt"], ck2)
    before = open(ck2, "rb").read()
    rep2 = path("resumed.json")
    shutil.copy(state["report_path"], rep2)
    r = run(["train", "-", "--resume", ck2, "--save", ck2, "--report", rep2, "--data", DATA, "--limit", "256",
             "--epochs", "2", "--device", DEVICE])
    ok(r)
    lines = [l for l in r.out.splitlines() if l.startswith("epoch ")]
    check(len(lines) == 1 and lines[0].startswith("epoch 2/2 "), "resuming runs only epoch 2", r)
    check(open(ck2, "rb").read() != before, "the checkpoint was rewritten", r)
    with open(rep2) as f:
        rep = json.load(f)
    check([e["epoch"] for e in rep] == [1, 2], "the resumed report keeps epoch 1 and adds epoch 2", r)
    check(rep[0] == state["report"] or abs(rep[0]["val_accuracy"] - state["report"]["val_accuracy"]) < 1e-6,
          "epoch 1 is kept as it was", r)
    r = run(["eval", ck2, "--data", DATA, "--limit", "256", "--device", DEVICE])
    ok(r)
    check("epoch 2" in r.out, "the resumed checkpoint counts 2 epochs", r)
    # already done
    r = run(["train", "-", "--resume", ck2, "--data", DATA, "--limit", "256", "--epochs", "2", "--device", DEVICE])
    ok(r)
    check("nothing to do" in r.out, "nothing to do when the epochs are done", r)
    # MODEL must be a file or '-' with --resume; '-' alone is an error
    fails(run(["train", "-", "--data", DATA, "--limit", "16", "--device", DEVICE]), 1, ["--resume"])
    # switching optimizer on resume is refused
    fails(run(["train", "-", "--resume", ck2, "--optimizer", "sgd", "--epochs", "3", "--data", DATA,
               "--limit", "16", "--device", DEVICE]), 1, ["--optimizer"])


@test
def test_int8_and_16bit_exports():
    """--precision int8 in eval and predict (weight-only int8 of the seed CNN's conv and dense
    weights); clnet export --precision bf16|fp16 writes a checkpoint of 2-byte weights without
    optimizer state, which eval and predict load (widened to f32) and train --resume refuses."""
    if "ckpt" not in state:
        raise Skip("needs the checkpoint of train_tiny")
    ck = state["ckpt"]

    def accuracy(c, *flags):
        r = run(["eval", c, "--data", DATA, "--limit", "256", "--device", DEVICE, *flags])
        ok(r)
        return float(r.out.split("accuracy ")[1].split()[0])

    f32 = accuracy(ck)
    # Quantisation moves a logit by ~1% of its size: on 256 images at most a few predictions
    # flip (0.03 = 8 images is far above what was seen and far below a broken int8 path's
    # chance-level 0.1).
    check(abs(accuracy(ck, "--precision", "int8") - f32) <= 0.03, "eval --precision int8 stays near fp32")
    r = run(["predict", ck, pgm("q8.pgm", 28, 28), "--device", DEVICE, "--precision", "int8"])
    ok(r)
    check(re.search(r"^class: \d+", r.out, re.M) is not None, "predict --precision int8 prints a class", r)
    for prec in ("bf16", "fp16"):
        out = path("seed-%s.ckpt" % prec)
        r = run(["export", ck, out, "--precision", prec])
        ok(r)
        # 93,322 weights of 2 bytes, plus names, shapes and the model text (a few KiB)
        check(93322 * 2 < os.path.getsize(out) < 93322 * 2 + 8192, "export --precision %s: 2-byte weights, no optimizer "
              "state (%d bytes)" % (prec, os.path.getsize(out)), r)
        check(abs(accuracy(out) - f32) <= 0.03, "the %s export evaluates like the f32 checkpoint" % prec)
        ok(run(["predict", out, pgm("x16.pgm", 28, 28), "--device", DEVICE]))
        fails(run(["train", "-", "--resume", out, "--data", DATA, "--limit", "64", "--epochs", "2", "--device", DEVICE]),
              1, ["16-bit export", "f32"])
    fails(run(["export", ck, path("x.ckpt"), "--precision", "int4"]), 2, ["--precision"])


@test
def test_optimizer_settings():
    """--weight-decay and friends (gradient clipping too) change training, are stored in the
    checkpoint and come back on --resume: 1 epoch + resume 1 without the flags gives the same
    bytes as 2 straight."""
    need_data()
    model = write("linear.net", "input 28 28 1\nflatten\ndense 10\n")
    common = ["--data", DATA, "--limit", "256", "--device", DEVICE, "--batch", "32", "-q"]

    def train(name, *flags, epochs=1, resume=None):
        ck = path(name)
        args = ["train", model if not resume else "-", "--epochs", str(epochs), "--save", ck, *common, *flags]
        if resume:
            args += ["--resume", resume]
        ok(run(args))
        return ck

    def test_loss(ck):
        r = run(["eval", ck, "--data", DATA, "--limit", "256", "--device", DEVICE])
        ok(r)
        return float(r.out.split("loss ")[1].split()[0])

    adam = train("adam.ckpt", "--optimizer", "adam")
    adamw0 = train("adamw0.ckpt", "--optimizer", "adamw", "--weight-decay", "0")
    adamw = train("adamw.ckpt", "--optimizer", "adamw", "--weight-decay", "0.5")
    check(test_loss(adam) == test_loss(adamw0), "AdamW without decay trains exactly like Adam")
    check(test_loss(adamw) != test_loss(adam), "--weight-decay 0.5 changes AdamW's training")
    eps = train("eps.ckpt", "--optimizer", "adam", "--eps", "0.1")
    check(test_loss(eps) != test_loss(adam), "--eps changes Adam's training")
    flags = ["--optimizer", "adamw", "--lr", "0.003", "--beta1", "0.8", "--beta2", "0.99", "--eps", "1e-5",
             "--weight-decay", "0.1"]
    straight = train("straight.ckpt", *flags, epochs=2)
    first = train("first.ckpt", *flags, epochs=1)
    shutil.copy(first, path("resumed2.ckpt"))
    resumed = train("resumed2.ckpt", epochs=2, resume=path("resumed2.ckpt"))
    check(open(straight, "rb").read() == open(resumed, "rb").read(),
          "resuming without the flags continues with the stored settings (byte-identical checkpoint)")
    for bad in (["--beta1", "1.5"], ["--eps", "0"], ["--weight-decay", "-1"], ["--momentum", "x"],
                ["--lr-schedule", "linear"], ["--warmup", "-1"]):
        fails(run(["train", model, *common, *bad]), 2, [bad[0]])

    # A cosine schedule spans --epochs: a run stopped after its first epoch and resumed ends
    # byte-identical to the run that went straight through; the schedule changes training.
    sched = ["--lr-schedule", "cosine", "--warmup", "3", "--min-lr", "1e-5"]
    cos_straight = train("cos_straight.ckpt", *sched, epochs=2)
    cut = train("cos_cut.ckpt", *sched, "--steps", "8", epochs=2)  # 256 images / 32 = 8 steps: epoch 1
    cos_resumed = train("cos_cut.ckpt", epochs=2, resume=cut)
    check(open(cos_straight, "rb").read() == open(cos_resumed, "rb").read(),
          "a cosine schedule resumed mid-run continues where it was (byte-identical checkpoint)")
    const2 = train("const2.ckpt", epochs=2)
    check(test_loss(const2) != test_loss(cos_straight), "--lr-schedule cosine changes training")
    # 8 steps in all: a warm-up of 8 leaves no cosine; a floor above --lr is no decay
    fails(run(["train", model, *common, "--epochs", "1", "--lr-schedule", "cosine", "--warmup", "8"]), 1, ["warm-up"])
    fails(run(["train", model, *common, "--lr-schedule", "cosine", "--min-lr", "0.01"]), 1,
          ["minimum learning rate"])

    # Gradient clipping: --clip-norm and --clip-value change training, do nothing when far
    # above the gradients, come back on --resume (byte-identical) and refuse bad values.
    plain = test_loss(adam)
    check(test_loss(train("bynorm.ckpt", "--clip-norm", "0.05")) != plain, "--clip-norm 0.05 changes training")
    check(test_loss(train("byvalue.ckpt", "--clip-value", "0.0005")) != plain, "--clip-value 0.0005 changes training")
    check(test_loss(train("loose.ckpt", "--clip-norm", "1e9", "--clip-value", "1e9")) == plain,
          "clipping far above the gradients trains exactly as without it")
    clip = ["--clip-norm", "0.05", "--clip-value", "0.002"]
    clip_straight = train("clip_straight.ckpt", *clip, epochs=2)
    clip_first = train("clip_first.ckpt", *clip, epochs=1)
    clip_resumed = train("clip_first.ckpt", epochs=2, resume=clip_first)
    check(open(clip_straight, "rb").read() == open(clip_resumed, "rb").read(),
          "resuming without the flags keeps the stored clipping (byte-identical checkpoint)")
    for bad in (["--clip-norm", "-1"], ["--clip-value", "nan"], ["--clip-norm", "x"], ["--clip-value", "inf"]):
        fails(run(["train", model, *common, *bad]), 2, [bad[0]])

    # Mixed precision: bf16 and fp16 train (a different trajectory from f32's), write the same
    # f32 checkpoint format (evaluable; fp16 adds only its loss scale, optimizer.loss_scale,
    # two floats), and an unknown precision names the choices.
    for prec in ("bf16", "fp16"):
        ck = train("prec_%s.ckpt" % prec, "--precision", prec)
        extra = os.path.getsize(ck) - os.path.getsize(adam)
        scaled = b"optimizer.loss_scale" in open(ck, "rb").read()
        check(extra == 0 and not scaled if prec == "bf16" else 0 < extra < 128 and scaled,
              "--precision %s keeps f32 checkpoints (%d bytes more)" % (prec, extra))
        check(open(ck, "rb").read() != open(adam, "rb").read(), "--precision %s changes the weights' rounding" % prec)
        test_loss(ck)  # and the checkpoint evaluates
    fails(run(["train", model, *common, "--precision", "fp8"]), 2, ["--precision", "fp32, bf16, fp16"])
    for prec in ("bf16", "fp16"):  # inference in 16 bits from the same f32 checkpoint
        r = run(["eval", adam, "--data", DATA, "--limit", "256", "--device", DEVICE, "--precision", prec])
        ok(r)
        check("accuracy" in r.out, "eval --precision %s reports" % prec, r)
    fails(run(["train", model, *common, "--precision", "int8"]), 2, ["fp32, bf16, fp16"])  # int8 infers only


@test
def test_devices_mirrored():
    """--devices trains one replica per device; the epoch line shows the split; the checkpoint
    is an ordinary one."""
    need_data()
    model = write("mirror.net", "input 28 28 1\nflatten\ndense 32 relu\ndense 10\n")
    ck = path("mirror.ckpt")
    r = run(["train", model, "--devices", "omp,cl:0", "--data", DATA, "--limit", "512", "--epochs", "1",
             "--save", ck])
    if r.rc != 0 and "cl:0" in r.err and "no device" in r.err:
        raise Skip("no OpenCL device")
    ok(r)
    check("devices: omp" in r.out and "- split omp " in r.out and ", cl:0 " in r.out, "the devices and the split are shown", r)
    rows = [int(x) for x in r.out.split("- split omp ")[1].split(", cl:0 ")]
    check(sum(rows) == 64 and min(rows) >= 1, "the split covers the batch", r)
    ok(run(["eval", ck, "--data", DATA, "--limit", "256", "--device", "omp"]))
    fails(run(["train", model, "--devices", "omp,omp", "--data", DATA, "--limit", "64"]), 1, ["twice"])
    fails(run(["train", model, "--devices", "omp,cl:0", "--device", "omp", "--data", DATA, "--limit", "64"]), 1,
          ["--devices"])
    fails(run(["train", model, "--devices", "omp,nosuch", "--data", DATA, "--limit", "64"]), 1, ["nosuch"])


@test
def test_resume_is_exact():
    """2 epochs straight and 1 + --resume 1 write byte-identical checkpoints, for every
    optimizer, with and without dropout, with the default and another seed (--seed is given to
    the first run only: the checkpoint's seed must carry the resumed epochs)."""
    need_data()
    models = {"plain": "input 28 28 1\nflatten\ndense 16 relu\ndense 10\n",
              "dropout": "input 28 28 1\nflatten\ndense 16 relu\ndropout 0.3\ndense 10\n"}
    common = ["--data", DATA, "--limit", "256", "--device", DEVICE, "--batch", "32", "-q"]
    for mname, text in models.items():
        model = write("exact-%s.net" % mname, text)
        for opt in ("adam", "sgd", "adamw"):
            for seed in ([], ["--seed", "7"]):
                tag = "%s-%s-%s" % (mname, opt, "7" if seed else "default")
                straight, split = path("exact-%s-2.ckpt" % tag), path("exact-%s-1.ckpt" % tag)
                ok(run(["train", model, "--optimizer", opt, "--epochs", "2", "--save", straight, *seed, *common]))
                ok(run(["train", model, "--optimizer", opt, "--epochs", "1", "--save", split, *seed, *common]))
                r = run(["train", "-", "--resume", split, "--save", split, "--epochs", "2", *common])
                ok(r)
                check("--seed" not in r.err, "no seed warning when --seed is not given", r)
                check(open(straight, "rb").read() == open(split, "rb").read(),
                      "%s: 1 epoch + resume 1 differs from 2 epochs straight" % tag, r)
    # --seed given again with another value: ignored, and the warning says so
    r = run(["train", "-", "--resume", split, "--epochs", "3", "--seed", "99", *common])
    ok(r)
    check("--seed 99 ignored" in r.err, "a different --seed on resume is reported as ignored", r)


@test
def test_output_paths_checked_first():
    """Bad --save and --report paths are refused before any training."""
    model = write("paths.net", "input 28 28 1\nflatten\ndense 10\n")
    for flag, bad, want in (("--save", "/nonexistent-dir/x.ckpt", "does not exist"), ("--save", TMP, "directory"),
                            ("--report", "/nonexistent-dir/r.json", "does not exist")):
        r = run(["train", model, flag, bad, "--data", DATA, "--limit", "64", "--device", "omp"])
        fails(r, 1, [flag, want])
        check("epoch" not in r.out, "%s %s refused before training" % (flag, bad), r)


def _stop_with(sig, after_s, model, ck, extra=()):
    env = dict(os.environ)
    env.pop("CLNET_DEVICE", None)
    p = subprocess.Popen([CLNET, "train", model, "--save", ck, "--data", DATA, "--device", "omp", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=TMP, stdin=subprocess.DEVNULL)
    time.sleep(after_s)
    p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError("clnet did not stop within 120 s of signal %d" % sig)
    return p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


@test
def test_signals():
    """SIGINT, SIGTERM and SIGHUP while loading and while training: a message, the signal's
    exit status (128 + N), no temporary file, and any earlier checkpoint intact."""
    need_data()
    model = write("sig.net", "input 28 28 1\nflatten\ndense 64 relu\ndense 10\n")
    for sig, when in ((signal.SIGINT, 0.05), (signal.SIGHUP, 0.05), (signal.SIGTERM, 0.05), (signal.SIGINT, 3.0),
                      (signal.SIGHUP, 3.0)):
        ck = path("sig-%d-%g.ckpt" % (sig, when))
        rc, out, err = _stop_with(sig, when, model, ck, ["--epochs", "50"])
        check(rc == 128 + sig, "signal %d after %g s: exit status %s, expected %d\n%s" % (sig, when, rc, 128 + sig, err))
        check(err.strip() != "", "signal %d after %g s: no message" % (sig, when))
        left = [f for f in os.listdir(TMP) if ".tmp." in f]
        check(not left, "temporary files left behind: %s" % left)
        if os.path.exists(ck):
            ok(run(["eval", ck, "--data", DATA, "--limit", "64", "--device", "omp"]))


@test
def test_steps_and_quiet():
    need_model()
    need_data()
    r = run(["train", MODEL, "--steps", "2", "--data", DATA, "--limit", "256", "--epochs", "3", "--device", DEVICE])
    ok(r)
    check("stopped after 2 steps" in r.out, "--steps stops early", r)
    check(len([l for l in r.out.splitlines() if l.startswith("epoch ")]) == 1, "one (partial) epoch", r)
    r = run(["train", MODEL, "--steps", "1", "--quiet", "--data", DATA, "--limit", "64", "--epochs", "1",
             "--device", DEVICE])
    ok(r)
    check(r.out.strip() == "", "--quiet prints nothing on stdout", r)
    # a report that cannot be written is an error naming it
    bad = os.path.join(path("no-such-dir"), "r.json")
    r = run(["train", MODEL, "--steps", "1", "--report", bad, "--data", DATA, "--limit", "64", "--device", DEVICE])
    fails(r, 1, [bad])
    bad = os.path.join(path("no-such-dir"), "c.ckpt")
    r = run(["train", MODEL, "--steps", "1", "--save", bad, "--data", DATA, "--limit", "64", "--device", DEVICE])
    fails(r, 1, ["no-such-dir"])


@test
def test_placement_and_profile_logs():
    need_model()
    need_data()
    base = ["train", MODEL, "--steps", "1", "--quiet", "--data", DATA, "--limit", "64", "--epochs", "1",
            "--device", DEVICE]
    quiet = {"CLNET_LOG_LEVEL": "warn", "CLNET_LOG_PLACEMENT": "0", "CLNET_PROFILE": "0"}
    r = run(base, env=dict(quiet, CLNET_LOG_PLACEMENT="1"))
    ok(r)
    check(re.search(r"placement: node \d+ matmul\S* -> %s$" % re.escape(DEVICE), r.err, re.M) is not None,
          "CLNET_LOG_PLACEMENT=1 alone puts the placement on stderr", r)
    check("opened device" not in r.err, "and no other INFO message", r)
    r = run(base, env=dict(quiet, CLNET_PROFILE="1"))
    ok(r)
    check(re.search(r"profile: matmul +\d+ calls +[0-9.]+ s +[0-9.]+% +[0-9.]+ s cpu$", r.err, re.M) is not None,
          "CLNET_PROFILE=1 prints the per-op table (wall and CPU seconds) on stderr", r)
    # the seed CNN's last layer, Dense(64 -> 10) with its bias fused, at the batch of 64
    check(re.search(r"profile: gemm b=1 m=64 n=10 k=64 ta=0 tb=0 bias=1 epilogue=0 +\d+ calls +[0-9.]+ s +[0-9.]+ "
                    r"GFLOP/s +[0-9.]+ s cpu", r.err) is not None, "and every matmul shape with its rate", r)
    r = run(base, env=quiet)
    ok(r)
    check("placement:" not in r.err and "profile:" not in r.err, "neither without being asked for", r)


@test
def test_device_by_name_and_memory_limit():
    need_model()
    need_data()
    base = ["train", MODEL, "--steps", "1", "--data", DATA, "--limit", "64", "--epochs", "1"]
    r = run(base + ["--device", "OPENMP REF"])
    ok(r)
    check(re.search(r"^device: omp \(", r.out, re.M) is not None, "a part of the name selects the device", r)
    r = run(base + ["--device", DEVICE], env={"CLNET_MEMORY_LIMIT": "12Q"})
    fails(r, 1, ["CLNET_MEMORY_LIMIT", "12Q"])
    r = run(base + ["--device", DEVICE], env={"CLNET_MEMORY_LIMIT": "64K"})
    fails(r, 1)
    check("CLNET_MEMORY_LIMIT" in r.err or "65536" in r.err, "a 64K cap is applied and named", r)


@test
def test_model_too_big_is_refused_up_front():
    """dense 4000000 on Fashion-MNIST needs 47 GiB for its weights, their gradients and Adam's
    state: more than the host (omp) or the OpenCL device has. It is refused before training (in
    0.4 s here; it once ran 105 s until the kernel killed it), naming the estimate and the limit."""
    need_data()
    p = write("huge.net", "input 28 28 1\nflatten\ndense 4000000 relu\ndense 10\n")
    devices = ["omp"] + (["cl:0"] if "cl:0" in run(["devices"]).out else [])
    for dev in devices:
        r = run(["train", p, "--data", DATA, "--limit", "64", "--epochs", "1", "--device", dev], timeout=120)
        fails(r, 1)
        check(len(re.findall(r"[0-9.]+ MiB", r.err)) >= 2, "the estimate and the limit, in MiB", r)
        check(dev in r.err, "the device named", r)
        check(re.search(r"^epoch ", r.out, re.M) is None, "no epoch ran", r)
        check(r.seconds < 20, "refused up front (took %.1f s)" % r.seconds, r)


@test
def test_nonfinite_loss():
    need_model()
    need_data()
    r = run(["train", MODEL, "--lr", "100", "--optimizer", "sgd", "--data", DATA, "--limit", "512", "--epochs", "3",
             "--device", DEVICE])
    no_crash(r)
    if r.rc == 0:
        raise Skip("lr 100 stayed finite on this run")
    fails(r, 1, ["--lr"])


@test
def test_progress_bar_on_a_terminal():
    need_model()
    need_data()
    try:
        import pty
    except ImportError:
        raise Skip("no pty module")
    master, slave = pty.openpty()
    env = dict(os.environ, COLUMNS="200")
    env.pop("CLNET_DEVICE", None)
    p = subprocess.Popen([CLNET, "train", MODEL, "--data", DATA] + TINY, stdout=slave, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, env=env, cwd=TMP)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        rd, _, _ = select.select([master], [], [], 1.0)
        if rd:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif p.poll() is not None:
            break
    os.close(master)
    p.wait(timeout=60)
    err = p.stderr.read().decode("utf-8", "replace")
    out = b"".join(chunks).decode("utf-8", "replace")
    r = Result(["train", "(pty)"], p.returncode, out, err, 0)
    ok(r)
    check("Epoch 1/1" in out, "Keras-style epoch header", r)
    check(re.search(r"4/4 \[={30}\] - \S+ \d+m?u?s/step - loss: [0-9.]+ - accuracy: [0-9.]+ - val_loss: [0-9.]+ - "
                    r"val_accuracy: [0-9.]+", out) is not None, "final bar line with validation figures", r)
    check(re.search(r"^epoch 1/1 ", out, re.M) is None, "no CI line on a terminal", r)


if __name__ == "__main__":
    sys.exit(main())
