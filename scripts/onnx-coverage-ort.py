#!/usr/bin/env python3
"""The ONNX node cases generate.py wrote, through ONNX Runtime, compared as carve's runner
compares (tests/onnx/conformance/run_case.cpp): the reference for docs/onnx-coverage.md.

    PYTHON_WITH_ONNXRUNTIME scripts/onnx-coverage-ort.py CASES_DIR

Prints one summary line (scripts/onnx-coverage.sh puts it in the document when ORT_PYTHON
names an interpreter with onnxruntime; it is not a Debian package, so nothing else needs it).
"""
import os
import sys

import numpy as np
import onnxruntime as ort


def load(base):
    if os.path.exists(base + ".bf16.npy"):
        return None  # bfloat16: numpy has no dtype to hand ORT
    return np.load(base + ".npy")


def matches(actual, expected, random):
    actual = np.asarray(actual)
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return False
    if random:
        return expected.size == 0 or actual.dtype == bool or bool(
            np.all((actual >= expected.min()) & (actual <= expected.max())))
    if expected.dtype.kind != "f":
        return np.array_equal(actual, expected)
    return np.allclose(actual, expected, rtol=1e-3, atol=1e-7, equal_nan=True)


def main():
    cases_dir = sys.argv[1]
    ort.set_default_logger_severity(3)
    passed = total = 0
    for line in open(os.path.join(cases_dir, "manifest.tsv")):
        if line.startswith("#"):
            continue
        name, _op, _domain, _opset, kind, compare, inputs, outputs = line.rstrip("\n").split("\t")
        total += 1
        if kind != "tensor":
            continue
        case = os.path.join(cases_dir, name)
        try:
            feeds = {n: load(f"{case}/in{i}") for i, n in enumerate(inputs.split(",") if inputs else [])}
            expected = [load(f"{case}/out{i}") for i in range(len(outputs.split(",")))]
            if any(v is None for v in list(feeds.values()) + expected):
                continue
            session = ort.InferenceSession(f"{case}/model.onnx", providers=["CPUExecutionProvider"])
            got = session.run(outputs.split(","), feeds)
            passed += all(matches(a, e, compare == "random") for a, e in zip(got, expected))
        except Exception:  # an ORT refusal is that case's failure
            pass
    print(f"ONNX Runtime {ort.__version__} (CPU) passes {passed} of the {total} cases.")


if __name__ == "__main__":
    main()
