#!/usr/bin/env python3
"""CLI tests of sequence models (stdlib only): the transformer model files, training a byte-level
language model on a text file (epoch line, report, bits per byte), eval on text, generate, and
generate with and without the key/value cache (the same greedy text, prompts longer than the
context); the refusals of bad input: empty, binary and too-short text, a slide longer than the context,
heads that do not divide the width, an image model's checkpoint given to generate; a ViT
training step from the CLI; a checkpoint written before sequence models existed still loads.

Usage: test_cli_text.py PATH/TO/clnet [SOURCE_ROOT]
"""
import json
import math
import os
import re
import sys

from clitest import DATA, DEVICE, ROOT, Skip, check, fails, main, need_data, ok, path, run, test, write

TINY_LM = """# a tiny causal byte model for the tests
input tokens 16 256
embed 16
transformer 2 32 causal
layer_norm
dense 256
"""
EPOCH_LINE = re.compile(r"^epoch (\d+)/(\d+) - loss ([0-9.]+) - accuracy ([0-9.]+) - val_loss ([0-9.]+) - "
                        r"val_accuracy ([0-9.]+) - val_bpb ([0-9.]+) - ([0-9.]+)s - ([0-9]+) tok/s$")
# Written by clnet at commit 4822098 (before sequence models):
#   clnet train old_cnn.net --limit 256 --epochs 1 --device omp --seed 3 --save old_cnn.ckpt
# with old_cnn.net the model text stored in it; then, by the same build,
#   clnet eval old_cnn.ckpt --limit 256 --device omp
# printed the loss and accuracy below.
OLD_CKPT = os.path.join(ROOT, "tests", "fixtures", "old_cnn.ckpt")
OLD_EVAL = ("2.3443", "0.1484")

state = {}


def corpus():
    """About 20 KB of text with structure a tiny model can learn."""
    if "corpus" not in state:
        verse = ("And God said, Let there be light: and there was light. And God saw the light, that it was good: "
                 "and God divided the light from the darkness.\n")
        state["corpus"] = write("corpus.txt", verse * 150)
    return state["corpus"]


def tiny_lm():
    if "model" not in state:
        state["model"] = write("tiny_lm.net", TINY_LM)
    return state["model"]


@test
def test_summaries_and_help():
    for name, want in (("vit_fashion.net", ("PatchEmbed", "(None, 49, 64)", "Attention", "residual_4 (Add)",
                                             "MeanTokens", "(None, 10)")),
                       ("char_gpt.net", ("input (Tokens)", "(None, 128)", "Embed", "(None, 128, 256)", "residual_8"))):
        r = run(["summary", os.path.join(ROOT, "models", name)])
        ok(r)
        for w in want:
            check(w in r.out, "summary of %s shows %r" % (name, w), r)
    r = run(["generate", "--help"])
    ok(r)
    for w in ("--prompt", "--tokens", "--temperature", "--seed", "--device", "--no-cache", "--cache-type", "--slide"):
        check(w in r.out, "generate --help documents %s" % w, r)
    r = run(["train", "--help"])
    check("--text" in r.out and "bits per byte" in r.out, "train --help documents --text", r)
    r = run(["--help"])
    check("generate" in r.out, "--help lists generate", r)


