#!/usr/bin/env python3
"""One-operator GEMV models for the pre-packing / GEMV benchmark (issue 14, items 5 and 6):
a decode-style MatMul x[M, 1024] @ W[1024, 4096] (M = 1 and 4) and a classifier-head-style
Gemm x[1, 1024] @ W[4096, 1024]^T + b (transB=1, as torch exports nn.Linear). Random seeded
weights, written with onnx.helper.

  python make_gemv_models.py OUT_DIR

Writes OUT_DIR/NAME.onnx and OUT_DIR/NAME.input.x.npy. Needs numpy and onnx only.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(out, rng, name, m, k, n, trans_b, op):
    w = (rng.standard_normal((n, k) if trans_b else (k, n)) / np.sqrt(k)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    if op == "Gemm":
        inits.append(numpy_helper.from_array((rng.standard_normal(n) * 0.01).astype(np.float32), "b"))
        node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=trans_b)
    else:
        node = helper.make_node("MatMul", ["x", "w"], ["y"])
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, os.path.join(out, f"{name}.onnx"))
    np.save(os.path.join(out, f"{name}.input.x.npy"), rng.standard_normal((m, k)).astype(np.float32))
    print(f"wrote {name}.onnx")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    save(out, rng, "gemv_gemm_tb_m1", 1, 1024, 4096, 1, "Gemm")
    save(out, rng, "gemv_matmul_m1", 1, 1024, 4096, 0, "MatMul")
    save(out, rng, "gemv_matmul_m4", 4, 1024, 4096, 0, "MatMul")
    save(out, rng, "gemm_tb_m64", 64, 1024, 1024, 1, "Gemm")


if __name__ == "__main__":
    main()
