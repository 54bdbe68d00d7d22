#!/usr/bin/env python3
"""CLI tests of the shipped models of issue 16 (stdlib only): resnet_fashion.net,
mobilenet_fashion.net and unet_denoise.net each parse, train a few steps and evaluate on omp
and on the first OpenCL device (POCL here); the denoising task (--noise) reports the PSNR of
the noisy test images and of the output, in train's epoch line, its report and eval; bad input
for the task gets a clear error. Training them to their accuracy is not a CI test: the recipes
and the figures are in README.md and docs/BENCHMARKS.md.

Usage: test_cli_models.py PATH/TO/clnet [SOURCE_ROOT]
"""
import json
import math
import os
import re
import sys

from clitest import DATA, ROOT, Skip, check, fails, main, need_data, ok, path, pgm, run, test, write

MODELS = os.path.join(ROOT, "models")
CLASSIFIERS = ("resnet_fashion.net", "mobilenet_fashion.net")
UNET = os.path.join(MODELS, "unet_denoise.net")
SIGMA = 0.3
LIMIT = 32  # training and test images: 32 x 784 noisy test pixels
DENOISE_LINE = re.compile(r"^epoch 1/1 - loss ([0-9.]+) - val_loss ([0-9.]+) - val_psnr (-?[0-9.]+) dB "
                          r"\(noisy input ([0-9.]+) dB\) - ([0-9.]+)s - ([0-9]+) img/s$", re.M)
EVAL_LINE = re.compile(r"^test: (\d+) images, noise sigma ([0-9.]+) - loss \(MSE\) ([0-9.]+) - PSNR noisy input "
                       r"([0-9.]+) dB, output (-?[0-9.]+) dB \(([-+][0-9.]+) dB\)", re.M)

state = {}


def devices():
    """omp, and cl:0 when an OpenCL device exists (POCL in CI)."""
    if "devices" not in state:
        r = run(["devices"])
        ok(r)
        state["devices"] = ["omp"] + (["cl:0"] if re.search(r"^\s*cl:0\b", r.out, re.M) else [])
    return state["devices"]


@test
def test_summaries():
    for name, want in (("resnet_fashion.net", ("BatchNorm", "residual_2 (Add)", "GlobalAvgPool", "(None, 10)")),
                       ("mobilenet_fashion.net", ("hard_swish", "hard_sigmoid", "mul_1 (Multiply)", "(None, 14, 14, 16)", "(None, 10)")),
                       ("unet_denoise.net", ("Conv2DTranspose", "concat_2", "add_1", "(None, 28, 28, 1)"))):
        r = run(["summary", os.path.join(MODELS, name)])
        ok(r)
        for w in want:
            check(w in r.out, "%s's summary shows %r" % (name, w), r)


@test
def test_classifiers_train_and_eval():
    need_data()
    for name in CLASSIFIERS:
        for dev in devices():
            ck = path("%s.%s.ckpt" % (name, dev.replace(":", "")))
            r = run(["train", os.path.join(MODELS, name), "--data", DATA, "--limit", str(LIMIT), "--batch", "16",
                     "--steps", "2", "--device", dev, "--save", ck])
            ok(r)
            check("stopped after 2 steps" in r.out and "val_accuracy" in r.out, "%s trains on %s" % (name, dev), r)
            r = run(["eval", ck, "--data", DATA, "--limit", str(LIMIT), "--device", dev])
            ok(r)
            check(re.search(r"test: %d images - loss [0-9.]+ - accuracy [0-9.]+" % LIMIT, r.out),
                  "%s evaluates on %s" % (name, dev), r)


def expected_input_psnr():
    """Additive N(0, sigma^2) noise, unclipped: MSE sigma^2, so PSNR = -10 log10(sigma^2) (peak 1)."""
    return -10.0 * math.log10(SIGMA * SIGMA)


