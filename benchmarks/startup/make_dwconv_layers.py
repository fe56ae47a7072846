#!/usr/bin/env python3
"""Single depthwise-conv layers of MobileNet/EfficientNet (batch 1, f32): Conv(group = C,
pads k//2, bias) followed by SiLU as torch.onnx exports it (Sigmoid + Mul), for timing the
JIT's depthwise kernel against ONNX Runtime with activations.sh.

  python make_dwconv_layers.py OUT_DIR

Writes OUT_DIR/dw_k{K}s{S}_{H}x{W}x{C}.onnx and its .input.x.npy. Needs numpy and onnx only.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# (channels, height/width, kernel, stride): the depthwise layers of efficientnet_b0 and
# mobilenet_v2/v3_small at 224x224.
LAYERS = [(32, 112, 3, 1), (96, 112, 3, 2), (144, 56, 3, 1), (144, 56, 5, 2), (240, 28, 5, 1),
          (240, 28, 3, 2), (672, 14, 5, 1), (672, 14, 5, 2), (1152, 7, 5, 1), (1152, 7, 3, 1)]


def layer(c, hw, k, s, rng):
    oh = (hw + 2 * (k // 2) - k) // s + 1
    w = numpy_helper.from_array((rng.standard_normal((c, 1, k, k)) * np.sqrt(2.0 / (k * k))).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.standard_normal(c) * 0.01).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k], strides=[s, s],
                              pads=[k // 2] * 4, group=c),
             helper.make_node("Sigmoid", ["y"], ["g"]),
             helper.make_node("Mul", ["y", "g"], ["out"])]
    graph = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, c, oh, oh])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="carve-bench")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(14)
    for c, hw, k, s in LAYERS:
        name = f"dw_k{k}s{s}_{hw}x{hw}x{c}"
        model = layer(c, hw, k, s, rng)
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(out, name + ".onnx"))
        np.save(os.path.join(out, name + ".input.x.npy"), rng.standard_normal((1, c, hw, hw)).astype(np.float32))
        print("wrote", name)


if __name__ == "__main__":
    main()
