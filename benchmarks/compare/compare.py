#!/usr/bin/env python3
"""Side-by-side benchmark of carve against ONNX Runtime (CPU) and PyTorch (CPU, eager),
plus the planner, dispatch and JIT rows from carve's Google Benchmark programs.
Run by scripts/bench-compare.sh with the benchmark venv's python (see docs/benchmarks.md).

Writes OUT/results.json and OUT/results.md and prints the markdown. Every ratio is
between figures measured in this run. Whole-process figures: each (model, framework)
runs in --procs separate processes, interleaved carve / ORT / torch so that load on the
machine hits all three alike; a process runs the model --iters times (first run included,
for every framework) and reports its median; the table shows the median over processes.
Peak RSS is the child's maximum resident set size from /usr/bin/time -f %M.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MODELS = ["resnet18", "mobilenet_v2", "bert", "gpt"]
# The kv_decoder size: the same as the exported gpt (vocab 1000, width 256, 8 heads,
# 4 layers, MLP 4x, 128 positions), prompt 64 tokens, greedy decode to position 127.
DECODER = dict(vocab=1000, d_model=256, heads=8, layers=4, mlp=1024, max_seq=128, prompt=64)


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return None if n == 0 else (xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2]))


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception:
        return ""


def run_child(cmd, env, timeout=900):
    """Runs cmd; returns (rc, stdout, stderr, wall seconds, peak RSS bytes); the child's
    CPU seconds (user + sys) are left in run_child.cpu. Peak RSS comes
    from /usr/bin/time (%M), not from os.wait4 here: a child forked from this (large, torch
    importing) process inherits its high-water mark across exec."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, \
            tempfile.NamedTemporaryFile("r") as rss_file:
        t = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%U %S\n%M", "-o", rss_file.name, *cmd], stdout=out, stderr=err, env=env,
                           timeout=timeout)
        wall = time.perf_counter() - t
        out.seek(0)
        err.seek(0)
        text = open(rss_file.name).read()
        m = re.findall(r"^(\d+)$", text, re.M)
        cpu = re.findall(r"^([\d.]+) ([\d.]+)$", text, re.M)
        run_child.cpu = float(cpu[-1][0]) + float(cpu[-1][1]) if cpu else None
        return p.returncode, out.read(), err.read(), wall, int(m[-1]) * 1024 if m else None


def child_env(threads):
    env = dict(os.environ)
    env.pop("CARVE_CACHE_DIR", None)  # with --no-cache (carve_model_run): every process compiles every kernel
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    return env


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("nan")
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


# ----------------------------------------------------------------------------- machine


def machine(args):
    lscpu = sh("lscpu")
    get = lambda k: (re.search(rf"^{k}:\s*(.+)$", lscpu, re.M) or [None, "?"])[1]
    mem = sh("grep MemTotal /proc/meminfo")
    os_name = sh(". /etc/os-release && echo $PRETTY_NAME")
    cache = os.path.join(args.build, "CMakeCache.txt")
    llvm = sh(f"grep -E '^LLVM_DIR' {cache}") if os.path.exists(cache) else ""
    # The LLVM carve links (not whatever llvm-config is on PATH).
    llvm_version = sh(f"ldd {args.carve} | grep -o 'libLLVM[^ ]*' | head -1") or llvm
    try:
        import onnxruntime
        ort_version = onnxruntime.__version__
    except Exception as e:
        ort_version = f"unavailable ({e})"
    import torch
    gpu = sh("nvidia-smi --query-gpu=name --format=csv,noheader")
    return {
        "date_utc": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": get("Model name"),
        "cpus": get("CPU\\(s\\)"),
        "threads_per_core": get("Thread\\(s\\) per core"),
        "cpu_flags_avx": " ".join(f for f in ("avx2", "avx512f", "fma") if re.search(rf"\b{f}\b", get("Flags"))),
        "memory": f"{int(mem.split()[1]) / 2 ** 20:.1f} GiB" if mem else "?",
        "os": os_name,
        "kernel": platform.release(),
        "compiler": sh("c++ --version | head -1"),
        "llvm": llvm_version or llvm,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "onnxruntime": ort_version,
        "numpy": np.__version__,
        "gpu": gpu or "none",
        "load_average_start": os.getloadavg(),
    }


# ----------------------------------------------------------------------------- models


def export_models(models_dir, names):
    """Exports the missing models with scripts/make_onnx_models.py's definitions (the same
    modules, seeds and inputs as its --full mode), into models_dir."""
    missing = [n for n in names if not os.path.exists(os.path.join(models_dir, n + ".onnx"))]
    if not missing:
        return
    os.makedirs(models_dir, exist_ok=True)
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    import make_onnx_models as mk
    for name, module, inputs, opset, in_names, out_names in mk.full_models():
        if name in missing:
            mk.export(module, name, inputs, opset, models_dir, in_names, out_names)