@test
def test_train_text_eval_generate():
    report, ckpt = path("lm.json"), path("lm.ckpt")
    r = run(["train", tiny_lm(), "--text", corpus(), "--epochs", "1", "--batch", "16", "--limit", "64", "--lr", "0.003",
             "--device", DEVICE, "--save", ckpt, "--report", report])
    ok(r)
    lines = [m for m in (EPOCH_LINE.match(l) for l in r.out.splitlines()) if m]
    check(len(lines) == 1, "one epoch line with val_bpb and tok/s", r)
    check("training, " in r.out and "validation windows of 16 bytes" in r.out, "the data line describes windows", r)
    loss, val_loss, bpb = float(lines[0].group(3)), float(lines[0].group(5)), float(lines[0].group(7))
    check(abs(bpb - val_loss / math.log(2)) < 2e-3, "val_bpb is val_loss / ln 2", r)
    check(loss < math.log(256), "the loss fell below uniform guessing (%.3f)" % loss, r)
    rep = json.load(open(report))
    check(len(rep) == 1 and rep[0]["tokens_per_second"] > 0 and
          abs(rep[0]["val_bits_per_byte"] - rep[0]["val_loss"] / math.log(2)) < 1e-4, "report: %r" % rep)
    state["ckpt"], state["report"] = ckpt, rep[0]
    # eval on the same validation windows gives the same figures
    r = run(["eval", ckpt, "--text", corpus(), "--limit", "64", "--device", DEVICE])
    ok(r)
    m = re.search(r"validation: (\d+) windows of 16 bytes - loss ([0-9.]+) - bits per byte ([0-9.]+) - accuracy "
                  r"([0-9.]+)", r.out)
    check(m is not None, "eval prints the validation figures", r)
    check(abs(float(m.group(2)) - rep[0]["val_loss"]) < 1e-3 and abs(float(m.group(4)) - rep[0]["val_accuracy"]) < 1e-3,
          "eval agrees with the report", r)
    # generate: the prompt, then --tokens bytes; the same seed gives the same text
    args = ["generate", ckpt, "--prompt", "And God", "--tokens", "40", "--seed", "5", "--device", DEVICE]
    a, b = run(args), run(args)
    ok(a)
    check(a.raw == b.raw and a.raw.startswith(b"And God") and len(a.raw) == 7 + 40 + 1,
          "generate prints the prompt, 40 bytes and a newline, reproducibly", a)
    g = run(["generate", ckpt, "--prompt", "And God", "--tokens", "40", "--temperature", "0", "--device", DEVICE])
    ok(g)
    check(g.out.startswith("And God"), "greedy generation", g)
    # the key/value cache writes the uncached path's text at temperature 0: a prompt longer than
    # the context of 16 bytes, 40 bytes past it, at the default slide (8) and at 1
    long_prompt = "And God said, Let there be"
    for extra in ([], ["--slide", "1"], ["--slide", "16"]):
        cmd = ["generate", ckpt, "--prompt", long_prompt, "--tokens", "40", "--temperature", "0", "--device",
               DEVICE] + extra
        cached, uncached = run(cmd), run(cmd + ["--no-cache"])
        ok(cached)
        ok(uncached)
        check(cached.raw == uncached.raw and len(cached.raw) == len(long_prompt) + 41,
              "cached and --no-cache greedy texts are equal (%s)" % " ".join(extra), cached)
    # 16- and 8-bit caches run and keep the format of the output
    for ct in ("bf16", "int8"):
        r = run(["generate", ckpt, "--prompt", long_prompt, "--tokens", "20", "--cache-type", ct, "--device", DEVICE])
        ok(r)
        check(r.raw.startswith(long_prompt.encode()) and len(r.raw) == len(long_prompt) + 21, "%s cache" % ct, r)
    # resume one more epoch
    r = run(["train", "-", "--resume", ckpt, "--text", corpus(), "--epochs", "2", "--limit", "64", "--device", DEVICE])
    ok(r)
    check("resumed: 1 epochs done" in r.out and re.search(r"^epoch 2/2 ", r.out, re.M), "resumed to epoch 2", r)


@test
def test_int8_and_bf16_export_of_a_language_model():
    """The char model in int8 (its attention and MLP weights; the embedding table stays f32)
    and from a bf16 export: eval's bits per byte stay near f32's, generate runs."""
    if "ckpt" not in state:
        raise Skip("needs the checkpoint of train_text_eval_generate")
    ckpt = state["ckpt"]

    def bpb(c, *flags):
        r = run(["eval", c, "--text", corpus(), "--limit", "64", "--device", DEVICE, *flags])
        ok(r)
        return float(re.search(r"bits per byte ([0-9.]+)", r.out).group(1))

    f32 = bpb(ckpt)
    # int8 moves a logit by ~1% of its size, bf16 weights by 2^-9: both far within 2% of the
    # bits per byte, a broken path lands near uniform guessing (8 bits)
    check(abs(bpb(ckpt, "--precision", "int8") - f32) <= 0.02 * f32, "eval --precision int8 near f32")
    g = run(["generate", ckpt, "--prompt", "And God", "--tokens", "20", "--seed", "5", "--device", DEVICE,
             "--precision", "int8"])
    ok(g)
    check(g.raw.startswith(b"And God") and len(g.raw) == 7 + 20 + 1, "generate --precision int8", g)
    # the key/value cache binds float32 weights: int8 must say it runs uncached, and refuse a
    # cache type it cannot honour (before the check it ran the cache on unquantised weights)
    check("without the key/value cache" in g.err, "generate --precision int8 says it runs uncached", g)
    bad = run(["generate", ckpt, "--prompt", "And God", "--tokens", "5", "--device", DEVICE, "--precision", "int8",
               "--cache-type", "bf16"])
    check(bad.rc != 0 and "--cache-type" in bad.err, "generate --precision int8 --cache-type is refused", bad)
    half = path("lm-bf16.ckpt")
    ok(run(["export", ckpt, half, "--precision", "bf16"]))
    check(abs(bpb(half) - f32) <= 0.02 * f32, "the bf16 export evaluates near f32")
    ok(run(["generate", half, "--prompt", "And God", "--tokens", "20", "--device", DEVICE]))


