#!/usr/bin/env python3
"""Full-size CNNs for the start-up and activation benchmarks, built with onnx.helper (no
torch needed): resnet18, mobilenet_v2, vgg16, efficientnet_b0 and mobilenet_v3_small as
torchvision defines them (batch 1, 3x224x224), with batch norm folded into the
convolutions and activations spelled as torch.onnx.export writes them in eval mode (SiLU
as Sigmoid + Mul, hard-swish as HardSwish at opset 14, squeeze-excitation as
GlobalAveragePool, two 1x1 convs and a Mul). Weights are random (He-scaled, seeded), never
downloaded.

  python make_models.py OUT_DIR [--models resnet18,mobilenet_v2,vgg16,efficientnet_b0,mobilenet_v3_small]

Writes OUT_DIR/NAME.onnx and OUT_DIR/NAME.input.x.npy. Needs numpy and onnx only.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, kind):
        self.n += 1
        return f"{kind}_{self.n}"

    def const(self, array, kind):
        name = self.name(kind)
        self.inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def node(self, op, inputs, **attrs):
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def conv(self, x, cin, cout, k, stride=1, group=1, act=None):
        fan_in = cin // group * k * k
        w = self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)
        b = self.rng.standard_normal(cout) * 0.01
        y = self.node("Conv", [x, self.const(w, "w"), self.const(b, "b")], kernel_shape=[k, k],
                      strides=[stride, stride], pads=[k // 2] * 4, group=group)
        return self.act(y, act)

    def act(self, y, act):
        if act == "relu":
            y = self.node("Relu", [y])
        elif act == "relu6":
            y = self.node("Clip", [y, self.const(np.array(0.0), "lo"), self.const(np.array(6.0), "hi")])
        elif act == "silu":
            y = self.node("Mul", [y, self.node("Sigmoid", [y])])
        elif act == "hardswish":
            y = self.node("HardSwish", [y])
        elif act == "sigmoid":
            y = self.node("Sigmoid", [y])
        elif act == "hardsigmoid":
            y = self.node("HardSigmoid", [y], alpha=1.0 / 6.0)
        return y

    def se(self, x, ch, sq, act, gate):
        s = self.node("GlobalAveragePool", [x])
        s = self.conv(self.conv(s, ch, sq, 1, act=act), sq, ch, 1, act=gate)
        return self.node("Mul", [x, s])

    def fc(self, x, cin, cout):
        w = self.rng.standard_normal((cout, cin)) * np.sqrt(1.0 / cin)
        return self.node("Gemm", [x, self.const(w, "w"), self.const(self.rng.standard_normal(cout) * 0.01, "b")],
                         transB=1)

    def head(self, x, channels):
        return self.fc(self.node("Flatten", [self.node("GlobalAveragePool", [x])]), channels, 1000)

    def model(self, name, y, opset=13):
        graph = helper.make_graph(self.nodes, name,
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
                                  [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 1000])], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="carve-bench")


def resnet18():
    b = Builder(18)
    x = b.conv("x", 3, 64, 7, 2, act="relu")
    x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        for block in range(2):
            s = stride if block == 0 else 1
            y = b.conv(b.conv(x, cin, cout, 3, s, act="relu"), cout, cout, 3)
            short = b.conv(x, cin, cout, 1, s) if (s != 1 or cin != cout) else x
            x, cin = b.node("Relu", [b.node("Add", [y, short])]), cout
    return b.model("resnet18", b.head(x, 512))


def mobilenet_v2():
    b = Builder(2)
    x = b.conv("x", 3, 32, 3, 2, act="relu6")
    cin = 32
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                       (6, 320, 1, 1)]:
        for i in range(n):
            stride, hidden = s if i == 0 else 1, cin * t
            y = b.conv(x, cin, hidden, 1, act="relu6") if t != 1 else x
            y = b.conv(y, hidden, hidden, 3, stride, group=hidden, act="relu6")
            y = b.conv(y, hidden, c, 1)
            x, cin = (b.node("Add", [x, y]) if stride == 1 and cin == c else y), c
    return b.model("mobilenet_v2", b.head(b.conv(x, 320, 1280, 1, act="relu6"), 1280))


def vgg16():
    b = Builder(16)
    x, cin = "x", 3
    for v in [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]:
        if v == "M":
            x = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
        else:
            x, cin = b.conv(x, cin, v, 3, act="relu"), v
    x = b.node("Flatten", [x])
    x = b.node("Relu", [b.fc(x, 512 * 7 * 7, 4096)])
    x = b.node("Relu", [b.fc(x, 4096, 4096)])
    return b.model("vgg16", b.fc(x, 4096, 1000))


def efficientnet_b0():
    b = Builder(0)
    x, cin = b.conv("x", 3, 32, 3, 2, act="silu"), 32
    for e, k, s, c, n in [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
                          (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]:
        for i in range(n):
            stride, hidden = s if i == 0 else 1, cin * e
            y = b.conv(x, cin, hidden, 1, act="silu") if e != 1 else x
            y = b.conv(y, hidden, hidden, k, stride, group=hidden, act="silu")
            y = b.se(y, hidden, max(1, cin // 4), "silu", "sigmoid")
            y = b.conv(y, hidden, c, 1)
            x, cin = (b.node("Add", [x, y]) if stride == 1 and cin == c else y), c
    return b.model("efficientnet_b0", b.head(b.conv(x, 320, 1280, 1, act="silu"), 1280))


def divisible8(v):
    r = max(8, int(v + 4) // 8 * 8)
    return r + 8 if r < 0.9 * v else r


def mobilenet_v3_small():
    b = Builder(3)
    x, cin = b.conv("x", 3, 16, 3, 2, act="hardswish"), 16
    for k, hidden, c, se, act, s in [(3, 16, 16, True, "relu", 2), (3, 72, 24, False, "relu", 2),
                                     (3, 88, 24, False, "relu", 1), (5, 96, 40, True, "hardswish", 2),
                                     (5, 240, 40, True, "hardswish", 1), (5, 240, 40, True, "hardswish", 1),
                                     (5, 120, 48, True, "hardswish", 1), (5, 144, 48, True, "hardswish", 1),
                                     (5, 288, 96, True, "hardswish", 2), (5, 576, 96, True, "hardswish", 1),
                                     (5, 576, 96, True, "hardswish", 1)]:
        y = b.conv(x, cin, hidden, 1, act=act) if hidden != cin else x
        y = b.conv(y, hidden, hidden, k, s, group=hidden, act=act)
        if se:
            y = b.se(y, hidden, divisible8(hidden // 4), "relu", "hardsigmoid")
        y = b.conv(y, hidden, c, 1)
        x, cin = (b.node("Add", [x, y]) if s == 1 and cin == c else y), c
    x = b.node("Flatten", [b.node("GlobalAveragePool", [b.conv(x, 96, 576, 1, act="hardswish")])])
    x = b.act(b.fc(x, 576, 1024), "hardswish")
    return b.model("mobilenet_v3_small", b.fc(x, 1024, 1000), opset=14)


MODELS = {"resnet18": resnet18, "mobilenet_v2": mobilenet_v2, "vgg16": vgg16, "efficientnet_b0": efficientnet_b0,
          "mobilenet_v3_small": mobilenet_v3_small}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.models.split(","):
        model = MODELS[name]()
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(args.out, name + ".onnx"))
        x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
        np.save(os.path.join(args.out, name + ".input.x.npy"), x)
        print(f"wrote {name}.onnx ({len(model.graph.node)} nodes)")


if __name__ == "__main__":
    main()