def model_inputs(models_dir, name):
    out = []
    for f in sorted(os.listdir(models_dir)):
        m = re.fullmatch(re.escape(name) + r"\.input\.(.+)\.npy", f)
        if m:
            out.append((m.group(1), os.path.join(models_dir, f)))
    return out


def carve_model_run(args, name, out_dir, extra=()):
    cmd = [args.carve, "run", os.path.join(args.models, name + ".onnx"), "--threads", str(args.threads),
           "--iters", str(args.iters), "--output-dir", out_dir, "--no-cache", *extra]
    for n, f in model_inputs(args.models, name):
        cmd += ["--input", f"{n}={f}"]
    rc, out, err, wall, rss = run_child(cmd, child_env(args.threads))
    m = re.search(r"ran '.*' (\d+) time\(s\) (.*): min ([\d.]+) ms, median ([\d.]+) ms", out)
    if rc != 0 or not m:
        return {"error": (err or out)[-400:], "cmd": " ".join(cmd)}
    c = re.search(r"process CPU time per run: min ([\d.]+) ms, median ([\d.]+) ms", out)
    cpu_ms = float(c.group(2)) if c else None
    return {"median_ms": float(m.group(4)), "min_ms": float(m.group(3)), "cpu_ms": cpu_ms, "mode": m.group(2),
            "wall_s": wall, "rss_bytes": rss, "cmd": " ".join(cmd)}


def peer_model_run(args, fw, name, out_dir):
    cmd = [sys.executable, os.path.join(HERE, "worker.py"), fw, "model", "--models", args.models, "--name", name,
           "--threads", str(args.threads), "--iters", str(args.iters), "--out", out_dir]
    rc, out, err, wall, rss = run_child(cmd, child_env(args.threads))
    if rc != 0:
        return {"error": err[-400:], "cmd": " ".join(cmd)}
    r = json.loads(out.strip().splitlines()[-1])
    lat = r.pop("latency_ms")
    cpu = r.pop("cpu_ms")
    return {"median_ms": median(lat), "min_ms": min(lat), "cpu_ms": median(cpu), "wall_s": wall, "rss_bytes": rss, "cmd": " ".join(cmd), **r}


def end_to_end(args, work):
    rows = {}
    for name in args.model_list:
        runs = {"carve": [], "ort": [], "torch": []}
        variant = args.variants.get(name)  # diagnostic: carve with other flags, same run
        if variant:
            runs["carve " + variant] = []
        outs = {fw: os.path.join(work, "outputs", name, fw.replace(" ", "")) for fw in runs}
        for p in range(args.procs):
            for fw in runs:
                print(f"  {name}: {fw} process {p + 1}/{args.procs}", file=sys.stderr, flush=True)
                if fw.startswith("carve"):
                    r = carve_model_run(args, name, outs[fw], fw.split()[1:])
                else:
                    r = peer_model_run(args, fw, name, outs[fw])
                runs[fw].append(r)
        row = {"runs": runs}
        for fw, rs in runs.items():
            ok = [r for r in rs if "error" not in r]
            row[fw] = {"median_ms": median([r["median_ms"] for r in ok]), "min_ms": min([r["min_ms"] for r in ok], default=None),
                       "cpu_ms": median([r["cpu_ms"] for r in ok if r.get("cpu_ms")]),
                       "rss_bytes": median([r["rss_bytes"] for r in ok]), "wall_s": median([r["wall_s"] for r in ok]),
                       "errors": [r["error"] for r in rs if "error" in r]}
        # Cross-check: every output against torch's (same module, same weights) and torch
        # against the reference make_onnx_models.py saved at export (proves the same weights).
        check = {}
        for f in sorted(os.listdir(outs["torch"])) if os.path.isdir(outs["torch"]) else []:
            ref = np.load(os.path.join(outs["torch"], f))
            for fw in ("carve", "ort"):
                path = os.path.join(outs[fw], f)
                if os.path.exists(path):
                    check.setdefault(f"{fw}_vs_torch", {})[f[:-4]] = rel_err(np.load(path), ref)
            exported = os.path.join(args.models, f"{name}.output.{f}")
            if os.path.exists(exported):
                check.setdefault("torch_vs_export", {})[f[:-4]] = rel_err(ref, np.load(exported))
        row["check"] = check
        c, o, t = row["carve"]["median_ms"], row["ort"]["median_ms"], row["torch"]["median_ms"]
        row["speedup_vs_ort"] = o / c if c and o else None
        row["speedup_vs_torch"] = t / c if c and t else None
        c, o, t = row["carve"]["cpu_ms"], row["ort"]["cpu_ms"], row["torch"]["cpu_ms"]
        row["cpu_speedup_vs_ort"] = o / c if c and o else None
        row["cpu_speedup_vs_torch"] = t / c if c and t else None
        if variant:
            v = row["carve " + variant]
            row["variant"] = {"flags": variant, "speedup_vs_ort": o / v["cpu_ms"] if v["cpu_ms"] and o else None,
                              "speedup_vs_carve": c / v["cpu_ms"] if v["cpu_ms"] and c else None}
        rows[name] = row
    return rows


