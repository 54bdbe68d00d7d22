"""PyTorch twins of clnet's transformer models, with weights moved in and out by clnet's names.

Used by tools/golden/vit_losses.py (the ViT loss fixture) and tools/bench/compare_transformers
(speed beside PyTorch). The modules compute what clnet's layers compute (README, "Model
files"; docs/LAYOUT.md):

- patch_embed P D: a conv of kernel = stride = P, its output [B, D, H/P, W/P] read as tokens in
  row-major patch order, plus a learned position per patch;
- embed D: token table [V, D] plus a learned position per position;
- transformer H M [causal]: x + attention(layer_norm(x)), then
  x + dense_D(gelu(dense_M(layer_norm(x)))), attention with separate query, key, value and out
  projections and scale 1/sqrt(D/H);
- layer_norm (eps 1e-5), mean_tokens (the mean over tokens), dense.

clnet stores a dense weight as [in, out] (y = x W) and a conv kernel as [KH, KW, Cin, Cout];
nn.Linear holds [out, in] and nn.Conv2d [Cout, Cin, KH, KW]: `clnet_params` says how each
tensor maps.
"""
import gzip
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


DATA = os.environ.get("CLNET_TEST_DATA", "/usr/share/datasets/fashion-mnist")


def fashion_mnist(name):
    """The bytes of one Fashion-MNIST IDX file (gzip or raw), as clnet's reader finds it."""
    for path, opener in ((os.path.join(DATA, name + ".gz"), gzip.open), (os.path.join(DATA, name), open)):
        if os.path.exists(path):
            with opener(path, "rb") as f:
                return f.read()
    sys.exit("%s not found in %s (set CLNET_TEST_DATA)" % (name, DATA))


# "manual" writes attention out (softmax(QK^T / sqrt(d)) V, clnet's unfused reference and what
# the golden fixtures were made with); "sdpa" calls F.scaled_dot_product_attention, PyTorch's
# fused kernels (torch >= 2.0), which nn.MultiheadAttention uses and a user writes today.
ATTENTION = "manual"


class Attention(nn.Module):
    def __init__(self, width, heads, causal):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.query, self.key, self.value, self.out = (nn.Linear(width, width) for _ in range(4))

    def forward(self, x):
        b, t, d = x.shape
        h, dh = self.heads, d // self.heads

        def split(y):
            return y.reshape(b, t, h, dh).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if ATTENTION == "sdpa":
            a = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
            return self.out(a.transpose(1, 2).reshape(b, t, d))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
        if self.causal:
            s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        a = torch.softmax(s, dim=-1) @ v
        return self.out(a.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    """The pre-norm transformer block (two residual blocks)."""

    def __init__(self, width, heads, mlp, causal):
        super().__init__()
        self.norm1, self.attention = nn.LayerNorm(width), Attention(width, heads, causal)
        self.norm2, self.fc1, self.fc2 = nn.LayerNorm(width), nn.Linear(width, mlp), nn.Linear(mlp, width)

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    """models/vit_fashion.net: images NHWC [B, H, W, C] in, logits out."""

    def __init__(self, image=28, channels=1, patch=4, width=64, heads=4, blocks=2, mlp=128, classes=10):
        super().__init__()
        self.tokens = (image // patch) ** 2
        self.patch = nn.Conv2d(channels, width, patch, stride=patch)
        self.position = nn.Parameter(torch.zeros(self.tokens, width))
        self.blocks = nn.ModuleList(Block(width, heads, mlp, False) for _ in range(blocks))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, classes)

    def forward(self, x):
        x = self.patch(x.permute(0, 3, 1, 2)).flatten(2).transpose(1, 2) + self.position
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x).mean(1))


class CharGPT(nn.Module):
    """models/char_gpt.net: token ids [B, T] in, logits [B, T, V] out."""

    def __init__(self, context=128, vocab=256, width=128, heads=4, blocks=4, mlp=512):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(context, width))
        self.blocks = nn.ModuleList(Block(width, heads, mlp, True) for _ in range(blocks))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)

    def forward(self, ids):
        x = self.embed(ids) + self.position
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


def _linear(names, counts, kind, lin):
    counts[kind] = counts.get(kind, 0) + 1
    names.append(("%s_%d.weight" % (kind, counts[kind]), lin.weight, "t"))
    names.append(("%s_%d.bias" % (kind, counts[kind]), lin.bias, ""))


def _norm(names, counts, ln):
    counts["layer_norm"] = counts.get("layer_norm", 0) + 1
    names.append(("layer_norm_%d.weight" % counts["layer_norm"], ln.weight, ""))
    names.append(("layer_norm_%d.bias" % counts["layer_norm"], ln.bias, ""))


def _blocks(names, counts, blocks):
    for i, b in enumerate(blocks, 1):
        _norm(names, counts, b.norm1)
        for p in ("query", "key", "value", "out"):
            lin = getattr(b.attention, p)
            names.append(("attention_%d.%s.weight" % (i, p), lin.weight, "t"))
            names.append(("attention_%d.%s.bias" % (i, p), lin.bias, ""))
        _norm(names, counts, b.norm2)
        _linear(names, counts, "dense", b.fc1)
        _linear(names, counts, "dense", b.fc2)


def clnet_params(model):
    """[(clnet name, torch parameter, how)] in clnet's order; how: "" same layout, "t" transpose
    ([out, in] <-> [in, out]), "conv" ([Cout, Cin, KH, KW] <-> [KH, KW, Cin, Cout])."""
    names, counts = [], {}
    if isinstance(model, ViT):
        names += [("patch_embed_1.weight", model.patch.weight, "conv"), ("patch_embed_1.bias", model.patch.bias, ""),
                  ("patch_embed_1.position", model.position, "")]
    else:
        names += [("embed_1.weight", model.embed.weight, ""), ("embed_1.position", model.position, "")]
    _blocks(names, counts, model.blocks)
    _norm(names, counts, model.norm)
    _linear(names, counts, "dense", model.head)
    return names


def to_torch(value, how):
    """A clnet-layout tensor in the layout of its torch parameter."""
    if how == "t":
        return value.t()
    if how == "conv":
        return value.permute(3, 2, 0, 1)
    return value


def clnet_shape(param, how):
    s = list(param.shape)
    if how == "t":
        return [s[1], s[0]]
    if how == "conv":
        return [s[2], s[3], s[1], s[0]]
    return s
