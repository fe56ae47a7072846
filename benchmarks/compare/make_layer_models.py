#!/usr/bin/env python3
"""Single-layer ONNX models for the per-family comparison of compare.py (--layers).

Each model is one convolution (with bias, as a BatchNorm-folded layer has) followed by
its activation, at the shapes where the CNNs of the --cnn preset spend their time:

  layer_conv3x3_64_56       3x3 stride 1, 64 -> 64 channels at 56x56 (resnet stage 1)
  layer_conv3x3_256_14      3x3 stride 1, 256 -> 256 at 14x14 (resnet stage 3)
  layer_conv3x3s2_128_28    3x3 stride 2, 128 -> 256 at 28x28 (resnet down-sampling)
  layer_conv1x1_256_64_56   1x1, 256 -> 64 at 56x56 (bottleneck reduce)
  layer_conv1x1_512_2048_7  1x1, 512 -> 2048 at 7x7 (bottleneck expand, last stage)
  layer_conv7x7s2_stem      7x7 stride 2, 3 -> 64 at 224x224 (the resnet stem)
  layer_dw3x3_144_56        depthwise 3x3 stride 1, 144 channels at 56x56, Clip 0..6 (mobilenet)
  layer_dw3x3s2_144_56      depthwise 3x3 stride 2, 144 channels at 56x56

Batch 1, f32, random weights (seeded, never downloaded), opset 13. For each NAME it
writes NAME.onnx and NAME.input.x.npy, the layout of scripts/make_onnx_models.py, so
compare.py runs these exactly as it runs the exported CNNs. Only the `onnx` and `numpy`
packages are needed (Debian's or PyPI's).

  make_layer_models.py DIR [--only NAME,...]
"""
import argparse
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

# name: (in channels, out channels, kernel, stride, group, input size, activation)
LAYERS = {
    "layer_conv3x3_64_56": (64, 64, 3, 1, 1, 56, "Relu"),
    "layer_conv3x3_256_14": (256, 256, 3, 1, 1, 14, "Relu"),
    "layer_conv3x3s2_128_28": (128, 256, 3, 2, 1, 28, "Relu"),
    "layer_conv1x1_256_64_56": (256, 64, 1, 1, 1, 56, "Relu"),
    "layer_conv1x1_512_2048_7": (512, 2048, 1, 1, 1, 7, "Relu"),
    "layer_conv7x7s2_stem": (3, 64, 7, 2, 1, 224, "Relu"),
    "layer_dw3x3_144_56": (144, 144, 3, 1, 144, 56, "Clip"),
    "layer_dw3x3s2_144_56": (144, 144, 3, 2, 144, 56, "Relu"),
}


def make(name, cin, cout, k, stride, group, size, act, seed):
    rng = np.random.default_rng(seed)
    # He-style scale keeps activations O(1), so Relu/Clip see both signs and the
    # cross-check's relative error is meaningful.
    w = (rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / (cin // group * k * k))).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
    x = rng.standard_normal((1, cin, size, size)).astype(np.float32)
    out = (size + 2 * (k // 2) - k) // stride + 1
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv"], name="conv", kernel_shape=[k, k],
                              strides=[stride, stride], pads=[k // 2] * 4, group=group)]
    if act == "Clip":  # opset 13: the bounds are inputs, not attributes
        inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", ["conv", "lo", "hi"], ["y"], name="act"))
    else:
        nodes.append(helper.make_node(act, ["conv"], ["y"], name="act"))
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, out, out])], inits)
    # ir_version 7 so that Debian's onnx 1.12 and every runtime read it alike.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7,
                              producer_name="carve make_layer_models.py")
    return model, x


def write(out_dir, names=None):
    os.makedirs(out_dir, exist_ok=True)
    for i, (name, spec) in enumerate(LAYERS.items()):
        if names is not None and name not in names:
            continue
        model, x = make(name, *spec, seed=100 + i)
        save(model, os.path.join(out_dir, name + ".onnx"))
        np.save(os.path.join(out_dir, f"{name}.input.x.npy"), x)
        print(f"{name}: {os.path.getsize(os.path.join(out_dir, name + '.onnx'))} bytes")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--only", help="comma-separated layer names")
    a = ap.parse_args()
    unknown = set(a.only.split(",")) - set(LAYERS) if a.only else set()
    if unknown:
        ap.error(f"unknown layer(s) {', '.join(sorted(unknown))}; known: {', '.join(LAYERS)}")
    write(a.out_dir, a.only.split(",") if a.only else None)


if __name__ == "__main__":
    main()