# ----------------------------------------------------------------------------- decoder


def decoder_rows(args, work):
    dump = os.path.join(work, "decoder")
    cfg_args = []
    for k, v in DECODER.items():
        cfg_args += [f"--{k.replace('_', '-')}", str(v)]
    bench = os.path.join(args.build, "examples", "kv_decoder_bench")
    if not os.path.exists(bench):
        return {"error": f"{bench} not built"}
    base = [bench, *cfg_args, "--threads", str(args.threads), "--reps", str(args.decoder_reps)]
    rc, out, err, wall, rss = run_child(base + ["--dump", dump], child_env(args.threads))
    if rc != 0:
        return {"error": err[-400:]}
    first = json.loads(out)
    with open(os.path.join(dump, "config.json"), "w") as f:
        json.dump(first, f)
    # ONNX export of the same module (prefill + step with past keys/values) for ORT.
    sys.path.insert(0, HERE)
    import decoder
    import torch
    model = decoder.KvDecoder(first["config"], decoder.load_weights(dump)).eval()
    decoder.export_onnx(model, DECODER["prompt"], dump)
    runs = {"carve": [], "ort": [], "torch": []}
    for p in range(args.procs):
        for fw in runs:
            print(f"  decoder: {fw} process {p + 1}/{args.procs}", file=sys.stderr, flush=True)
            if fw == "carve":
                rc, out, err, wall, rss = run_child(base, child_env(args.threads))
                r = json.loads(out) if rc == 0 else {"error": err[-400:]}
            else:
                cmd = [sys.executable, os.path.join(HERE, "worker.py"), fw, "decoder", "--dump", dump, "--onnx-dir",
                       dump, "--threads", str(args.threads), "--reps", str(args.decoder_reps), "--out",
                       os.path.join(dump, fw)]
                rc, out, err, wall, rss = run_child(cmd, child_env(args.threads))
                r = json.loads(out.strip().splitlines()[-1]) if rc == 0 else {"error": err[-400:]}
            r.update(wall_s=wall, rss_bytes=rss)
            runs[fw].append(r)
    row = {"config": first["config"], "decode_steps": first["decode_steps"], "runs": runs}
    for fw, rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        row[fw] = {"prefill_ms": median([median(r["prefill_ms"]) for r in ok]),
                   "decode_tokens_per_s": median([median(r["decode_tokens_per_s"]) for r in ok]),
                   "prefill_cpu_ms": median([median(r["prefill_cpu_ms"]) for r in ok]),
                   "decode_cpu_tokens_per_s": median([median(r["decode_cpu_tokens_per_s"]) for r in ok]),
                   "rss_bytes": median([r["rss_bytes"] for r in ok]), "wall_s": median([r["wall_s"] for r in ok]),
                   "generated": ok[0]["generated"] if ok else None, "errors": [r["error"] for r in rs if "error" in r]}
    check = {}
    for fw in ("ort", "torch"):
        d = os.path.join(dump, fw)
        if os.path.isdir(d):
            for f in ("prefill_logits", "decode0_logits"):
                check.setdefault(f"carve_vs_{fw}", {})[f] = rel_err(np.load(os.path.join(dump, f + ".npy")),
                                                                   np.load(os.path.join(d, f + ".npy")))
            check[f"same_tokens_as_{fw}"] = row[fw]["generated"] == row["carve"]["generated"]
    row["check"] = check
    c = row["carve"]
    row["prefill_speedup_vs_ort"] = row["ort"]["prefill_ms"] / c["prefill_ms"] if row["ort"]["prefill_ms"] else None
    row["prefill_speedup_vs_torch"] = row["torch"]["prefill_ms"] / c["prefill_ms"] if row["torch"]["prefill_ms"] else None
    row["decode_speedup_vs_ort"] = c["decode_tokens_per_s"] / row["ort"]["decode_tokens_per_s"] if row["ort"]["decode_tokens_per_s"] else None
    row["decode_speedup_vs_torch"] = c["decode_tokens_per_s"] / row["torch"]["decode_tokens_per_s"] if row["torch"]["decode_tokens_per_s"] else None
    for peer in ("ort", "torch"):
        p = row[peer]
        row[f"prefill_cpu_speedup_vs_{peer}"] = p["prefill_cpu_ms"] / c["prefill_cpu_ms"] if p["prefill_cpu_ms"] and c["prefill_cpu_ms"] else None
        row[f"decode_cpu_speedup_vs_{peer}"] = c["decode_cpu_tokens_per_s"] / p["decode_cpu_tokens_per_s"] if p["decode_cpu_tokens_per_s"] and c["decode_cpu_tokens_per_s"] else None
    return row


