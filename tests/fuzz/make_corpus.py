#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/seed-*) from real
files, small enough to commit: the first items of Fashion-MNIST (raw and gzip IDX, PGM
images, a dataset directory), checkpoints that `clnet train` writes on that data, the
repository's model files, and the start of the King James Bible text corpus.

Usage: tests/fuzz/make_corpus.py PATH/TO/clnet [FASHION_MNIST_DIR] [KJV_TXT]

Run it again only when a format changes; regression inputs (files not named seed-*) are left
alone. stdlib only.
"""
import gzip
import os
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLNET = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
DATA = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"
KJV = sys.argv[3] if len(sys.argv) > 3 else os.path.join(
    os.environ.get("CLNET_DATA_DIR") or os.path.join(os.environ.get("XDG_DATA_HOME") or
                                                     os.path.expanduser("~/.local/share"), "clnet"), "kjv.txt")


def idx(path, n):
    """The first n items of an IDX file, with the header's count rewritten to n."""
    with gzip.open(path) as f:
        head = f.read(4)
        ndim = head[3]
        dims = list(struct.unpack(">%dI" % ndim, f.read(4 * ndim)))
        per = 1
        for d in dims[1:]:
            per *= d
        body = f.read(n * per)
    return head + struct.pack(">%dI" % ndim, n, *dims[1:]) + body, dims[1:]


