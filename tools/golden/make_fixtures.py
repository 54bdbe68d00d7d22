#!/usr/bin/python3
"""Writes the golden fixtures of the transformer ops into tests/fixtures/*.bin.

Run with Debian's PyTorch (python3-torch): /usr/bin/python3 tools/golden/make_fixtures.py
(any PyTorch works; `--layers` writes only the fixtures of issue 16's layers, from a generator
of their own, so the older fixtures stay byte for byte what they were).
The fixtures are committed; tests/engine/test_golden.c replays them on every device without
Python. Rerun only when a fixture is added or changed (the output is deterministic: inputs
come from a fixed-seed torch.Generator).

Precision: inputs are generated as float32 and stored as float32; PyTorch then computes in
float64 from exactly those values, and the expected outputs and gradients are rounded to
float32 when stored. So the fixture is the float32 rounding of the exact answer for the
stored inputs, independent of any float32 summation order.

Each fixture holds the inputs, `out` = f(inputs), a fixed random tensor `R` and, for every
float input `name`, `grad:name` = d sum(out * R) / d name (R makes every output element
matter). Parameters are one-element tensors named `param:<name>`.

File format (little-endian):
    magic   8 bytes  b"CNFIXT01"
    count   u32      number of records
    record  u16 name length, name (ASCII), u8 dtype (0 = f32, 1 = i32), u8 ndim,
            u32 dims[ndim], numel * 4 bytes of data (row-major)
"""
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures")
gen = torch.Generator().manual_seed(20240611)


def uniform(shape, lo=-1.0, hi=1.0):
    """float32 values (what the C test feeds), returned as float64 for the computation."""
    x = torch.rand(shape, generator=gen, dtype=torch.float32) * (hi - lo) + lo
    return x.to(torch.float64)


def write(name, inputs, params, fn, extra=()):
    """inputs: ordered dict name -> tensor (float64 = float input, int64 = i32 ids).
    extra: more (name, tensor) records, or a function giving them after fn has run, e.g.
    "const:running" (a constant the C test feeds without a gradient) or "expect:running" (a
    state fn updated)."""
    leaves = {}
    for k, v in inputs.items():
        leaves[k] = v.clone().requires_grad_(True) if v.dtype == torch.float64 else v
    out = fn(**leaves)
    r = uniform(tuple(out.shape), -0.5, 0.5)
    (out * r).sum().backward()
    records = [(k, v) for k, v in inputs.items()]
    records += [("param:" + k, torch.tensor([v], dtype=torch.float64)) for k, v in params.items()]
    records += [("out", out.detach()), ("R", r)]
    records += [("grad:" + k, leaves[k].grad) for k, v in inputs.items() if v.dtype == torch.float64]
    records += list(extra() if callable(extra) else extra)
    path = os.path.join(OUT_DIR, name + ".bin")
    with open(path, "wb") as f:
        f.write(b"CNFIXT01")
        f.write(struct.pack("<I", len(records)))
        for k, v in records:
            is_int = v.dtype in (torch.int64, torch.int32)
            data = v.detach().contiguous().reshape(-1)
            f.write(struct.pack("<H", len(k)) + k.encode("ascii"))
            f.write(struct.pack("<BB", 1 if is_int else 0, max(v.dim(), 1)))
            dims = list(v.shape) or [1]
            f.write(struct.pack("<%dI" % len(dims), *dims))
            if is_int:
                f.write(struct.pack("<%di" % data.numel(), *data.tolist()))
            else:
                f.write(data.to(torch.float32).numpy().astype("<f4").tobytes())
    print("wrote", os.path.relpath(path), "(%d records)" % len(records))


def heads(t, b, s, h, dk):
    """[B*S, C] -> [B*H, S, dk] (the C test: reshape, transpose {0,2,1,3}, reshape)."""
    return t.reshape(b, s, h, dk).permute(0, 2, 1, 3).reshape(b * h, s, dk)