# ----------------------------------------------------------------------------- planner + gbench


def planner_rows(args, work):
    out = {"minimalloc": {}, "models": {}}
    mm = args.minimalloc
    files = sorted(f for f in os.listdir(mm) if f.startswith("challenging__")) if os.path.isdir(mm) else []
    for f in files:
        letter = f.split("__")[1][0]
        js = os.path.join(work, f"plan_{letter}.json")
        rc, o, e, wall, rss = run_child([args.carve, "plan", os.path.join(mm, f), "--strategy", "all", "--time-limit",
                                         str(args.exact_limit), "--json", js], os.environ.copy())
        out["minimalloc"][letter] = json.load(open(js)) if rc == 0 else {"error": (e or o)[-300:]}
    for name in args.model_list:
        js = os.path.join(work, f"plan_{name}.json")
        rc, o, e, wall, rss = run_child([args.carve, "plan", os.path.join(args.models, name + ".onnx"), "--no-weights",
                                         "--json", js], os.environ.copy())
        out["models"][name] = json.load(open(js)) if rc == 0 else {"error": (e or o)[-300:]}
    return out


def gbench(args, work, program, flt=None):
    path = os.path.join(args.build, "benchmarks", program)
    if not os.path.exists(path):
        return {"error": f"{path} not built"}
    js = os.path.join(work, program + ".json")
    cmd = [path, f"--benchmark_out={js}", "--benchmark_out_format=json"]
    if flt:
        cmd.append(f"--benchmark_filter={flt}")
    rc, o, e, wall, rss = run_child(cmd, os.environ.copy())
    if rc != 0:
        return {"error": (e or o)[-300:]}
    return {b["name"]: b for b in json.load(open(js))["benchmarks"]}


# ----------------------------------------------------------------------------- markdown


def fmt_ms(x):
    return "—" if x is None else (f"{x:.1f}" if x >= 10 else f"{x:.2f}")


def fmt_mb(b):
    return "—" if b is None else f"{b / 1e6:.0f}"


def fmt_ratio(r):
    if r is None:
        return "—"
    return f"**{r:.2f}× (carve slower)**" if r < 0.95 else (f"{r:.2f}× (carve faster)" if r > 1.05 else f"{r:.2f}× (even)")


def fmt_err(d):
    return ", ".join(f"{v:.1e}" for v in d.values()) if d else "—"


def time_of(b, unit="ns"):
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
    return b["cpu_time"] * scale[b["time_unit"]] / scale[unit], b["real_time"] * scale[b["time_unit"]] / scale[unit]


