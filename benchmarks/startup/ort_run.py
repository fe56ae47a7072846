#!/usr/bin/env python3
"""ONNX Runtime started the way `carve run` is: one process loads MODEL.onnx, builds its
session (intra_op_num_threads = THREADS, sequential) and runs it ITERS times on
MODEL.input.<name>.npy. For bench.sh, which times the whole process with /usr/bin/time.

  python ort_run.py MODEL.onnx THREADS ITERS
"""
import glob
import os
import sys
import time

import numpy as np
import onnxruntime as ort

model, threads, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
stem = model[: -len(".onnx")]
feeds = {os.path.basename(f)[len(os.path.basename(stem)) + len(".input."): -len(".npy")]: np.load(f)
         for f in glob.glob(stem + ".input.*.npy")}
so = ort.SessionOptions()
so.intra_op_num_threads = threads
so.inter_op_num_threads = 1
so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
start = time.perf_counter()
session = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
times = []
for _ in range(iters):
    t0 = time.perf_counter()
    session.run(None, feeds)
    times.append(time.perf_counter() - t0)
print(f"ort: session {1e3 * (time.perf_counter() - start - sum(times)):.1f} ms, "
      f"median run {1e3 * sorted(times)[len(times) // 2]:.3f} ms")