def attention(q, k, v, causal, scale):
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:
        t, n = s.shape[-2], s.shape[-1]
        mask = torch.ones(t, n, dtype=torch.bool).triu(1)  # j > i
        s = s.masked_fill(mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    eps = 1e-5

    write("layer_norm", {"x": uniform((2, 3, 8), -2, 2), "gamma": uniform((8,), 0.5, 1.5),
                         "beta": uniform((8,), -0.5, 0.5)}, {"eps": eps},
          lambda x, gamma, beta: F.layer_norm(x, (8,), gamma, beta, eps))

    ids = torch.tensor([[0, 3, 3, 5], [1, 0, 5, 5]], dtype=torch.int64)  # repeats: scatter-add
    write("embedding", {"table": uniform((6, 5)), "ids": ids}, {}, lambda table, ids: F.embedding(ids, table))

    write("gelu_erf", {"x": uniform((3, 7), -5, 5)}, {}, lambda x: F.gelu(x))  # nn.GELU() default
    write("gelu_tanh", {"x": uniform((3, 7), -5, 5)}, {}, lambda x: F.gelu(x, approximate="tanh"))

    write("sum_last", {"x": uniform((2, 3, 6))}, {}, lambda x: x.sum(-1))
    write("mean_last", {"x": uniform((2, 3, 6))}, {}, lambda x: x.mean(-1))
    write("max_last", {"x": uniform((2, 3, 6))}, {}, lambda x: x.max(-1).values)

    write("causal_softmax", {"x": uniform((2, 5, 5), -3, 3)}, {},
          lambda x: torch.softmax(x.masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf")), -1))

    d = 8
    for causal, s in ((1, 6), (0, 9)):
        write("attention_causal" if causal else "attention_full",
              {"q": uniform((4, 6, d), -2, 2), "k": uniform((4, s, d), -2, 2), "v": uniform((4, s, d))},
              {"scale": 1 / math.sqrt(d), "causal": causal},
              lambda q, k, v: attention(q, k, v, causal, 1 / math.sqrt(d)))

    # One pre-norm transformer block: x -> LN -> MHA (causal) -> +x -> LN -> MLP(GELU) -> +.
    B, T, C, H, M = 2, 6, 16, 2, 32
    dk = C // H

    def block(x, ln1_g, ln1_b, wq, bq, wk, bk, wv, bv, wo, bo, ln2_g, ln2_b, w1, b1, w2, b2):
        x2 = x.reshape(B * T, C)
        h = F.layer_norm(x2, (C,), ln1_g, ln1_b, eps)
        q, k, v = (heads(h @ w + b, B, T, H, dk) for w, b in ((wq, bq), (wk, bk), (wv, bv)))
        a = attention(q, k, v, True, 1 / math.sqrt(dk))
        a = a.reshape(B, H, T, dk).permute(0, 2, 1, 3).reshape(B * T, C)
        x1 = x2 + a @ wo + bo
        h2 = F.layer_norm(x1, (C,), ln2_g, ln2_b, eps)
        y = x1 + F.gelu(h2 @ w1 + b1) @ w2 + b2
        return y.reshape(B, T, C)

    w = 1 / math.sqrt(C)
    inputs = {"x": uniform((B, T, C))}
    inputs.update({"ln1_g": uniform((C,), 0.8, 1.2), "ln1_b": uniform((C,), -0.1, 0.1)})
    for n in ("q", "k", "v", "o"):
        inputs["w" + n] = uniform((C, C), -w, w)
        inputs["b" + n] = uniform((C,), -0.1, 0.1)
    inputs.update({"ln2_g": uniform((C,), 0.8, 1.2), "ln2_b": uniform((C,), -0.1, 0.1)})
    inputs.update({"w1": uniform((C, M), -w, w), "b1": uniform((M,), -0.1, 0.1),
                   "w2": uniform((M, C), -1 / math.sqrt(M), 1 / math.sqrt(M)), "b2": uniform((C,), -0.1, 0.1)})
    write("transformer_block", inputs, {"eps": eps, "heads": H}, block)
    return 0


def nchw(t):
    return t.permute(0, 3, 1, 2)


def nhwc(t):
    return t.permute(0, 2, 3, 1)


def conv(x, w, b, stride, pads, dilation, groups):
    """clnet's cn_op_conv2d_ex: x NHWC, w [KH,KW,Cin/G,Cout], pads (top, bottom, left, right)."""
    xp = F.pad(nchw(x), (pads[2], pads[3], pads[0], pads[1]))
    return nhwc(F.conv2d(xp, w.permute(3, 2, 0, 1), b, stride, 0, dilation, groups))


def conv_t(x, w, b, stride, pad, out_pad, dilation, groups):
    """clnet's cn_op_conv2d_transpose: x NHWC, w [Cin,KH,KW,Cout/G]."""
    return nhwc(F.conv_transpose2d(nchw(x), w.permute(0, 3, 1, 2), b, stride, pad, out_pad, groups, dilation))


def layers_main():
    """Issue 16's layers, replayed through the public builders by tests/engine/test_golden.c."""
    global gen
    gen = torch.Generator().manual_seed(20261125)
    os.makedirs(OUT_DIR, exist_ok=True)
    write("conv_grouped", {"x": uniform((2, 7, 6, 6)), "w": uniform((3, 3, 2, 9), -0.5, 0.5),
                           "b": uniform((9,), -0.5, 0.5)},
          {"groups": 3, "stride_h": 2, "stride_w": 1, "pad_top": 1, "pad_bottom": 0, "pad_left": 2, "pad_right": 1,
           "dilation_h": 1, "dilation_w": 2},
          lambda x, w, b: conv(x, w, b, (2, 1), (1, 0, 2, 1), (1, 2), 3))
    write("conv_depthwise", {"x": uniform((2, 6, 6, 4)), "w": uniform((3, 3, 1, 4), -0.5, 0.5),
                             "b": uniform((4,), -0.5, 0.5)},
          {"groups": 4, "stride_h": 1, "stride_w": 2, "pad_top": 2, "pad_bottom": 2, "pad_left": 1, "pad_right": 2,
           "dilation_h": 2, "dilation_w": 1},
          lambda x, w, b: conv(x, w, b, (1, 2), (2, 2, 1, 2), (2, 1), 4))
    write("conv_transpose_grouped", {"x": uniform((2, 4, 5, 6)), "w": uniform((6, 3, 3, 2), -0.5, 0.5),
                                     "b": uniform((4,), -0.5, 0.5)},
          {"groups": 2, "stride_h": 2, "stride_w": 2, "pad": 1, "out_pad": 1, "dilation": 1},
          lambda x, w, b: conv_t(x, w, b, 2, 1, 1, 1, 2))
    write("conv_transpose_dilated", {"x": uniform((1, 3, 4, 3)), "w": uniform((3, 2, 2, 5), -0.5, 0.5),
                                     "b": uniform((5,), -0.5, 0.5)},
          {"groups": 1, "stride_h": 1, "stride_w": 1, "pad": 0, "out_pad": 0, "dilation": 2},
          lambda x, w, b: conv_t(x, w, b, 1, 0, 0, 2, 1))
    write("upsample_nearest", {"x": uniform((1, 3, 4, 2))}, {"scale_h": 2, "scale_w": 3},
          lambda x: nhwc(F.interpolate(nchw(x), scale_factor=(2, 3), mode="nearest")))
    write("upsample_bilinear", {"x": uniform((2, 3, 4, 3))}, {"scale_h": 2, "scale_w": 3},
          lambda x: nhwc(F.interpolate(nchw(x), scale_factor=(2, 3), mode="bilinear", align_corners=False)))

    def layout(a, b):
        y1 = nhwc(F.pad(nchw(a), (2, 1, 0, 0), mode="reflect"))             # W axis, reflect
        y2 = nhwc(F.pad(nchw(b), (1, 2, 0, 0), mode="constant", value=0.5))  # W axis, constant
        return torch.cat([y1, y2], dim=3)[:, 1:4]                           # channels; then H [1, 4)
    write("concat_pad_slice", {"a": uniform((2, 4, 5, 3)), "b": uniform((2, 4, 5, 2))}, {}, layout)
    return 0


if __name__ == "__main__":
    sys.exit(layers_main() if "--layers" in sys.argv[1:] else main())
