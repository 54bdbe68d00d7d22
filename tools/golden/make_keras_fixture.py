#!/usr/bin/env python3
"""Writes tests/fixtures/onnx/keras_cnn: the course's Keras CNN (the seed CNN of
models/seed_cnn.net: Conv32-pool-Conv64-pool-Conv64-Dense64-Dense10, ReLU) built in Keras with
seeded weights and exported once by tf2onnx, with test_data_set_0/{input,output}_0.pb: a batch
of 3 Fashion-MNIST test images (NHWC, as Keras takes them) and Keras' outputs for them.
tests/onnx/test_onnx_nodes --fixtures replays it on every device (within 1e-4).

Run with the venv of tools/golden/tf_venv.sh (PyPI tensorflow-cpu and tf2onnx at pinned
versions, which the fixture's README.txt records):
    $(tools/golden/tf_venv.sh) tools/golden/make_keras_fixture.py
"""
import gzip
import os
import sys

import numpy as np
import onnx
import tensorflow as tf
import tf2onnx
from onnx import numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "onnx", "keras_cnn")
DATA = "/usr/share/datasets/fashion-mnist"


def images(n):
    with gzip.open(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")) as f:
        img = np.frombuffer(f.read(), np.uint8, offset=16)[: n * 784]
    return (img.reshape(n, 28, 28, 1) / 255.0).astype(np.float32)


def main():
    tf.keras.utils.set_random_seed(3)
    L = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input((28, 28, 1), name="images"),
        L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(2),
        L.Conv2D(64, 3, activation="relu"), L.MaxPooling2D(2),
        L.Conv2D(64, 3, activation="relu"),
        L.Flatten(), L.Dense(64, activation="relu"), L.Dense(10),
    ])
    # biases of their own (Keras starts them at 0, which would leave their import untested)
    for layer in model.layers:
        if getattr(layer, "bias", None) is not None:
            layer.bias.assign(np.random.default_rng(len(layer.name)).normal(0, 0.05, layer.bias.shape).astype(np.float32))
    os.makedirs(os.path.join(OUT, "test_data_set_0"), exist_ok=True)
    path = os.path.join(OUT, "model.onnx")
    spec = (tf.TensorSpec((None, 28, 28, 1), tf.float32, name="images"),)
    fn = tf.function(lambda x: model(x, training=False))
    proto, _ = tf2onnx.convert.from_function(fn, input_signature=spec, opset=13, output_path=path)
    onnx.checker.check_model(onnx.load(path))
    x = images(3)
    y = model(x, training=False).numpy()
    for kind, t in (("input", x), ("output", y)):
        with open(os.path.join(OUT, "test_data_set_0", kind + "_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t).SerializeToString())
    with open(os.path.join(OUT, "README.txt"), "w") as f:
        f.write("Made by tools/golden/make_keras_fixture.py with tensorflow %s, keras %s, tf2onnx %s, onnx %s "
                "(python %s)\n" % (tf.__version__, tf.keras.__version__ if hasattr(tf.keras, "__version__") else "?",
                                   tf2onnx.__version__, onnx.__version__, sys.version.split()[0]))
    print(path, os.path.getsize(path), "bytes;", [n.op_type for n in proto.graph.node])


main()
