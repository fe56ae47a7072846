#!/usr/bin/env python3
"""Where the time goes, per operator kind, in carve and in ONNX Runtime, for one model of
build/bench-models (used to write the closing note of docs/benchmarks.md).

  build/bench-venv/bin/python benchmarks/compare/profile_ops.py MODEL [--threads 1] [--iters 10]

carve: `carve run --trace` (per-launch timings of the last run; launches named after their
fused kernel group) summed per kernel kind. ORT: SessionOptions.enable_profiling, node
events of the last run summed per op_type. Both single-threaded by default.
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

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)


def kind_of(name):
    # Launch names look like "conv2d_relu#12" / "fused: add+relu" etc.: keep the leading word.
    m = re.match(r"[A-Za-z_]+", name.replace("fused", "").strip(" :_"))
    return (m.group(0).rstrip("_") if m else name) or name


def carve_profile(a, tmp):
    from worker import inputs_of
    trace = os.path.join(tmp, "trace.json")
    cmd = [a.carve, "run", os.path.join(a.models, a.model + ".onnx"), "--threads", str(a.threads), "--iters",
           str(a.iters), "--trace", trace]
    for f in sorted(glob.glob(os.path.join(a.models, a.model + ".input.*.npy"))):
        cmd += ["--input", f"{f.split('.input.')[1][:-4]}={f}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    ev = [e for e in json.load(open(trace))["traceEvents"] if e.get("ph") == "X"]
    per = collections.Counter()
    count = collections.Counter()
    for e in ev:
        per[kind_of(e["name"])] += e["dur"] / 1e3
        count[kind_of(e["name"])] += 1
    top = sorted(ev, key=lambda e: -e["dur"])[:a.top]
    return out.strip().splitlines()[-2:], per, count, [(e["name"], e["dur"] / 1e3) for e in top]


def ort_profile(a, tmp):
    import numpy as np
    import onnxruntime as ort
    from worker import inputs_of
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tmp, "ort")
    s = ort.InferenceSession(os.path.join(a.models, a.model + ".onnx"), so, providers=["CPUExecutionProvider"])
    feeds = inputs_of(a.models, a.model)
    for _ in range(a.iters):
        s.run(None, feeds)
    ev = json.load(open(s.end_profiling()))
    runs = [e for e in ev if e.get("cat") == "Session" and e.get("name") == "model_run"]
    last = runs[-1]
    per, count = collections.Counter(), collections.Counter()
    for e in ev:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and e["ts"] >= last["ts"]:
            per[e["args"]["op_name"]] += e["dur"] / 1e3
            count[e["args"]["op_name"]] += 1
    return last["dur"] / 1e3, per, count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--models", default=os.path.join(REPO, "build", "bench-models"))
    ap.add_argument("--carve", default=os.path.join(REPO, "build", "release", "tools", "carve"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lines, cper, ccount, top = carve_profile(a, tmp)
        ototal, oper, ocount = ort_profile(a, tmp)
    print(f"## {a.model}, {a.threads} thread(s)\n")
    print(f"carve: {' / '.join(lines)}; sum of launches in the last run {sum(cper.values()):.2f} ms")
    print(f"ORT: last run {ototal:.2f} ms, sum of nodes {sum(oper.values()):.2f} ms\n")
    print("| carve kernel kind | launches | ms | | ORT op_type | nodes | ms |")
    print("|---|---|---|---|---|---|---|")
    cl, ol = cper.most_common(), oper.most_common()
    for i in range(max(len(cl), len(ol))):
        c = f"{cl[i][0]} | {ccount[cl[i][0]]} | {cl[i][1]:.2f}" if i < len(cl) else " | | "
        o = f"{ol[i][0]} | {ocount[ol[i][0]]} | {ol[i][1]:.2f}" if i < len(ol) else " | | "
        print(f"| {c} | | {o} |")
    print("\nslowest carve launches: " + "; ".join(f"{n} {ms:.2f} ms" for n, ms in top))


if __name__ == "__main__":
    main()
