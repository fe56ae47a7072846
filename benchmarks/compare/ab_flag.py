#!/usr/bin/env python3
"""A/B of one `carve run` flag on one model of build/bench-models, for a shared machine.

  python3 benchmarks/compare/ab_flag.py MODEL --flag=--no-concat-views [--procs 6] [--threads 1]

Runs `carve run --trace` in --procs processes per side, alternating which side goes first,
and prints per side the whole-process medians and the sum over launches of each launch's
minimum over the processes (other jobs preempt whole processes; the minimum per launch
drops the time slices they took). A launch missing on one side (a kernel the flag removes)
counts only where it ran.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--flag", required=True, help="the carve run flag of side B, e.g. --flag=--no-concat-views")
    ap.add_argument("--models", default=os.path.join(REPO, "build", "bench-models"))
    ap.add_argument("--carve", default=os.path.join(REPO, "build", "release", "tools", "carve"))
    ap.add_argument("--procs", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    best = {False: {}, True: {}}
    medians = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        for p in range(a.procs):
            for with_flag in ((True, False) if p % 2 == 0 else (False, True)):
                cmd = [a.carve, "run", os.path.join(a.models, a.model + ".onnx"), "--random-inputs", "1", "--threads",
                       str(a.threads), "--iters", str(a.iters), "--trace", trace] + ([a.flag] if with_flag else [])
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                medians[with_flag].append(float(re.search(r"median ([0-9.]+) ms", out).group(1)))
                events = json.load(open(trace))
                events = events["traceEvents"] if isinstance(events, dict) else events
                per = collections.defaultdict(float)
                for e in events:
                    if e.get("ph") == "X":
                        per[e["name"]] += e["dur"] / 1e3
                for name, ms in per.items():
                    best[with_flag][name] = min(best[with_flag].get(name, float("inf")), ms)
    for with_flag in (False, True):
        side = f"with {a.flag}" if with_flag else "default"
        print(f"{a.model} {a.threads}T {side}: process medians {sorted(medians[with_flag])} ms, "
              f"sum of per-launch minimums {sum(best[with_flag].values()):.2f} ms")


if __name__ == "__main__":
    main()
