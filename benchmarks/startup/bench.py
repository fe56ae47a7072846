#!/usr/bin/env python3
"""Start-up benchmark (issue 16): whole-process wall time, CPU time and peak RSS of one
process that loads a model, compiles it and runs it ITERS times on 1 inference thread --
`carve run --threads 1` cold (empty kernel cache), warm (second process, cache filled),
and ONNX Runtime (intra_op_num_threads 1, ort_run.py) -- each under /usr/bin/time.

  python bench.py --carve build/release/tools/carve --models DIR [--names a,b] [--reps 3] [--iters 20]

DIR holds NAME.onnx and NAME.input.<input>.npy (make_models.py). Every configuration runs
--reps times, interleaved; the table gives medians. Prints a markdown table.
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def timed(cmd, env):
    """(wall s, user+sys s, peak RSS bytes) of one process."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as f:
        p = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", f.name, *cmd], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        wall, user, system, rss_kb = f.read().split()[-4:]
        return float(wall), float(user) + float(system), int(rss_kb) * 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--carve", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--names", default="")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--python", default=sys.executable, help="the Python with onnxruntime")
    args = ap.parse_args()
    names = args.names.split(",") if args.names else sorted(
        os.path.basename(f)[:-5] for f in glob.glob(os.path.join(args.models, "*.onnx")))
    env = dict(os.environ)
    rows = []
    for name in names:
        model = os.path.join(args.models, name + ".onnx")
        carve = [args.carve, "run", model, "--threads", "1", "--iters", str(args.iters)]
        for f in sorted(glob.glob(os.path.join(args.models, name + ".input.*.npy"))):
            carve += ["--input", f"{os.path.basename(f)[len(name) + 7:-4]}={f}"]
        ort = [args.python, os.path.join(HERE, "ort_run.py"), model, "1", str(args.iters)]
        runs = {"cold": [], "warm": [], "ort": []}
        for _ in range(args.reps):
            with tempfile.TemporaryDirectory(prefix="carve_startup_cache_") as cache:
                e = dict(env, CARVE_CACHE_DIR=cache)
                runs["cold"].append(timed(carve, e))
                runs["warm"].append(timed(carve, e))
            runs["ort"].append(timed(ort, env))
        med = {k: tuple(statistics.median(r[i] for r in v) for i in range(3)) for k, v in runs.items()}
        rows.append((name, med))
    print(f"| model | carve cold wall s / CPU s / peak MB | carve warm wall s / CPU s / peak MB | "
          f"ORT wall s / CPU s / peak MB | cold / ORT wall | warm / ORT wall | carve peak (cold, warm) / ORT peak |")
    print("|---|---|---|---|---|---|---|")
    for name, m in rows:
        cell = lambda t: f"{t[0]:.2f} / {t[1]:.2f} / {t[2] / 1e6:.0f}"
        print(f"| {name} | {cell(m['cold'])} | {cell(m['warm'])} | {cell(m['ort'])} | "
              f"{m['cold'][0] / m['ort'][0]:.2f}x | {m['warm'][0] / m['ort'][0]:.2f}x | "
              f"{max(m['cold'][2], m['warm'][2]) / m['ort'][2]:.2f}x |")


if __name__ == "__main__":
    main()
