"""Loads a meshtrain checkpoint of a Sequential model (one whose metadata
records its "architecture", nn's canonical JSON) into the torch.nn.Sequential
built from the same layers, with load_state_dict(strict=True), and prints its
test accuracy on MNIST's test set as JSON: {"correct": ..., "examples": ...}.

Usage: python3 torch_eval.py CHECKPOINT MNIST_DIR [TEST_EXAMPLES]

Each of meshtrain's layers is the torch module of the same index, so the
checkpoint's tensor names (0.weight, 0.bias, 7.weight ...) are the
Sequential's state_dict keys; run by tests/keras_test.go
(TestLongCheckpointLoadsIntoPyTorch) where PyTorch is installed.
"""
import gzip
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def load_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, v in header.items():
        assert v["dtype"] == "F32", v
        lo, hi = v["data_offsets"]
        tensors[name] = torch.frombuffer(bytearray(b[8 + n + lo:8 + n + hi]), dtype=torch.float32).reshape(v["shape"])
    return tensors, meta


def same_padding(size, k, s):
    """Keras's "same": the padding before and after of a window k moved s at a time."""
    out = (size + s - 1) // s
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


class SameConv2d(nn.Conv2d):
    """Conv2d with Keras's "same" padding (uneven: one more after), any stride."""

    def forward(self, x):
        k, s = self.kernel_size[0], self.stride[0]
        t, b = same_padding(x.shape[2], k, s)
        l, r = same_padding(x.shape[3], k, s)
        return super().forward(F.pad(x, (l, r, t, b)))


class SamePool2d(nn.Module):
    """Keras's pooling with "same" padding: padding is never a maximum, and an
    average counts only the cells inside the input."""

    def __init__(self, k, s, avg):
        super().__init__()
        self.k, self.s, self.avg = k, s, avg

    def forward(self, x):
        t, b = same_padding(x.shape[2], self.k, self.s)
        l, r = same_padding(x.shape[3], self.k, self.s)
        if not self.avg:
            return F.max_pool2d(F.pad(x, (l, r, t, b), value=-float("inf")), self.k, self.s)
        sums = F.avg_pool2d(F.pad(x, (l, r, t, b)), self.k, self.s, divisor_override=1)
        ones = F.pad(torch.ones_like(x[:1, :1]), (l, r, t, b))
        return sums / F.avg_pool2d(ones, self.k, self.s, divisor_override=1)


class Reshape(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.shape = shape

    def forward(self, x):
        return x.reshape(x.shape[0], *self.shape)


def build(arch):
    """The torch.nn.Sequential of an architecture's layers, one module each."""
    inp = arch["input"]
    shape = (inp[2], inp[0], inp[1]) if len(inp) == 3 else (inp[0],)  # C, H, W as PyTorch has it
    mods = []
    for l in arch["layers"]:
        t = l["type"]
        if t == "conv2d":
            k, s = l["kernel"], l["strides"]
            if l["padding"] == "same":
                m = SameConv2d(shape[0], l["filters"], k, stride=s)
                oh, ow = (shape[1] + s - 1) // s, (shape[2] + s - 1) // s
            else:
                m = nn.Conv2d(shape[0], l["filters"], k, stride=s)
                oh, ow = (shape[1] - k) // s + 1, (shape[2] - k) // s + 1
            shape = (l["filters"], oh, ow)
        elif t in ("max_pooling2d", "average_pooling2d"):
            k, s, avg = l["size"], l["strides"], t == "average_pooling2d"
            if l["padding"] == "same":
                m = SamePool2d(k, s, avg)
                shape = (shape[0], (shape[1] + s - 1) // s, (shape[2] + s - 1) // s)
            else:
                m = nn.AvgPool2d(k, s) if avg else nn.MaxPool2d(k, s)
                shape = (shape[0], (shape[1] - k) // s + 1, (shape[2] - k) // s + 1)
        elif t == "flatten":
            m = nn.Flatten()
            shape = (int(np.prod(shape)),)
        elif t == "reshape":
            to = l["to"]
            to = (to[2], to[0], to[1]) if len(to) == 3 else tuple(to)
            if -1 in to:
                known = -int(np.prod(to))
                to = tuple(int(np.prod(shape)) // known if d == -1 else d for d in to)
            m, shape = Reshape(to), to
        elif t == "dense":
            m = nn.Linear(shape[0], l["units"])
            shape = (l["units"],)
        elif t == "dropout":
            m = nn.Dropout(l["rate"])
        elif t == "activation":
            m = {"relu": nn.ReLU(), "tanh": nn.Tanh(), "sigmoid": nn.Sigmoid(),
                 "softmax": nn.Softmax(dim=1), "linear": nn.Identity()}[l["fn"]]
        else:
            raise SystemExit("unknown layer type %r" % t)
        mods.append(m)
    return nn.Sequential(*mods)


def idx(path):
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            return (gzip.open if p.endswith(".gz") else open)(p, "rb").read()
    raise SystemExit("no " + path)


def main():
    torch.set_num_threads(1)
    ckpt, mnist = sys.argv[1], sys.argv[2]
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    tensors, meta = load_safetensors(ckpt)
    arch = json.loads(meta["architecture"])
    model = build(arch)
    state = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    model.load_state_dict(state, strict=True)
    model.eval()
    images, labels = idx(os.path.join(mnist, "t10k-images-idx3-ubyte")), idx(os.path.join(mnist, "t10k-labels-idx1-ubyte"))
    x = torch.tensor(np.frombuffer(images, np.uint8, offset=16), dtype=torch.float32).view(-1, 1, 28, 28)
    y = torch.tensor(np.frombuffer(labels, np.uint8, offset=8), dtype=torch.long)
    if limit:
        x, y = x[:limit], y[:limit]
    x = (x / 255 - float(meta["input_mean"])) / float(meta["input_std"])
    if len(arch["input"]) == 1:
        x = x.flatten(1)
    with torch.no_grad():
        out = model(x)
    pred = (out[:, 0] > 0.5).long() if out.shape[1] == 1 else out.argmax(1)
    print(json.dumps({"correct": int((pred == y).sum()), "examples": int(y.shape[0]),
                      "modules": [type(m).__name__ for m in model]}))


main()