def checkpoint(model_text, tensors=(), optimizer=0):
    """A valid checkpoint (docs/CHECKPOINT.md): tensors are (name, dtype, dims, raw bytes),
    dtype 0 f32, 1 i32, 2 f16."""
    text = model_text.encode()
    b = b"CLNETCKP" + struct.pack("<IIiQQI", 1, optimizer, 1, 10, 42, len(text)) + text + struct.pack("<I", len(tensors))
    for name, dtype, dims, raw in tensors:
        b += struct.pack("<I", len(name)) + name.encode() + struct.pack("<II", dtype, len(dims))
        b += b"".join(struct.pack("<q", d) for d in dims) + struct.pack("<Q", len(raw)) + raw
    return b + struct.pack("<I", zlib.crc32(b) & 0xFFFFFFFF)


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def main():
    if not CLNET or not os.access(CLNET, os.X_OK):
        print(__doc__)
        return 2
    for t in ("idx", "pgm", "ckpt", "ckpt_model", "model", "dataset", "text"):
        d = os.path.join(HERE, "corpus", t)
        for f in os.listdir(d) if os.path.isdir(d) else ():
            if f.startswith("seed-"):
                os.remove(os.path.join(d, f))

    images, (h, w) = idx(os.path.join(DATA, "t10k-images-idx3-ubyte.gz"), 2)
    labels, _ = idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz"), 16)
    put("idx", "images-2", images)
    put("idx", "images-2.gz", gzip.compress(images, 9, mtime=0))
    put("idx", "labels-16", labels)
    put("idx", "labels-16.gz", gzip.compress(labels, 9, mtime=0))
    first = images[16:16 + h * w]
    put("pgm", "p5", b"P5\n# Fashion-MNIST t10k item 0\n%d %d\n255\n" % (w, h) + first)
    put("pgm", "p2", b"P2\n%d %d\n255\n" % (w, h) + b"\n".join(
        b" ".join(b"%d" % v for v in first[r * w:(r + 1) * w]) for r in range(h)) + b"\n")
    put("pgm", "p5-16bit", b"P5 %d %d 65535\n" % (w, h) + b"".join(struct.pack(">H", v * 257) for v in first))
    # a dataset directory: a u32 length, the images file, the labels file (fuzz_dataset.c)
    two_labels, _ = idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz"), 2)
    put("dataset", "t10k-2", struct.pack("<I", len(images)) + images + two_labels)
    gz_images = gzip.compress(images, 9, mtime=0)
    put("dataset", "t10k-2.gz", struct.pack("<I", len(gz_images)) + gz_images + gzip.compress(two_labels, 9, mtime=0))

    models = {name: open(os.path.join(ROOT, "models", name + ".net"), "rb").read()
              for name in ("seed_cnn", "vit_fashion", "char_gpt", "resnet_fashion", "mobilenet_fashion",
                           "unet_denoise")}
    models["readme"] = (b"input 28 28 1            # H W C\nconv2d 32 3 relu stride=1 pad=same\nmaxpool2d 2\n"
                        b"avgpool2d 2 1\nflatten\ndense 64 relu\ndropout 0.5\ndense 10 softmax\n")
    # issue 16's graphs: named outputs, from/concat/add, grouped and transposed convolution
    for name in ("unet_small", "inception_small", "densenet_small"):
        models[name] = open(os.path.join(ROOT, "tests", "fixtures", "models", name + ".net"), "rb").read()
    # issue 16's layers and options (tests/engine/test_model_layers.c trains this one)
    models["layers16"] = (b"input 8 8 3\nconv2d 8 3 pad=1\nbatch_norm\nrelu6\nmaxpool2d 3 2 pad=1 ceil_mode=1\n"
                          b"conv2d 8 3 stride=2 pad=1\nbatch_norm momentum=0.2 eps=0.001\nhard_swish\n"
                          b"avgpool2d 2 1 count_include_pad=0\nglobal_avgpool\ndense 16\nbatch_norm\nsilu\n"
                          b"dense 4 leaky_relu\ndense 3 softplus\n")
    models["layers16_more"] = (b"input 9 9 2\nconv2d 4 3 elu\nglobal_maxpool\ndense 5 hard_sigmoid\nbatch_norm\n"
                               b"dense 2 tanh\n")
    for name, text in models.items():
        put("model", name, text)

    # Checkpoints clnet writes: a small model trained on a few real images, each optimizer.
    with tempfile.TemporaryDirectory() as tmp:
        net = os.path.join(tmp, "small.net")
        with open(net, "w") as f:
            f.write("input 28 28 1\nmaxpool2d 7\nflatten\ndense 10\n")
        for opt in ("adam", "sgd"):
            ck = os.path.join(tmp, opt + ".ckpt")
            subprocess.run([CLNET, "train", net, "--data", DATA, "--limit", "64", "--epochs", "1", "--device", "omp",
                            "--optimizer", opt, "--save", ck, "-q"], check=True)
            data = open(ck, "rb").read()
            put("ckpt", opt, data)
            put("ckpt_model", opt, data)
        # a denoiser's (a model that ends in an image, trained with --noise: an image program)
        with open(net, "w") as f:
            f.write("input 28 28 1 -> noisy\nconv2d 2 3 relu pad=same\nconv2d 1 3 pad=same\nadd noisy\n")
        ck = os.path.join(tmp, "denoiser.ckpt")
        subprocess.run([CLNET, "train", net, "--noise", "0.3", "--data", DATA, "--limit", "16", "--epochs", "1",
                        "--device", "omp", "--save", ck, "-q"], check=True)
        data = open(ck, "rb").read()
        put("ckpt", "denoiser", data)
        put("ckpt_model", "denoiser", data)

    # every dtype and rank the container allows, and the example of docs/CHECKPOINT.md
    dtypes = checkpoint("input 2 3 1\nflatten\ndense 3\n",
                        [("dense.weight", 0, [2, 3], struct.pack("<6f", 1, 2, 3, 4, 5, 6)),
                         ("step", 1, [2], struct.pack("<2i", 7, -7)), ("h", 2, [], struct.pack("<H", 0x3c00)),
                         ("empty", 0, [0, 4], b"")], optimizer=1)
    example = checkpoint("dense 2\n", [("b", 0, [2], struct.pack("<2f", 1.0, -2.0))])
    for target in ("ckpt", "ckpt_model"):
        put(target, "dtypes", dtypes)
        put(target, "example", example)

    if os.path.exists(KJV):
        put("text", "kjv", open(KJV, "rb").read(2048))
    put("text", "readme", open(os.path.join(ROOT, "README.md"), "rb").read(2048))
    print("wrote the seed corpora under", os.path.join(HERE, "corpus"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