def markdown(res, args):
    m = res["machine"]
    L = []
    L.append(f"Date: {m['date_utc']}. Command: `{res['command']}`.\n")
    L.append(f"Machine: {m['cpu']}, {m['cpus']} CPUs ({m['threads_per_core']} thread/core; {m['cpu_flags_avx']}), "
             f"{m['memory']} RAM, {m['os']} (kernel {m['kernel']}), {m['compiler']}, LLVM {m['llvm']}; "
             f"PyTorch {m['torch']} (Debian, BLAS: {res.get('torch_blas', '?')}), ONNX Runtime {m['onnxruntime']} (PyPI), "
             f"numpy {m['numpy']}, Python {m['python']}. GPU: {m['gpu']}. Load average at start "
             f"{m['load_average_start'][0]:.1f}, at end {m['load_average_end'][0]:.1f} (other jobs share the machine).\n")
    L.append(f"Threads: {args.threads} for every framework (carve `--threads`, ORT `intra_op_num_threads` with "
             f"`ORT_ENABLE_ALL`, torch `set_num_threads` + OMP/OpenBLAS env). Speed-up = peer time / carve time "
             f"(tokens/s: carve / peer), > 1 means carve is faster, from the medians (the minimum is shown in brackets: on a loaded machine it is the better estimate of unloaded speed); medians of {args.procs} processes × "
             f"{args.iters} in-process runs (first run included for all). CPU ms/run: the process's CPU time (all threads) per run, median over the same runs (carve: `carve run` prints it; peers: time.process_time around each run); on a shared machine it is less sensitive than wall time to other jobs.\n")
    e2e = res.get("end_to_end", {})
    if e2e:
        L.append("### End to end, batch 1, CPU\n")
        L.append("Wall time per run (median over processes of each process's median; minimum in brackets) and "
                 "CPU time per run; speed-up = peer / carve, so < 1 means carve is slower.\n")
        L.append("| model | carve ms | ORT ms | torch ms | carve vs ORT | carve vs torch | CPU ms carve / ORT / torch "
                 "| CPU: carve vs ORT | CPU: carve vs torch |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        mm = lambda x: f"{fmt_ms(x['median_ms'])} ({fmt_ms(x['min_ms'])})"
        for name, r in e2e.items():
            c, o, t = r["carve"], r["ort"], r["torch"]
            L.append(f"| {name} | {mm(c)} | {mm(o)} | {mm(t)} | {fmt_ratio(r['speedup_vs_ort'])} | "
                     f"{fmt_ratio(r['speedup_vs_torch'])} | {fmt_ms(c['cpu_ms'])} / {fmt_ms(o['cpu_ms'])} / "
                     f"{fmt_ms(t['cpu_ms'])} | {fmt_ratio(r['cpu_speedup_vs_ort'])} | {fmt_ratio(r['cpu_speedup_vs_torch'])} |")
        L.append("\n| model | peak RSS MB carve / ORT / torch | process wall s carve / ORT / torch "
                 "| max rel err vs torch: carve | ORT |")
        L.append("|---|---|---|---|---|")
        for name, r in e2e.items():
            c, o, t = r["carve"], r["ort"], r["torch"]
            L.append(f"| {name} | {fmt_mb(c['rss_bytes'])} / {fmt_mb(o['rss_bytes'])} / {fmt_mb(t['rss_bytes'])} | "
                     f"{c['wall_s'] or 0:.1f} / {o['wall_s'] or 0:.1f} / {t['wall_s'] or 0:.1f} | "
                     f"{fmt_err(r['check'].get('carve_vs_torch'))} | {fmt_err(r['check'].get('ort_vs_torch'))} |")
        diag = [(n, r) for n, r in e2e.items() if r.get("variant")]
        if diag:
            L.append("\nDiagnostic rows (carve with other flags, measured in the same interleaved run; see the "
                     "closing note):\n")
            L.append("| model | carve flags | CPU ms/run | wall ms median (min) | vs default carve (CPU) | vs ORT (CPU) |")
            L.append("|---|---|---|---|---|---|")
            for n, r in diag:
                v = r["carve " + r["variant"]["flags"]]
                L.append(f"| {n} | `{r['variant']['flags']}` | {fmt_ms(v['cpu_ms'])} | {mm(v)} | "
                         f"{r['variant']['speedup_vs_carve']:.2f}× faster | {fmt_ratio(r['variant']['speedup_vs_ort'])} |")
        same = all(all(v == 0.0 for v in r["check"].get("torch_vs_export", {}).values()) for r in e2e.values())
        L.append(f"\nSame weights: torch rebuilds each module with make_onnx_models.py's seeds; its outputs "
                 f"{'equal' if same else 'DIFFER from'} the ones saved at export bit for bit. All three read the same "
                 f"input .npy files; carve and ORT the same .onnx file. Process wall: the whole process, i.e. "
                 f"start-up and import, carve's JIT compile of every kernel (no disk cache) / ORT's session build / "
                 f"torch's module construction, and the {args.iters} runs. torch's RSS includes the Python "
                 f"interpreter and torch/torchvision/onnx imports; ORT's the interpreter, numpy and onnxruntime.\n")
        errors = {f"{n}/{fw}": r[fw]["errors"] for n, r in e2e.items() for fw in ("carve", "ort", "torch") if r[fw]["errors"]}
        if errors:
            L.append(f"Errors: {json.dumps(errors)[:1000]}\n")
    d = res.get("decoder")
    if d and "error" not in d:
        cfg = d["config"]
        L.append(f"### GPT-style decoder with KV cache (examples/kv_decoder at vocab {cfg['vocab']}, width "
                 f"{cfg['d_model']}, {cfg['heads']} heads, {cfg['layers']} layers, MLP {cfg['mlp']}, "
                 f"{cfg['max_seq']} positions)\n")
        L.append(f"Prefill of a {cfg['prompt']}-token prompt, then greedy decode of {d['decode_steps']} tokens, one "
                 f"step per token with the K/V caches (carve: handles of max_seq rows, masked; ORT: "
                 f"`decoder_step.onnx` with past keys/values as inputs and present ones as outputs; torch: the same "
                 f"module in eager mode, torch.cat caches). Same weights in all three (kv_decoder_bench --dump). "
                 f"Median of {args.decoder_reps} reps per process, median over processes.\n")
        L.append("| | carve | ORT | torch | carve vs ORT | carve vs torch |")
        L.append("|---|---|---|---|---|---|")
        c, o, t = d["carve"], d["ort"], d["torch"]
        L.append(f"| prefill ms | {fmt_ms(c['prefill_ms'])} | {fmt_ms(o['prefill_ms'])} | {fmt_ms(t['prefill_ms'])} | "
                 f"{fmt_ratio(d['prefill_speedup_vs_ort'])} | {fmt_ratio(d['prefill_speedup_vs_torch'])} |")
        f1 = lambda x: "—" if x is None else f"{x:.0f}"
        L.append(f"| decode tokens/s | {f1(c['decode_tokens_per_s'])} | {f1(o['decode_tokens_per_s'])} | "
                 f"{f1(t['decode_tokens_per_s'])} | {fmt_ratio(d['decode_speedup_vs_ort'])} | "
                 f"{fmt_ratio(d['decode_speedup_vs_torch'])} |")
        L.append(f"| prefill CPU ms | {fmt_ms(c['prefill_cpu_ms'])} | {fmt_ms(o['prefill_cpu_ms'])} | {fmt_ms(t['prefill_cpu_ms'])} | "
                 f"{fmt_ratio(d['prefill_cpu_speedup_vs_ort'])} | {fmt_ratio(d['prefill_cpu_speedup_vs_torch'])} |")
        L.append(f"| decode tokens per CPU second | {f1(c['decode_cpu_tokens_per_s'])} | {f1(o['decode_cpu_tokens_per_s'])} | "
                 f"{f1(t['decode_cpu_tokens_per_s'])} | {fmt_ratio(d['decode_cpu_speedup_vs_ort'])} | "
                 f"{fmt_ratio(d['decode_cpu_speedup_vs_torch'])} |")
        L.append(f"| process wall s | {c['wall_s']:.1f} | {o['wall_s']:.1f} | {t['wall_s']:.1f} | | |")
        L.append(f"| peak RSS MB | {fmt_mb(c['rss_bytes'])} | {fmt_mb(o['rss_bytes'])} | {fmt_mb(t['rss_bytes'])} | | |")
        ch = d["check"]
        L.append(f"\nCross-check: carve vs torch max rel err {fmt_err(ch.get('carve_vs_torch'))} (prefill, first "
                 f"step logits), carve vs ORT {fmt_err(ch.get('carve_vs_ort'))}; same greedy tokens: torch "
                 f"{ch.get('same_tokens_as_torch')}, ORT {ch.get('same_tokens_as_ort')}.\n")
    elif d:
        L.append(f"### GPT-style decoder with KV cache\n\nnot measured: {d['error']}\n")
    p = res.get("planner")
    if p:
        L.append("### Planner: arena / lower bound and plan time per strategy, MiniMalloc challenging set\n")
        L.append(f"`carve plan FILE --strategy all --time-limit {args.exact_limit}`; each cell: arena / lower bound "
                 f"(plan time). exact stops at the time limit.\n")
        for r in list(p["minimalloc"].values()) + list(p["models"].values()):
            for x in r.get("results", []):
                if x["strategy"].startswith("best("):
                    x["best_of"], x["strategy"] = x["strategy"][5:-1], "best"
        strategies = []
        for r in p["minimalloc"].values():
            for x in r.get("results", []):
                if x["strategy"] not in strategies:
                    strategies.append(x["strategy"])
        L.append("| instance | buffers | lower bound | " + " | ".join(strategies) + " |")
        L.append("|---|---|---|" + "---|" * len(strategies))
        for letter, r in p["minimalloc"].items():
            if "error" in r:
                L.append(f"| {letter} | error: {r['error'][:80]} |")
                continue
            cells = {s["strategy"]: f"{s['ratio_to_lower_bound']:.3f} ({s['plan_seconds'] * 1e3:.2f} ms)"
                     + ("" if s["valid"] else " INVALID") for s in r["results"]}
            L.append(f"| {letter} | {r['buffers']} | {r['lower_bound_bytes']} | "
                     + " | ".join(cells.get(s, "—") for s in strategies) + " |")
        L.append("\n### Planner: exported model graphs (`carve plan MODEL.onnx --no-weights`)\n")
        L.append("| model | buffers | lower bound MB | " + " | ".join(strategies) + " |")
        L.append("|---|---|---|" + "---|" * len(strategies))
        for name, r in p["models"].items():
            if "error" in r:
                L.append(f"| {name} | error: {r['error'][:80]} |")
                continue
            cells = {s["strategy"]: f"{s['arena_bytes'] / 1e6:.2f} MB ({s['plan_seconds'] * 1e6:.0f} µs)" for s in r["results"]}
            L.append(f"| {name} | {r['buffers']} | {r['lower_bound_bytes'] / 1e6:.2f} | "
                     + " | ".join(cells.get(s, "—") for s in strategies) + " |")
    sc = res.get("gbench", {}).get("bench_planner_scaling", {})
    if sc and "error" not in sc:
        L.append("\n### Planner: scaling with buffer count (bench_planner_scaling, CPU time per plan; arena / lower bound)\n")
        sizes = sorted({int(k.split("/")[2]) for k in sc if k.startswith("PlannerScaling/")})
        strats = []
        for k in sc:
            if k.startswith("PlannerScaling/") and k.split("/")[1] not in strats:
                strats.append(k.split("/")[1])
        L.append("| strategy | " + " | ".join(f"{n} buffers" for n in sizes) + " |")
        L.append("|---|" + "---|" * len(sizes))
        for s in strats:
            cells = []
            for n in sizes:
                b = sc.get(f"PlannerScaling/{s}/{n}")
                cells.append("—" if not b else f"{time_of(b, 'ms')[0]:.2f} ms ({b.get('arena_over_lb', 0):.3f})")
            L.append(f"| {s} | " + " | ".join(cells) + " |")
    g = res.get("gbench", {})
    dsp = g.get("bench_dispatch", {})
    if dsp and "error" not in dsp:
        L.append("\n### Dispatch overhead (bench_dispatch, 1000 empty-kernel launches; ns per launch)\n")
        L.append("| graph | direct call loop (CPU) | sequential executor (CPU) | parallel 1 / 2 / 4 threads (wall) | sequential / direct |")
        L.append("|---|---|---|---|---|")
        for graph in ("chain", "wide"):
            per = lambda n, i=0: (time_of(dsp[n])[i] / 1000.0) if n in dsp else None
            dct, seq = per(f"BM_Direct/{graph}"), per(f"BM_Sequential/{graph}")
            par = [per(f"BM_Parallel/{graph}/{t}/real_time", 1) for t in (1, 2, 4)]
            L.append(f"| {graph} | {dct:.1f} | {seq:.1f} | " + " / ".join("—" if x is None else f"{x:.1f}" for x in par)
                     + f" | {seq / dct:.1f}× |")
        bs, bp = dsp.get("BM_BranchesSequential/real_time"), dsp.get("BM_BranchesParallel/2/real_time")
        if bs and bp:
            L.append(f"\nTwo independent 4 MiB branches: sequential {time_of(bs, 'ms')[1]:.2f} ms, parallel on 2 threads "
                     f"{time_of(bp, 'ms')[1]:.2f} ms (wall): {time_of(bs)[1] / time_of(bp)[1]:.2f}× speed-up.\n")
    je = g.get("bench_jit_elementwise", {})
    if je and "error" not in je:
        L.append("\n### JIT compile time and elementwise vs memcpy (bench_jit_elementwise)\n")
        L.append("| compile of `relu(x*w+c)` | wall | CPU |")
        L.append("|---|---|---|")
        for label, n in (("cold (IR + O3 + codegen)", "BM_CompileCold/iterations:40"),
                         ("memory-cache hit", "BM_CompileMemoryHit"),
                         ("disk-cache hit, fresh JitCompiler", "BM_CompileDiskHit/iterations:20")):
            if n in je:
                cpu, wall = time_of(je[n], "ms")
                L.append(f"| {label} | {wall:.3f} ms | {cpu:.3f} ms |")
        L.append("\n| array | JIT f32 add GB/s (3 × bytes) | memcpy GB/s (2 × bytes) | add / memcpy |")
        L.append("|---|---|---|---|")
        for n in (8192, 67108864):
            a, mc = je.get(f"BM_JitAddF32/{n}"), je.get(f"BM_Memcpy/{n}")
            if a and mc:
                ga, gm = a.get("bytes_per_second", 0) / 1e9, mc.get("bytes_per_second", 0) / 1e9
                L.append(f"| {n // 1024 if n < 1e6 else n // 2 ** 20} {'KiB' if n < 1e6 else 'MiB'} per array | "
                         f"{ga:.1f} | {gm:.1f} | {fmt_ratio(ga / gm)} |")
    jm = g.get("bench_jit_matmul", {})
    if jm and "error" not in jm:
        L.append("\n### f32 matmul vs OpenBLAS, single thread (bench_jit_matmul, GFLOP/s from CPU time)\n")
        L.append("| size | carve | OpenBLAS | carve / OpenBLAS |")
        L.append("|---|---|---|---|")
        for n in (256, 512, 1024):
            a, b = jm.get(f"BM_carve_matmul_f32/{n}"), jm.get(f"BM_openblas_sgemm_1thread/{n}")
            if a and b:
                L.append(f"| {n} | {a['GFLOP/s'] / 1e9:.1f} | {b['GFLOP/s'] / 1e9:.1f} | {fmt_ratio(a['GFLOP/s'] / b['GFLOP/s'])} |")
        conv = [k for k in jm if k.startswith("BM_carve_conv2d")]
        if conv:
            L.append("\n| carve conv2d (batch 1, f32) | CPU time | GFLOP/s |")
            L.append("|---|---|---|")
            for k in conv:
                L.append(f"| {k.split('/', 1)[1]} | {time_of(jm[k], 'ms')[0]:.2f} ms | {jm[k]['GFLOP/s'] / 1e9:.1f} |")
    L.append("\n### GPU\n")
    L.append(res.get("gpu_note", "not measured (no GPU in this run)") + "\n")
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build", "release"))
    ap.add_argument("--carve", help="carve CLI (default BUILD/tools/carve)")
    ap.add_argument("--models", default=os.path.join(REPO, "build", "bench-models"))
    ap.add_argument("--out", default=os.path.join(REPO, "build", "bench-results"))
    ap.add_argument("--minimalloc", default=os.path.join(os.environ["CARVE_SHARED_DIR"], "data", "minimalloc")
                    if "CARVE_SHARED_DIR" in os.environ else os.path.join(REPO, "tests", "data", "minimalloc"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--decoder-reps", type=int, default=3)
    ap.add_argument("--exact-limit", type=float, default=5.0)
    ap.add_argument("--model-list", default=",".join(MODELS))
    ap.add_argument("--variant", action="append", default=None, metavar="MODEL:FLAGS",
                    help="also run carve with FLAGS on MODEL (diagnostic row); default mobilenet_v2:--no-inplace")
    ap.add_argument("--skip", default="", help="comma list of: e2e,decoder,planner,gbench")
    args = ap.parse_args()
    args.carve = args.carve or os.path.join(args.build, "tools", "carve")
    args.model_list = [m for m in args.model_list.split(",") if m]
    variants = args.variant if args.variant is not None else ["mobilenet_v2:--no-inplace"]
    args.variants = dict(v.split(":", 1) for v in variants if ":" in v)
    skip = set(args.skip.split(","))
    work = os.path.join(args.out, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    res = {"command": "scripts/bench-compare.sh " + " ".join(sys.argv[1:]), "args": vars(args)}
    res["command"] = os.environ.get("CARVE_BENCH_COMMAND", res["command"])
    res["machine"] = machine(args)
    if "e2e" not in skip or "planner" not in skip:
        export_models(args.models, args.model_list)
    if "e2e" not in skip:
        print("end to end ...", file=sys.stderr, flush=True)
        res["end_to_end"] = end_to_end(args, work)
        tb = next((r["runs"]["torch"][0].get("blas") for r in res["end_to_end"].values() if r["runs"]["torch"]), None)
        if tb:
            res["torch_blas"] = ", ".join(os.path.basename(x) for x in tb)
    if "decoder" not in skip:
        print("decoder ...", file=sys.stderr, flush=True)
        res["decoder"] = decoder_rows(args, work)
    if "planner" not in skip:
        print("planner ...", file=sys.stderr, flush=True)
        res["planner"] = planner_rows(args, work)
    if "gbench" not in skip:
        res["gbench"] = {}
        for prog, flt in (("bench_planner_scaling", "PlannerScaling"), ("bench_dispatch", None),
                          ("bench_jit_elementwise", None), ("bench_jit_matmul", None)):
            print(f"{prog} ...", file=sys.stderr, flush=True)
            res["gbench"][prog] = gbench(args, work, prog, flt)
    gpu = res["machine"]["gpu"]
    res["gpu_note"] = ("not measured (no GPU in this run)" if gpu == "none" else
                       f"not measured: a GPU ({gpu}) is present but the CUDA backend has no end-to-end path yet")
    res["machine"]["load_average_end"] = os.getloadavg()
    md = markdown(res, args)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