@test
def test_denoiser_train_and_eval():
    need_data()
    # The noisy test set's MSE is a mean of n = 32 x 784 values sigma^2 z^2, whose relative
    # standard deviation is sqrt(2/n) = 0.89%, i.e. 0.039 dB of PSNR: 0.2 dB is over 5 of them.
    tol_db = 0.2
    psnr = {}
    for dev in devices():
        ck, report = path("unet.%s.ckpt" % dev.replace(":", "")), path("unet.%s.json" % dev.replace(":", ""))
        r = run(["train", UNET, "--noise", str(SIGMA), "--data", DATA, "--limit", str(LIMIT), "--batch", "16",
                 "--epochs", "1", "--device", dev, "--save", ck, "--report", report])
        ok(r)
        check("Gaussian noise sigma 0.3 added" in r.out, "the data line names the noise", r)
        m = DENOISE_LINE.search(r.out)
        check(m is not None, "the epoch line reports the MSE and the PSNRs (no accuracy)", r)
        val_loss, val_psnr, in_psnr = float(m.group(2)), float(m.group(3)), float(m.group(4))
        check(abs(in_psnr - expected_input_psnr()) < tol_db,
              "the noisy input's PSNR is %.2f dB, expected %.2f +- %.2f" % (in_psnr, expected_input_psnr(), tol_db), r)
        check(abs(val_psnr + 10 * math.log10(val_loss)) < 0.01, "val_psnr is -10 log10(val_loss)", r)
        rec = json.load(open(report))[0]
        check(abs(rec["val_psnr"] - val_psnr) < 0.006 and abs(rec["input_psnr"] - in_psnr) < 0.006,
              "the report holds val_psnr and input_psnr", r)
        r = run(["eval", ck, "--noise", str(SIGMA), "--data", DATA, "--limit", str(LIMIT), "--device", dev])
        ok(r)
        e = EVAL_LINE.search(r.out)
        check(e is not None and int(e.group(1)) == LIMIT, "eval reports the PSNR of the input and the output", r)
        # the test noise is one fixed stream: eval sees the noisy images train validated on
        check(float(e.group(4)) == in_psnr, "eval's noisy input is train's (%s dB)" % in_psnr, r)
        check(abs(float(e.group(5)) - val_psnr) < 0.01, "eval's output PSNR is train's validation PSNR", r)
        check(abs(float(e.group(6)) - (float(e.group(5)) - in_psnr)) < 0.011, "the gain is output - input", r)
        psnr[dev] = float(e.group(5))
    if len(psnr) == 2:  # the same weights start both runs, the same noise goes in
        check(abs(psnr["omp"] - psnr["cl:0"]) < 0.05, "omp and POCL train the denoiser alike: %s" % psnr)


@test
def test_denoiser_bad_input():
    need_data()
    resnet = os.path.join(MODELS, "resnet_fashion.net")
    fails(run(["train", UNET, "--data", DATA, "--limit", "8", "--device", "omp"]), 1,
          ("ends in an image (28x28x1)", "--noise SIGMA"))
    fails(run(["train", resnet, "--noise", "0.3", "--data", DATA, "--limit", "8", "--device", "omp"]), 1,
          ("--noise trains a denoiser", "ends in 10 features", "leave --noise out"))
    for bad in ("0", "-0.3", "nan", "inf", "1e9", "x"):
        fails(run(["train", UNET, "--noise", bad, "--data", DATA, "--limit", "8", "--device", "omp"]), want=("--noise",))
    small = write("half.net", "input 28 28 1\nconv2d 4 3 stride=2 pad=1\n")
    fails(run(["train", small, "--noise", "0.3", "--data", DATA, "--limit", "8", "--device", "omp"]), 1,
          ("input's shape (28x28x1)", "outputs 14x14x4"))
    lm = write("lm.net", "input tokens 8 256\nembed 8\ndense 256\n")
    text = write("t.txt", "some words of text to read. " * 40)
    fails(run(["train", lm, "--noise", "0.3", "--text", text, "--device", "omp"]), 1, ("reads tokens",))
    # checkpoints: a denoiser evaluated without --noise, a classifier with it, predict on a denoiser
    den, cls = path("bad_unet.ckpt"), path("bad_resnet.ckpt")
    ok(run(["train", UNET, "--noise", "0.3", "--data", DATA, "--limit", "8", "--steps", "1", "--device", "omp",
            "--save", den]))
    ok(run(["train", resnet, "--data", DATA, "--limit", "8", "--steps", "1", "--device", "omp", "--save", cls]))
    fails(run(["eval", den, "--data", DATA, "--limit", "8", "--device", "omp"]), 1, ("--noise SIGMA",))
    fails(run(["eval", cls, "--noise", "0.3", "--data", DATA, "--limit", "8", "--device", "omp"]), 1,
          ("leave --noise out",))
    fails(run(["predict", den, pgm("item.pgm", 28, 28), "--device", "omp"]), 1, ("is a denoiser", "clnet eval"))
    r = run(["train", "--help"])
    check("--noise SIGMA" in r.out, "train --help documents --noise", r)


if __name__ == "__main__":
    sys.exit(main())