@test
def test_bad_text_input():
    model = tiny_lm()
    big = "x" * 2000
    cases = [
        (write("empty.txt", b""), ["empty.txt", "empty"]),
        (write("binary.txt", bytes(range(256)) * 8), ["binary.txt", "not text"]),
        (write("short.txt", "hello"), ["short.txt", "fewer than one training window"]),
        (write("split.txt", "y" * 50), ["split.txt", "too few to split"]),
        (path("missing.txt"), ["missing.txt"]),
    ]
    for f, want in cases:
        fails(run(["train", model, "--text", f, "--epochs", "1", "--device", DEVICE]), 1, want)
    fails(run(["train", model, "--epochs", "1", "--device", DEVICE]), 1, ["--text FILE"])
    fails(run(["train", model, "--text", corpus(), "--data", DATA, "--device", DEVICE]), 1, ["--data", "tokens"])
    fails(run(["train", os.path.join(ROOT, "models", "seed_cnn.net"), "--text", write("big.txt", big), "--device",
               DEVICE]), 1, ["--text", "reads images"])
    bad = write("bad_heads.net", "input tokens 16 256\nembed 16\nattention 3 causal\ndense 256\n")
    for cmd in (["summary", bad], ["train", bad, "--text", corpus(), "--device", DEVICE]):
        fails(run(cmd), 1, ["bad_heads.net:3", "3 heads do not divide the width 16"])


@test
def test_bad_generate_input():
    if "ckpt" not in state:
        raise Skip("needs the language model trained by train_text_eval_generate")
    ck = state["ckpt"]
    fails(run(["generate", ck, "--prompt", "a", "--slide", "17", "--device", DEVICE]), 1,
          ["--slide 17", "context of 16 bytes"])
    fails(run(["generate", ck, "--prompt", "a", "--no-cache", "--cache-type", "bf16"]), 2, ["--cache-type", "--no-cache"])
    fails(run(["generate", ck, "--prompt", "a", "--cache-type", "int4"]), 2, ["--cache-type"])
    fails(run(["generate", ck, "--prompt", "", "--device", DEVICE]), 2, ["--prompt", "empty"])
    fails(run(["generate", ck, "--device", DEVICE]), 2, ["--prompt"])
    fails(run(["generate", ck, "--prompt", "a", "--tokens", "0"]), 2, ["--tokens"])
    fails(run(["generate", ck, "--prompt", "a", "--temperature", "-1"]), 2, ["--temperature"])
    fails(run(["generate", path("none.ckpt"), "--prompt", "a", "--device", DEVICE]), 1, ["none.ckpt"])
    fails(run(["predict", ck, write("img.pgm", b"P5\n28 28\n255\n" + bytes(784)), "--device", DEVICE]), 1,
          ["language model", "generate"])
    # a CNN's checkpoint: trained for two steps here
    need_data()
    cnn = write("cnn.net", "input 28 28 1\nflatten\ndense 10\n")
    cnn_ck = path("cnn.ckpt")
    ok(run(["train", cnn, "--data", DATA, "--limit", "64", "--steps", "2", "--device", DEVICE, "--save", cnn_ck, "-q"]))
    fails(run(["generate", cnn_ck, "--prompt", "And", "--device", DEVICE]), 1,
          ["cnn.ckpt holds an image model (input 28x28x1), not a language model"])


@test
def test_shipped_models_train_a_step():
    need_data()
    r = run(["train", os.path.join(ROOT, "models", "vit_fashion.net"), "--data", DATA, "--limit", "64", "--batch", "32",
             "--steps", "2", "--device", DEVICE])
    ok(r)
    check("stopped after 2 steps" in r.out, "two ViT steps", r)
    r = run(["train", os.path.join(ROOT, "models", "char_gpt.net"), "--text", corpus(), "--limit", "2", "--batch", "2",
             "--steps", "1", "--device", DEVICE])
    ok(r)
    check("stopped after 1 steps" in r.out and re.search(r"val_bpb [0-9.]+", r.out), "one char_gpt step", r)


@test
def test_old_checkpoint_loads():
    need_data()
    r = run(["eval", OLD_CKPT, "--data", DATA, "--limit", "256", "--device", "omp"])
    ok(r)
    m = re.search(r"loss ([0-9.]+) - accuracy ([0-9.]+)", r.out)
    check(m is not None and (m.group(1), m.group(2)) == OLD_EVAL,
          "the old checkpoint evaluates as it did when written: %s" % (OLD_EVAL,), r)
    ck = path("old_resumed.ckpt")
    write("old_resumed.ckpt", open(OLD_CKPT, "rb").read())
    r = run(["train", "-", "--resume", ck, "--data", DATA, "--limit", "256", "--epochs", "2", "--device", "omp",
             "--save", ck])
    ok(r)
    check("resumed: 1 epochs done" in r.out, "it resumes", r)


if __name__ == "__main__":
    sys.exit(main())
