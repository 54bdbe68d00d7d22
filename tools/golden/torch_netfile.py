"""A clnet model file (README, "Model files") as a PyTorch module, with clnet's parameter names.

Used by tools/golden/cnn_losses.py (the ResNet and MobileNet equivalence fixtures) and
tools/bench/torch_layers.py (their speed beside PyTorch). It reads the image layers of the
grammar (engine/layers/model_parse.c is the reference; this follows it line for line where it
matters):

- conv2d F K [act] [stride=S|SH,SW] [pad=P|T,B,L,R|same|valid] [groups=G] [dilation=D|DH,DW],
  conv2d_transpose F K [act] [stride=..] [pad=..] [out_pad=..] [groups=G] [dilation=..],
  dense U [act], batch_norm [momentum=M] [eps=X], the activations (alone or as a layer's),
  maxpool2d/avgpool2d SIZE [STRIDE] [pad=P] [ceil_mode=0|1] [count_include_pad=0|1],
  global_avgpool, global_maxpool, flatten, dropout R, upsample F [nearest|bilinear],
  pad P|T,B,L,R [reflect|value=V], residual ... end, repeat N ... end, "-> NAME", from, concat,
  add, mul (the named image scaled per channel by the current vector, or an elementwise
  product);
- layers are named by kind and count in model order, repeats written out ("conv2d_3",
  "batch_norm_2"), their parameters "<layer>.weight", ".bias" and, for batch norm, the
  running statistics "<layer>.running" [2, C] (means, then variances);
- clnet computes in NHWC and this module in NCHW; a flatten reads the channels last, as clnet's
  does, so dense weights keep clnet's row order.

Weights move by `clnet_params`: (name, tensor, how) with how "" (same layout), "t" (a dense
weight: clnet [in, out], nn.Linear [out, in]), "conv" (clnet [K, K, Cin/G, F], nn.Conv2d
[F, Cin/G, K, K]) or "convt" (clnet [Cin, K, K, F/G], nn.ConvTranspose2d [Cin, F/G, K, K]).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

ACTS = {
    "relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "gelu": F.gelu,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.01), "elu": lambda x: F.elu(x, 1.0), "relu6": F.relu6, "silu": F.silu,
    "hard_sigmoid": F.hardsigmoid, "hard_swish": F.hardswish, "softplus": F.softplus,
    "softmax": lambda x: torch.softmax(x, dim=1), "linear": lambda x: x, "none": lambda x: x,
}


def _ints(text):
    return [int(v) for v in text.split(",")]


def _expand(lines):
    """[(lineno, words, label)] with repeats written out (their 'repeat' and 'end' lines dropped;
    a residual keeps its 'residual' and 'end')."""

    def block(i, depth):
        """The lines from i to the 'end' closing this block: (body, index of that 'end')."""
        body = []
        while i < len(lines):
            no, words, _ = lines[i]
            if words[0] in ("repeat", "residual"):
                inner, end = block(i + 1, depth + 1)
                body += inner * int(words[1]) if words[0] == "repeat" else [lines[i]] + inner + [lines[end]]
                i = end + 1
            elif words[0] == "end":
                if depth == 0:
                    raise ValueError("line %d: 'end' without a block" % no)
                return body, i
            else:
                body.append(lines[i])
                i += 1
        if depth:
            raise ValueError("a block is never closed")
        return body, i

    return block(0, 0)[0]


def read_lines(text):
    lines = []
    for no, raw in enumerate(text.splitlines(), 1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        label = None
        if len(words) >= 2 and words[-2] == "->":
            label, words = words[-1], words[:-2]
        lines.append((no, words, label))
    return lines


class NetFile(nn.Module):
    """The network of a model file; forward takes images NHWC [B, H, W, C] and returns the logits
    (the output before a final softmax). Dropout is left out when skip_dropout (its masks cannot
    be clnet's)."""

    def __init__(self, text, skip_dropout=False):
        super().__init__()
        lines = _expand(read_lines(text))
        no, words, label = lines[0]
        if words[0] != "input" or len(words) != 4:
            raise ValueError("line %d: an image model starts with 'input H W C'" % no)
        h, w, c = (int(v) for v in words[1:])
        self.input_label = label
        self.mods = nn.ModuleList()
        self.steps = []   # (kind, module index or None, options, label)
        self.names = []   # (clnet name, tensor, how)
        counts = {}
        shape = ("image", c, h, w)  # ("image", C, H, W) or ("flat", N)
        labels = {label: shape} if label else {}
        block = []
        for no, words, label in lines[1:]:
            k = words[0]
            kind = "activation" if k in ACTS else k
            counts[kind] = counts.get(kind, 0) + 1
            name = "%s_%d" % (kind, counts[kind])
            opts = {}
            if k in ("conv2d", "conv2d_transpose"):
                shape = self._conv(k, name, words, shape, opts)
            elif k == "dense":
                lin = nn.Linear(shape[1], int(words[1]))
                opts["act"] = words[2] if len(words) > 2 else "none"
                opts["m"] = self._add(lin, name, [("weight", lin.weight, "t"), ("bias", lin.bias, "")])
                shape = ("flat", int(words[1]))
            elif k == "batch_norm":
                o = dict(w.split("=", 1) for w in words[1:])
                ch = shape[1]
                bn = (nn.BatchNorm2d if shape[0] == "image" else nn.BatchNorm1d)(
                    ch, eps=float(o.get("eps", 1e-5)), momentum=float(o.get("momentum", 0.1)))
                opts["m"] = self._add(bn, name, [("weight", bn.weight, ""), ("bias", bn.bias, "")])
                self.names.append((name + ".running", bn, "running"))
            elif k in ("maxpool2d", "avgpool2d"):
                size, rest = int(words[1]), words[2:]
                stride = size
                if rest and "=" not in rest[0]:
                    stride, rest = int(rest[0]), rest[1:]
                o = {a: int(b) for a, b in (w.split("=", 1) for w in rest)}
                opts.update(size=size, stride=stride, pad=o.get("pad", 0), ceil=bool(o.get("ceil_mode", 0)),
                            include=bool(o.get("count_include_pad", 1)))
                oh = self._pool_out(shape[2], size, stride, opts["pad"], opts["ceil"])
                ow = self._pool_out(shape[3], size, stride, opts["pad"], opts["ceil"])
                shape = ("image", shape[1], oh, ow)
            elif k in ("global_avgpool", "global_maxpool"):
                shape = ("flat", shape[1])
            elif k == "flatten":
                shape = ("flat", shape[1] * shape[2] * shape[3])
            elif k in ACTS or k == "dropout":
                opts["rate"] = float(words[1]) if k == "dropout" else 0.0
                opts["skip"] = skip_dropout
            elif k == "upsample":
                f = int(words[1])
                opts.update(factor=f, mode=words[2] if len(words) > 2 else "nearest")
                shape = ("image", shape[1], shape[2] * f, shape[3] * f)
            elif k == "pad":
                p = _ints(words[1])
                t, b, l, r = p * 4 if len(p) == 1 else p
                opts.update(pads=(l, r, t, b), reflect=len(words) > 2 and words[2] == "reflect",
                            value=float(words[2][6:]) if len(words) > 2 and words[2].startswith("value=") else 0.0)
                shape = ("image", shape[1], shape[2] + t + b, shape[3] + l + r)
            elif k == "residual":
                block.append(shape)
            elif k == "end":
                block.pop()
            elif k == "from":
                opts["refs"] = words[1:]
                shape = labels[words[1]] if words[1] != self.input_label else ("image", c, h, w)
            elif k == "mul":
                opts["refs"] = words[1:]
                opts["gate"] = shape[0] == "flat" and labels[words[1]][0] == "image"
                shape = labels[words[1]] if words[1] != self.input_label else ("image", c, h, w)
            elif k in ("concat", "add"):
                opts["refs"] = words[1:]
                if k == "concat":
                    extra = sum(labels[n][1] for n in words[1:])
                    shape = (shape[0], shape[1] + extra) + tuple(shape[2:])
            else:
                raise ValueError("line %d: layer '%s' is not supported here" % (no, k))
            if label:
                labels[label] = shape
            self.steps.append((k, opts, label))
        last = self.steps[-1]
        self.final_softmax = last[0] == "softmax" or last[1].get("act") == "softmax"

    def _add(self, module, name, params):
        self.mods.append(module)
        self.names += [("%s.%s" % (name, what), t, how) for what, t, how in params]
        return len(self.mods) - 1

    @staticmethod
    def _pool_out(n, size, stride, pad, ceil):
        span = n + 2 * pad - size
        o = (-(-span // stride) if ceil else span // stride) + 1
        if ceil and (o - 1) * stride >= n + pad:  # PyTorch: the last window starts inside the image or left pad
            o -= 1
        return o

    def _conv(self, k, name, words, shape, opts):
        transposed = k == "conv2d_transpose"
        f, ks = int(words[1]), int(words[2])
        s, pads, d, g, op, act = (1, 1), (0, 0, 0, 0), (1, 1), 1, (0, 0), "none"
        same = False
        for w in words[3:]:
            if w in ("pad=same", "same"):
                same = True
            elif w in ("pad=valid", "valid"):
                same, pads = False, (0, 0, 0, 0)
            elif w.startswith("stride="):
                v = _ints(w[7:]); s = (v[0], v[-1])
            elif w.startswith("pad="):
                v = _ints(w[4:]); pads = tuple(v * 4) if len(v) == 1 else tuple(v)
            elif w.startswith("dilation="):
                v = _ints(w[9:]); d = (v[0], v[-1])
            elif w.startswith("groups="):
                g = int(w[7:])
            elif w.startswith("out_pad="):
                v = _ints(w[8:]); op = (v[0], v[-1])
            elif w.startswith("size="):
                raise ValueError("%s: size= is not supported here; write out_pad=" % name)
            elif w in ACTS:
                act = w
            else:
                raise ValueError("%s: unknown option %s" % (name, w))
        if same:
            pads = (d[0] * (ks - 1) // 2,) * 2 + (d[1] * (ks - 1) // 2,) * 2
        t, b, l, r = pads
        c, h, wd = shape[1], shape[2], shape[3]
        if transposed:
            conv = nn.ConvTranspose2d(c, f, ks, stride=s, padding=0, output_padding=op, groups=g, dilation=d)
            oh = (h - 1) * s[0] - t - b + d[0] * (ks - 1) + 1 + op[0]
            ow = (wd - 1) * s[1] - l - r + d[1] * (ks - 1) + 1 + op[1]
            how = "convt"
        else:
            conv = nn.Conv2d(c, f, ks, stride=s, padding=0, groups=g, dilation=d)
            oh = (h + t + b - d[0] * (ks - 1) - 1) // s[0] + 1
            ow = (wd + l + r - d[1] * (ks - 1) - 1) // s[1] + 1
            how = "conv"
        opts.update(act=act, pads=(l, r, t, b), transposed=transposed, out=(oh, ow))
        opts["m"] = self._add(conv, name, [("weight", conv.weight, how), ("bias", conv.bias, "")])
        return ("image", f, oh, ow)

    def forward(self, images, channels_first=False):
        """images NHWC, or NCHW with channels_first (what a PyTorch user feeds: no permute)."""
        x = images if channels_first else images.permute(0, 3, 1, 2)
        env = {self.input_label: x} if self.input_label else {}
        inp, block = x, []
        for i, (k, o, label) in enumerate(self.steps):
            last = i == len(self.steps) - 1
            if k in ("conv2d", "conv2d_transpose"):
                l, r, t, b = o["pads"]
                m = self.mods[o["m"]]
                if o["transposed"]:
                    y = m(x)  # padding crops the full transposed output, side by side
                    x = y[:, :, t:t + o["out"][0], l:l + o["out"][1]]
                else:
                    x = m(F.pad(x, (l, r, t, b)) if any(o["pads"]) else x)
                x = x if last and o["act"] == "softmax" else ACTS[o["act"]](x)
            elif k == "dense":
                x = self.mods[o["m"]](x)
                x = x if last and o["act"] == "softmax" else ACTS[o["act"]](x)
            elif k == "batch_norm":
                x = self.mods[o["m"]](x)
            elif k == "maxpool2d":
                x = F.max_pool2d(x, o["size"], o["stride"], o["pad"], ceil_mode=o["ceil"])
            elif k == "avgpool2d":
                x = F.avg_pool2d(x, o["size"], o["stride"], o["pad"], ceil_mode=o["ceil"],
                                 count_include_pad=o["include"])
            elif k == "global_avgpool":
                x = x.mean((2, 3))
            elif k == "global_maxpool":
                x = x.amax((2, 3))
            elif k == "flatten":
                x = x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)
            elif k == "dropout":
                x = x if o["skip"] or not self.training else F.dropout(x, o["rate"])
            elif k in ACTS:
                x = x if last and k == "softmax" else ACTS[k](x)
            elif k == "upsample":
                x = F.interpolate(x, scale_factor=o["factor"], mode=o["mode"],
                                  **({"align_corners": False} if o["mode"] == "bilinear" else {}))
            elif k == "pad":
                x = F.pad(x, o["pads"], mode="reflect") if o["reflect"] else F.pad(x, o["pads"], value=o["value"])
            elif k == "residual":
                block.append(x)
            elif k == "end":
                x = x + block.pop()
            elif k == "from":
                x = env[o["refs"][0]]
            elif k == "mul":
                y = env[o["refs"][0]]
                x = y * x[:, :, None, None] if o["gate"] else y * x
            elif k in ("concat", "add"):
                for n in o["refs"]:
                    x = torch.cat([x, env[n]], dim=1) if k == "concat" else x + env[n]
            if label:
                env[label] = x
        return x

    def clnet_params(self):
        """[(clnet name, tensor or module, how)] in model order (see the module's docstring)."""
        return list(self.names)


def clnet_shape(t, how):
    """The clnet shape of a parameter held in torch's layout."""
    if how == "running":
        return [2, t.num_features]
    s = list(t.shape)
    return {"t": lambda: [s[1], s[0]], "conv": lambda: [s[2], s[3], s[1], s[0]],
            "convt": lambda: [s[0], s[2], s[3], s[1]]}.get(how, lambda: s)()


def to_torch(value, how):
    """A clnet-layout tensor in torch's layout."""
    return {"t": lambda: value.t(), "conv": lambda: value.permute(3, 2, 0, 1),
            "convt": lambda: value.permute(0, 3, 1, 2)}.get(how, lambda: value)()


def running(bn):
    """A batch norm's running statistics as clnet holds them: [means..., variances...]."""
    return torch.cat([bn.running_mean, bn.running_var])
