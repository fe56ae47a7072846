#!/usr/bin/env python3
"""Where the time goes, per operator kind, in carve, ONNX Runtime and OpenVINO, for one model of
build/bench-models (used to write the closing note of docs/benchmarks.md).

  build/bench-venv/bin/python benchmarks/compare/profile_ops.py MODEL [--threads 1] [--iters 10]

carve: `carve run --trace` in --procs processes (per-launch timings of each one's last run;
launches are named after their fused kernel group), each launch's minimum over them, summed
per kernel kind. ORT: SessionOptions.enable_profiling over --iters runs, each node's
minimum, summed per op_type. OpenVINO: its per-layer counters (PERF_COUNT) over --iters
runs, each executed layer's minimum, summed per layer type and kernel (e.g.
"Convolution brgconv_avx512_1x1_f32"); --no-openvino leaves it out. Minimums, because other
jobs on a shared machine preempt. All single-threaded by default.
"""
import argparse
import collections
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)


def kind_of(name):
    # Launch names are the kernel groups' names, e.g. "fused_matmul_add_13": drop the number.
    return re.sub(r"_\d+$", "", name)


def carve_profile(a, tmp):
    """Per launch, the minimum over --procs processes of its time in the last run (a
    trace records one run; the minimum drops the time slices other jobs took)."""
    best, lines = {}, []
    for p in range(a.procs):
        trace = os.path.join(tmp, f"trace{p}.json")
        cmd = [a.carve, "run", os.path.join(a.models, a.model + ".onnx"), "--threads", str(a.threads), "--iters",
               str(a.iters), "--trace", trace]
        for f in sorted(glob.glob(os.path.join(a.models, a.model + ".input.*.npy"))):
            cmd += ["--input", f"{f.split('.input.')[1][:-4]}={f}"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        lines = [l for l in out.strip().splitlines() if l.startswith(("ran", "process CPU"))]
        for e in json.load(open(trace))["traceEvents"]:
            if e.get("ph") == "X":
                key = (e["args"]["task"], e["name"])
                best[key] = min(best.get(key, 1e18), e["dur"] / 1e3)
    per, count = collections.Counter(), collections.Counter()
    for (task, name), ms in best.items():
        per[kind_of(name)] += ms
        count[kind_of(name)] += 1
    top = sorted(best.items(), key=lambda kv: -kv[1])[:a.top]
    return lines, per, count, [(name, ms) for (task, name), ms in top]


def ort_profile(a, tmp):
    import numpy as np
    import onnxruntime as ort
    from worker import inputs_of
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.enable_profiling = True
    ops = {}
    so.profile_file_prefix = os.path.join(tmp, "ort")
    s = ort.InferenceSession(os.path.join(a.models, a.model + ".onnx"), so, providers=["CPUExecutionProvider"])
    feeds = inputs_of(a.models, a.model)
    for _ in range(a.iters):
        s.run(None, feeds)
    ev = json.load(open(s.end_profiling()))
    runs = sorted(e["dur"] / 1e3 for e in ev if e.get("cat") == "Session" and e.get("name") == "model_run")
    best = {}
    for e in ev:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            best[e["name"]] = min(best.get(e["name"], 1e18), e["dur"] / 1e3)
            best_op = e["args"]["op_name"]
            ops[e["name"]] = best_op
    per, count = collections.Counter(), collections.Counter()
    for name, ms in best.items():
        per[ops[name]] += ms
        count[ops[name]] += 1
    return runs[0], per, count


def openvino_profile(a):
    import openvino as ov
    from worker import inputs_of
    core = ov.Core()
    compiled = core.compile_model(core.read_model(os.path.join(a.models, a.model + ".onnx")), "CPU", {
        "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": a.threads,
        "PERF_COUNT": True})
    request = compiled.create_infer_request()
    feeds = inputs_of(a.models, a.model)
    best, kinds, runs = {}, {}, []
    for _ in range(a.iters):
        start = time.perf_counter()
        request.infer(feeds)
        runs.append((time.perf_counter() - start) * 1e3)
        for p in request.get_profiling_info():
            if p.status == p.Status.EXECUTED:
                best[p.node_name] = min(best.get(p.node_name, 1e18), p.real_time.total_seconds() * 1e3)
                kinds[p.node_name] = f"{p.node_type} {p.exec_type}"
    per, count = collections.Counter(), collections.Counter()
    for name, ms in best.items():
        per[kinds[name]] += ms
        count[kinds[name]] += 1
    return min(runs), per, count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--models", default=os.path.join(REPO, "build", "bench-models"))
    ap.add_argument("--carve", default=os.path.join(REPO, "build", "release", "tools", "carve"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--procs", type=int, default=5, help="carve processes (per-launch minimum over them)")
    ap.add_argument("--no-openvino", action="store_true", help="leave OpenVINO's counters out")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lines, cper, ccount, top = carve_profile(a, tmp)
        ototal, oper, ocount = ort_profile(a, tmp)
    vtotal, vper, vcount = (0.0, collections.Counter(), collections.Counter()) if a.no_openvino else openvino_profile(a)
    print(f"## {a.model}, {a.threads} thread(s)\n")
    print(f"carve ({a.procs} processes, last one): {' / '.join(lines)}; sum over launches of their minimum "
          f"time {sum(cper.values()):.2f} ms")
    print(f"ORT ({a.iters} runs): fastest run {ototal:.2f} ms, sum over nodes of their minimum time "
          f"{sum(oper.values()):.2f} ms\n")
    if not a.no_openvino:
        print(f"OpenVINO ({a.iters} runs): fastest run {vtotal:.2f} ms, sum over layers of their minimum time "
              f"{sum(vper.values()):.2f} ms\n")
    print("| carve kernel kind | launches | ms | | ORT op_type | nodes | ms | | OpenVINO layer, kernel | layers | ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    cl, ol, vl = cper.most_common(), oper.most_common(), vper.most_common()
    for i in range(max(len(cl), len(ol), len(vl))):
        c = f"{cl[i][0]} | {ccount[cl[i][0]]} | {cl[i][1]:.2f}" if i < len(cl) else " | | "
        o = f"{ol[i][0]} | {ocount[ol[i][0]]} | {ol[i][1]:.2f}" if i < len(ol) else " | | "
        v = f"{vl[i][0]} | {vcount[vl[i][0]]} | {vl[i][1]:.2f}" if i < len(vl) else " | | "
        print(f"| {c} | | {o} | | {v} |")
    print("\nslowest carve launches: " + "; ".join(f"{n} {ms:.2f} ms" for n, ms in top))


if __name__ == "__main__":
    main()
