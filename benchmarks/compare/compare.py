#!/usr/bin/python3
"""Side-by-side benchmark of carve against the CPU peers: ONNX Runtime, OpenVINO, IREE
and PyTorch (eager), plus the decoder, planner, dispatch and JIT rows from carve's
programs. Run by scripts/bench-compare.sh (see docs/benchmarks.md, "Side by side").

Two Python interpreters: this script and the torch worker run on /usr/bin/python3
(Debian's torch 1.13 needs Debian's numpy 1.x); the ORT, OpenVINO and IREE workers run on
--peer-python, the venv build/bench-venv with PyPI's wheels and their own numpy 2.x. The
two never share a process, so neither numpy has to suit the other's packages.

Writes OUT/results.json and OUT/results.md and prints the markdown. Every ratio is
between figures measured in this run. Whole-process figures: each (model, threads,
framework) runs in --procs separate processes, interleaved carve / ORT / OpenVINO /
IREE / torch so that load on the machine hits all alike; a process runs the model
--iters times (first run included, for every framework) and reports its median; the
table shows the median over processes. IREE's module is compiled ahead of time, once per
model (cached under MODELS/iree), outside the timed processes. Peak RSS is the child's
maximum resident set size from /usr/bin/time -f %M.
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
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))
import make_layer_models  # noqa: E402  (onnx + numpy only)

MODELS = ["resnet18", "mobilenet_v2", "bert", "gpt"]
FRAMEWORKS = ["carve", "ort", "openvino", "iree", "torch"]
NAMES = {"carve": "carve", "ort": "ORT", "openvino": "OpenVINO", "iree": "IREE", "torch": "torch"}
# carve's figure is compared with the faster of these two (the strongest CPU runtimes).
BEST_OF = ("ort", "openvino")
# The kv_decoder size: the same as the exported gpt (vocab 1000, width 256, 8 heads,
# 4 layers, MLP 4x, 128 positions), prompt 64 tokens, greedy decode to position 127.
DECODER = dict(vocab=1000, d_model=256, heads=8, layers=4, mlp=1024, max_seq=128, prompt=64)
# The decoder's peers, each run where --frameworks names it (IREE has no decoder row).
DECODER_PEERS = ("ort", "openvino", "torch")


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return None if n == 0 else (xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2]))


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception:
        return ""


def first_error_line(text):
    """The line that says what went wrong: the first diagnostic with 'error:' in it (MLIR's
    'file:line:col: error: ...', a compiler's), else the last Python exception line
    ('onnx...ValidationError: ...'), else the last non-empty line (carve's own message)."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for l in lines:
        if re.search(r"\berror:", l, re.I):
            return l[:400]
    exc = [l for l in lines if re.match(r"^[\w.]*(Error|Exception|Exit)\b[^:]*:", l)]
    if exc:
        return exc[-1][:400]
    return lines[-1][:400] if lines else "(no output)"


def run_child(cmd, env, timeout=900):
    """Runs cmd; returns (rc, stdout, stderr, wall seconds, peak RSS bytes); the child's
    CPU seconds (user + sys) are left in run_child.cpu. Peak RSS comes
    from /usr/bin/time (%M), not from os.wait4 here: a child forked from this (large, torch
    importing) process inherits its high-water mark across exec."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, \
            tempfile.NamedTemporaryFile("r") as rss_file:
        t = time.perf_counter()
        try:
            p = subprocess.run(["/usr/bin/time", "-f", "%U %S\n%M", "-o", rss_file.name, *cmd], stdout=out, stderr=err,
                               env=env, timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = 124
            err.write(f"\nerror: timed out after {timeout} s\n")
        wall = time.perf_counter() - t
        out.seek(0)
        err.seek(0)
        text = open(rss_file.name).read()
        m = re.findall(r"^(\d+)$", text, re.M)
        cpu = re.findall(r"^([\d.]+) ([\d.]+)$", text, re.M)
        run_child.cpu = float(cpu[-1][0]) + float(cpu[-1][1]) if cpu else None
        return rc, out.read(), err.read(), wall, int(m[-1]) * 1024 if m else None


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


def peer_versions(args):
    """The PyPI packages as the venv's interpreter sees them (this interpreter has other
    ones, or none)."""
    code = ("import importlib.metadata as m, json, sys; v = {}\n"
            "for p in ('onnxruntime', 'openvino', 'iree-base-compiler', 'iree-base-runtime', 'numpy', 'onnx'):\n"
            "    try: v[p] = m.version(p)\n"
            "    except Exception as e: v[p] = 'unavailable'\n"
            "v['python'] = sys.version.split()[0]; print(json.dumps(v))")
    try:
        p = subprocess.run([args.peer_python, "-c", code], capture_output=True, text=True, timeout=60)
        return json.loads(p.stdout)
    except Exception as e:
        return {"error": f"{args.peer_python}: {e}"}


def machine(args):
    lscpu = sh("lscpu")
    get = lambda k: (re.search(rf"^{k}:\s*(.+)$", lscpu, re.M) or [None, "?"])[1]
    mem = sh("grep MemTotal /proc/meminfo")
    os_name = sh(". /etc/os-release && echo $PRETTY_NAME")
    cache = os.path.join(args.build, "CMakeCache.txt")
    llvm = sh(f"grep -E '^LLVM_DIR' {cache}") if os.path.exists(cache) else ""
    # The LLVM carve links (not whatever llvm-config is on PATH).
    llvm_version = sh(f"ldd {args.carve} | grep -o 'libLLVM[^ ]*' | head -1") or llvm
    import torch
    peers = peer_versions(args)
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
        "numpy": np.__version__,
        "onnxruntime": peers.get("onnxruntime", "?"),
        "openvino": peers.get("openvino", "?"),
        "iree": f"{peers.get('iree-base-compiler', '?')} (runtime {peers.get('iree-base-runtime', '?')})",
        "peer_numpy": peers.get("numpy", "?"),
        "peer_python": peers.get("python", "?"),
        "peers": peers,
        "gpu": gpu or "none",
        "load_average_start": os.getloadavg(),
    }


# ----------------------------------------------------------------------------- models


def export_models(models_dir, names):
    """Writes the missing models into models_dir: the single layers with
    make_layer_models.py, the rest with scripts/make_onnx_models.py's definitions (the same
    modules, seeds and inputs as its --full mode)."""
    missing = [n for n in names if not os.path.exists(os.path.join(models_dir, n + ".onnx"))]
    if not missing:
        return
    os.makedirs(models_dir, exist_ok=True)
    layers = [n for n in missing if n in make_layer_models.LAYERS]
    if layers:
        make_layer_models.write(models_dir, layers)
    rest = [n for n in missing if n not in layers]
    if rest:
        import make_onnx_models as mk
        for name, module, inputs, opset, in_names, out_names in mk.full_models(rest):
            mk.export(module, name, inputs, opset, models_dir, in_names, out_names)
        unknown = [n for n in rest if not os.path.exists(os.path.join(models_dir, n + ".onnx"))]
        if unknown:
            sys.exit(f"compare.py: no definition for model(s) {', '.join(unknown)} (known: "
                     f"{', '.join(mk.FULL + list(make_layer_models.LAYERS))})")


def model_inputs(models_dir, name):
    out = []
    for f in sorted(os.listdir(models_dir)):
        m = re.fullmatch(re.escape(name) + r"\.input\.(.+)\.npy", f)
        if m:
            out.append((m.group(1), os.path.join(models_dir, f)))
    return out


IREE_RETRY_OPSET = 17
# iree-compile for llvm-cpu on this CPU (what `-march=native` is to carve's JIT).
IREE_COMPILE_FLAGS = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                      "--iree-llvmcpu-target-cpu=host"]


def iree_prepare(args, name):
    """Imports MODELS/NAME.onnx with iree-import-onnx and compiles it with iree-compile for
    llvm-cpu on this host's CPU. Where that fails as exported, it tries once more with the
    importer's --opset-version IREE_RETRY_OPSET (the ONNX version converter first): IREE's
    ONNX lowerings cover some operators only in their newer forms (densenet121's
    BatchNormalization at opset 13 does not compile, at 17 it does). Returns {"vmfb": path}
    (with "retry": the first error, when the upgrade was needed) or {"error": first error
    line, "stage": "import" | "compile", "retry": the upgraded attempt's error}. Cached
    under MODELS/iree, failures included, keyed by the IREE version, the .onnx file and
    the CPU (the module is compiled for this one)."""
    onnx_path = os.path.join(args.models, name + ".onnx")
    cache = os.path.join(args.models, "iree")
    os.makedirs(cache, exist_ok=True)
    st = os.stat(onnx_path)
    key = {"iree": args.machine["iree"], "onnx": [st.st_size, st.st_mtime], "cpu": args.machine["cpu"],
           "flags": IREE_COMPILE_FLAGS, "retry_opset": IREE_RETRY_OPSET}
    stamp = os.path.join(cache, name + ".json")
    if os.path.exists(stamp):
        old = json.load(open(stamp))
        if old.get("key") == key and ("error" in old["result"] or os.path.exists(old["result"]["vmfb"])):
            return old["result"]
    print(f"  {name}: iree import + compile", file=sys.stderr, flush=True)
    result = iree_build(args, name, [])
    if "error" in result:
        print(f"  {name}: iree: {result['error'][:200]}; again with --opset-version {IREE_RETRY_OPSET}",
              file=sys.stderr, flush=True)
        retry = iree_build(args, name, ["--opset-version", str(IREE_RETRY_OPSET)])
        if "error" in retry:
            result["retry"] = f"with --opset-version {IREE_RETRY_OPSET}: {retry['stage']}: {retry['error']}"
        else:
            retry["retry"] = f"as exported: {result['stage']}: {result['error']}"
            result = retry
    with open(stamp, "w") as f:
        json.dump({"key": key, "result": result}, f)
    return result


def iree_build(args, name, import_flags):
    bindir = os.path.dirname(args.peer_python)
    onnx_path = os.path.join(args.models, name + ".onnx")
    mlir, vmfb = (os.path.join(args.models, "iree", name + ext) for ext in (".mlir", ".vmfb"))
    result = {"vmfb": vmfb, "import_flags": import_flags}
    for stage, cmd in (("import", [os.path.join(bindir, "iree-import-onnx"), onnx_path, *import_flags, "-o", mlir]),
                       ("compile", [os.path.join(bindir, "iree-compile"), mlir, *IREE_COMPILE_FLAGS, "-o", vmfb])):
        rc, out, err, wall, rss = run_child(cmd, os.environ.copy(), timeout=args.iree_compile_timeout)
        if rc != 0:
            result = {"error": first_error_line(err or out), "stage": stage, "cmd": " ".join(cmd)}
            break
    if os.path.exists(mlir):
        os.remove(mlir)  # the weights, inlined as MLIR resources: as large as the model again
    return result


def carve_model_run(args, name, threads, out_dir, extra=()):
    cmd = [args.carve, "run", os.path.join(args.models, name + ".onnx"), "--threads", str(threads),
           "--iters", str(args.iters), "--output-dir", out_dir, "--no-cache", *extra]
    for n, f in model_inputs(args.models, name):
        cmd += ["--input", f"{n}={f}"]
    rc, out, err, wall, rss = run_child(cmd, child_env(threads))
    m = re.search(r"ran '.*' (\d+) time\(s\) (.*): min ([\d.]+) ms, median ([\d.]+) ms", out)
    if rc != 0 or not m:
        return {"error": first_error_line(err or out), "stderr": (err or out)[-400:], "cmd": " ".join(cmd)}
    c = re.search(r"process CPU time per run: min ([\d.]+) ms, median ([\d.]+) ms", out)
    cpu_ms = float(c.group(2)) if c else None
    return {"median_ms": float(m.group(4)), "min_ms": float(m.group(3)), "cpu_ms": cpu_ms, "mode": m.group(2),
            "wall_s": wall, "rss_bytes": rss, "cmd": " ".join(cmd)}


def peer_model_run(args, fw, name, threads, out_dir, vmfb=None):
    python = sys.executable if fw == "torch" else args.peer_python
    cmd = [python, os.path.join(HERE, "worker.py"), fw, "model", "--models", args.models, "--name", name,
           "--threads", str(threads), "--iters", str(args.iters), "--out", out_dir]
    if vmfb:
        cmd += ["--vmfb", vmfb]
    rc, out, err, wall, rss = run_child(cmd, child_env(threads))
    if rc != 0:
        return {"error": first_error_line(err or out), "stderr": err[-400:], "cmd": " ".join(cmd)}
    r = json.loads(out.strip().splitlines()[-1])
    lat = r.pop("latency_ms")
    cpu = r.pop("cpu_ms")
    return {"median_ms": median(lat), "min_ms": min(lat), "cpu_ms": median(cpu), "wall_s": wall, "rss_bytes": rss,
            "cmd": " ".join(cmd), **r}


def ratio(a, b):
    return a / b if a and b else None


def end_to_end(args, work, threads, names):
    rows = {}
    for name in names:
        fws = list(args.frameworks)
        # IREE compiles ahead of time; where that fails, its column says why and no
        # process runs (the reason is the same every time).
        iree = iree_prepare(args, name) if "iree" in fws else None
        runs = {fw: [] for fw in fws}
        variant = args.variants.get(name)  # diagnostic: carve with other flags, same run
        if variant and "carve" in fws:
            runs["carve " + variant] = []
        outs = {fw: os.path.join(work, "outputs", f"t{threads}", name, fw.replace(" ", "")) for fw in runs}
        for p in range(args.procs):
            for fw in runs:
                if fw == "iree" and "error" in iree:
                    continue
                print(f"  {name}, {threads} thread(s): {fw} process {p + 1}/{args.procs}", file=sys.stderr, flush=True)
                if fw.startswith("carve"):
                    r = carve_model_run(args, name, threads, outs[fw], fw.split()[1:])
                else:
                    r = peer_model_run(args, fw, name, threads, outs[fw], iree.get("vmfb") if fw == "iree" else None)
                runs[fw].append(r)
        row = {"runs": runs}
        for fw, rs in runs.items():
            ok = [r for r in rs if "error" not in r]
            row[fw] = {"median_ms": median([r["median_ms"] for r in ok]), "min_ms": min([r["min_ms"] for r in ok], default=None),
                       "cpu_ms": median([r["cpu_ms"] for r in ok if r.get("cpu_ms")]),
                       "rss_bytes": median([r["rss_bytes"] for r in ok if r["rss_bytes"]]),
                       "wall_s": median([r["wall_s"] for r in ok]),
                       "errors": list(dict.fromkeys(r["error"] for r in rs if "error" in r))}
        if iree is not None and "error" in iree:
            row["iree"]["errors"] = [f"IREE {iree['stage']} failed: {iree['error']}"
                                     + (f" (and {iree['retry']})" if iree.get("retry") else "")]
        if iree is not None:
            row["iree_compile"] = iree
        # Cross-check: every output against torch's (same module, same weights; for the
        # single layers the .onnx file's weights) and torch against the reference
        # make_onnx_models.py saved at export (proves the same weights).
        check = {}
        ref_dir = outs.get("torch")
        exported = {f[len(name) + 8:]: os.path.join(args.models, f) for f in os.listdir(args.models)
                    if f.startswith(name + ".output.") and f.endswith(".npy")}
        if ref_dir and os.path.isdir(ref_dir) and os.listdir(ref_dir):
            refs = {f: np.load(os.path.join(ref_dir, f)) for f in sorted(os.listdir(ref_dir))}
            for f, ref in refs.items():
                if f in exported:
                    check.setdefault("torch_vs_export", {})[f[:-4]] = rel_err(ref, np.load(exported[f]))
        else:
            # torch left out (--frameworks): the outputs make_onnx_models.py saved at export
            # are torch's for the same inputs (the single layers have none).
            refs = {f: np.load(path) for f, path in sorted(exported.items())}
        for f, ref in refs.items():
            for fw in runs:
                path = os.path.join(outs[fw], f)
                if fw != "torch" and os.path.exists(path):
                    check.setdefault(f"{fw}_vs_torch", {})[f[:-4]] = rel_err(np.load(path), ref)
        row["check"] = check
        # carve / the faster of ORT and OpenVINO: > 1 means carve is slower. By the
        # medians of wall time and, separately, of CPU time per run.
        c = row.get("carve", {})
        for key, field in (("carve_over_best", "median_ms"), ("cpu_carve_over_best", "cpu_ms")):
            peers = [(row[fw][field], fw) for fw in BEST_OF if fw in row and row[fw][field]]
            best = min(peers) if peers else None
            row[key] = ratio(c.get(field), best[0]) if best else None
            row[key + "_peer"] = best[1] if best else None
        for fw in fws:
            if fw != "carve":
                row[f"speedup_vs_{fw}"] = ratio(row[fw]["median_ms"], c.get("median_ms"))
                row[f"cpu_speedup_vs_{fw}"] = ratio(row[fw]["cpu_ms"], c.get("cpu_ms"))
        if variant and "carve" in fws:
            v = row["carve " + variant]
            best = min([row[fw]["cpu_ms"] for fw in BEST_OF if fw in row and row[fw]["cpu_ms"]], default=None)
            row["variant"] = {"flags": variant, "cpu_over_best": ratio(v["cpu_ms"], best),
                              "speedup_vs_carve": ratio(c.get("cpu_ms"), v["cpu_ms"])}
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
    # ONNX export of the same module (prefill + step with past keys/values) for ORT and OpenVINO.
    sys.path.insert(0, HERE)
    import decoder
    model = decoder.KvDecoder(first["config"], decoder.load_weights(dump)).eval()
    decoder.export_onnx(model, DECODER["prompt"], dump)
    peers = [fw for fw in DECODER_PEERS if fw in args.frameworks]
    runs = {fw: [] for fw in ["carve"] + peers}
    for p in range(args.procs):
        for fw in runs:
            print(f"  decoder: {fw} process {p + 1}/{args.procs}", file=sys.stderr, flush=True)
            if fw == "carve":
                rc, out, err, wall, rss = run_child(base, child_env(args.threads))
                r = json.loads(out) if rc == 0 else {"error": err[-400:]}
            else:
                python = sys.executable if fw == "torch" else args.peer_python
                cmd = [python, os.path.join(HERE, "worker.py"), fw, "decoder", "--dump", dump, "--onnx-dir",
                       dump, "--threads", str(args.threads), "--reps", str(args.decoder_reps), "--out",
                       os.path.join(dump, fw)]
                rc, out, err, wall, rss = run_child(cmd, child_env(args.threads))
                r = json.loads(out.strip().splitlines()[-1]) if rc == 0 else {"error": first_error_line(err or out)}
            r.update(wall_s=wall, rss_bytes=rss)
            runs[fw].append(r)
    row = {"config": first["config"], "decode_steps": first["decode_steps"], "peers": peers, "runs": runs}
    for fw, rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        row[fw] = {"prefill_ms": median([median(r["prefill_ms"]) for r in ok]),
                   "decode_tokens_per_s": median([median(r["decode_tokens_per_s"]) for r in ok]),
                   "prefill_cpu_ms": median([median(r["prefill_cpu_ms"]) for r in ok]),
                   "decode_cpu_tokens_per_s": median([median(r["decode_cpu_tokens_per_s"]) for r in ok]),
                   "rss_bytes": median([r["rss_bytes"] for r in ok]), "wall_s": median([r["wall_s"] for r in ok]),
                   "generated": ok[0]["generated"] if ok else None,
                   "errors": list(dict.fromkeys(r["error"] for r in rs if "error" in r))}
    check = {}
    for fw in peers:
        d = os.path.join(dump, fw)
        if os.path.isdir(d):
            for f in ("prefill_logits", "decode0_logits"):
                check.setdefault(f"carve_vs_{fw}", {})[f] = rel_err(np.load(os.path.join(dump, f + ".npy")),
                                                                   np.load(os.path.join(d, f + ".npy")))
            check[f"same_tokens_as_{fw}"] = row[fw]["generated"] == row["carve"]["generated"]
    row["check"] = check
    # > 1: carve is faster (peer time / carve time; carve tokens/s / peer tokens/s).
    c = row["carve"]
    for peer in peers:
        p = row[peer]
        row[f"prefill_speedup_vs_{peer}"] = ratio(p["prefill_ms"], c["prefill_ms"])
        row[f"decode_speedup_vs_{peer}"] = ratio(c["decode_tokens_per_s"], p["decode_tokens_per_s"])
        row[f"prefill_cpu_speedup_vs_{peer}"] = ratio(p["prefill_cpu_ms"], c["prefill_cpu_ms"])
        row[f"decode_cpu_speedup_vs_{peer}"] = ratio(c["decode_cpu_tokens_per_s"], p["decode_cpu_tokens_per_s"])
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


def fmt_over(r, peer):
    """carve's time over a peer's: > 1 means carve is slower (bold, as in fmt_ratio)."""
    if r is None:
        return "—"
    who = f" {NAMES[peer]}" if peer else ""
    return f"**{r:.2f}{who}**" if r > 1.05 else f"{r:.2f}{who}"


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
             f"PyTorch {m['torch']} (Debian, BLAS: {res.get('torch_blas', '?')}, numpy {m['numpy']}, Python "
             f"{m['python']}); from PyPI in build/bench-venv: ONNX Runtime {m['onnxruntime']}, OpenVINO "
             f"{m['openvino']}, IREE {m['iree']} (numpy {m['peer_numpy']}, Python {m['peer_python']}). GPU: "
             f"{m['gpu']}. Load average at start {m['load_average_start'][0]:.1f}, at end "
             f"{m['load_average_end'][0]:.1f} (other jobs share the machine).\n")
    L.append(f"Threads: {', '.join(map(str, args.thread_list))} (one table each), the same for every framework "
             f"(carve `--threads`; ORT `intra_op_num_threads` with `ORT_ENABLE_ALL`; OpenVINO CPU "
             f"`INFERENCE_NUM_THREADS` with `PERFORMANCE_HINT` LATENCY and `INFERENCE_PRECISION_HINT` f32; IREE "
             f"the local-sync driver at 1 thread, local-task with `--task_topology_max_group_count` above; torch "
             f"`set_num_threads` + OMP/OpenBLAS env). The decoder rows use {args.threads} thread(s). Speed-up = "
             f"peer time / carve time (tokens/s: carve / peer), > 1 means carve is faster, from the medians (the "
             f"minimum is shown in brackets: on a loaded machine it is the better estimate of unloaded speed); "
             f"medians of {args.procs} processes × {args.iters} in-process runs (first run included for all). CPU "
             f"ms/run: the process's CPU time (all threads) per run, median over the same runs (carve: `carve run` "
             f"prints it; peers: time.process_time around each run); on a shared machine it is less sensitive than "
             f"wall time to other jobs.\n")
    e2e_all = res.get("end_to_end", {})
    fws = args.frameworks
    notes = []  # footnotes: the exact reason for every cell that has no figure

    def cell(row, fw, field="median_ms", with_min=True):
        x = row.get(fw)
        if x is None:
            return "—"
        if x[field] is None:
            if not x["errors"]:
                return "—"
            if x["errors"][0] not in notes:
                notes.append(x["errors"][0])
            return f"failed [{notes.index(x['errors'][0]) + 1}]"
        return f"{fmt_ms(x[field])} ({fmt_ms(x['min_ms'])})" if with_min else fmt_ms(x[field])

    for threads, e2e in e2e_all.items():
        if not e2e:
            continue
        notes.clear()
        L.append(f"### End to end, batch 1, CPU, {threads} thread{'s' if int(threads) > 1 else ''}\n")
        L.append("Wall time per run in ms (median over processes of each process's median; minimum in brackets), "
                 "then CPU time per run in ms. carve / best = carve's time over the faster of ORT and OpenVINO "
                 "(named), so > 1 means carve is slower.\n")
        L.append("| model | " + " | ".join(NAMES[fw] for fw in fws) + " | carve / best | CPU ms " +
                 " / ".join(NAMES[fw] for fw in fws) + " | CPU: carve / best |")
        L.append("|---|" + "---|" * len(fws) + "---|---|---|")
        for name, r in e2e.items():
            L.append(f"| {name} | " + " | ".join(cell(r, fw) for fw in fws) + f" | "
                     f"{fmt_over(r['carve_over_best'], r['carve_over_best_peer'])} | "
                     + " / ".join(cell(r, fw, "cpu_ms", False) for fw in fws)
                     + f" | {fmt_over(r['cpu_carve_over_best'], r['cpu_carve_over_best_peer'])} |")
        if notes:
            L.append("")
            L.extend(f"[{i + 1}] {n}" + ("  " if i + 1 < len(notes) else "") for i, n in enumerate(notes))
        L.append("\n| model | peak RSS MB " + " / ".join(NAMES[fw] for fw in fws) + " | process wall s "
                 + " / ".join(NAMES[fw] for fw in fws) + " | max rel err vs torch: "
                 + " | ".join(NAMES[fw] for fw in fws if fw != "torch") + " |")
        L.append("|---|---|---|" + "---|" * len([fw for fw in fws if fw != "torch"]))
        wall = lambda x: "—" if not x or x.get("wall_s") is None else f"{x['wall_s']:.1f}"
        for name, r in e2e.items():
            L.append(f"| {name} | " + " / ".join(fmt_mb(r[fw]["rss_bytes"]) for fw in fws) + " | "
                     + " / ".join(wall(r[fw]) for fw in fws) + " | "
                     + " | ".join(fmt_err(r["check"].get(f"{fw}_vs_torch")) for fw in fws if fw != "torch") + " |")
        diag = [(n, r) for n, r in e2e.items() if r.get("variant")]
        if diag:
            L.append("\nDiagnostic rows (carve with other flags, measured in the same interleaved run; see the "
                     "closing note):\n")
            L.append("| model | carve flags | CPU ms/run | wall ms median (min) | vs default carve (CPU) | CPU: carve / best |")
            L.append("|---|---|---|---|---|---|")
            for n, r in diag:
                v = r["carve " + r["variant"]["flags"]]
                sp = r["variant"]["speedup_vs_carve"]
                L.append(f"| {n} | `{r['variant']['flags']}` | {fmt_ms(v['cpu_ms'])} | {fmt_ms(v['median_ms'])} "
                         f"({fmt_ms(v['min_ms'])}) | {'—' if sp is None else f'{sp:.2f}× faster'} | "
                         f"{fmt_over(r['variant']['cpu_over_best'], None)} |")
        L.append("")
    if e2e_all:
        rows = [r for e2e in e2e_all.values() for r in e2e.values()]
        same = all(all(v == 0.0 for v in r["check"].get("torch_vs_export", {}).values()) for r in rows)
        L.append(f"Same weights: torch rebuilds each module with make_onnx_models.py's seeds; its outputs "
                 f"{'equal' if same else 'DIFFER from'} the ones saved at export bit for bit (the single layers: "
                 f"torch runs the .onnx file's own weights). All read the same input .npy files; carve, ORT, "
                 f"OpenVINO and IREE the same .onnx file (IREE: imported with iree-import-onnx, compiled with "
                 f"`iree-compile {' '.join(IREE_COMPILE_FLAGS)}` once per model, outside the timed processes). "
                 f"Process wall: the whole process, i.e. start-up and import, carve's JIT compile of every kernel "
                 f"(no disk cache) / ORT's session build / OpenVINO's compile_model / IREE's module load / torch's "
                 f"module construction, and the {args.iters} runs.\n")
        upgraded = {n: r["iree_compile"]["retry"] for e2e in e2e_all.values() for n, r in e2e.items()
                    if "vmfb" in r.get("iree_compile", {}) and r["iree_compile"].get("retry")}
        for n, why in upgraded.items():
            L.append(f"IREE ran {n} imported with `--opset-version {IREE_RETRY_OPSET}` (the ONNX version converter "
                     f"first); {why}.  ")
        if upgraded:
            L.append("")
    d = res.get("decoder")
    if d and "error" not in d:
        cfg = d["config"]
        L.append(f"### GPT-style decoder with KV cache (examples/kv_decoder at vocab {cfg['vocab']}, width "
                 f"{cfg['d_model']}, {cfg['heads']} heads, {cfg['layers']} layers, MLP {cfg['mlp']}, "
                 f"{cfg['max_seq']} positions)\n")
        L.append(f"Prefill of a {cfg['prompt']}-token prompt, then greedy decode of {d['decode_steps']} tokens, one "
                 f"step per token with the K/V caches (carve: handles of max_seq rows, masked; ORT: "
                 f"`decoder_step.onnx` with past keys/values as inputs and present ones as outputs, through IO "
                 f"binding, the caches kept as ORT's OrtValues; OpenVINO: the same two files, two step requests "
                 f"taking turns, one's present output tensors bound as the other's past input tensors; torch: the "
                 f"same module in eager mode, torch.cat caches). Same weights in all (kv_decoder_bench --dump). "
                 f"Median of {args.decoder_reps} reps per process, median over processes.\n")
        peers = d["peers"]
        cols = ["carve"] + peers
        f1 = lambda x: "—" if x is None else f"{x:.0f}"
        f_s = lambda x: "—" if x is None else f"{x:.1f}"
        L.append("| | " + " | ".join(NAMES[fw] for fw in cols) + " | "
                 + " | ".join(f"carve vs {NAMES[p]}" for p in peers) + " |")
        L.append("|---|" + "---|" * (len(cols) + len(peers)))
        for label, field, fmt, key in (("prefill ms", "prefill_ms", fmt_ms, "prefill_speedup"),
                                       ("decode tokens/s", "decode_tokens_per_s", f1, "decode_speedup"),
                                       ("prefill CPU ms", "prefill_cpu_ms", fmt_ms, "prefill_cpu_speedup"),
                                       ("decode tokens per CPU second", "decode_cpu_tokens_per_s", f1,
                                        "decode_cpu_speedup"),
                                       ("process wall s", "wall_s", f_s, None), ("peak RSS MB", "rss_bytes", fmt_mb, None)):
            L.append(f"| {label} | " + " | ".join(fmt(d[fw][field]) for fw in cols) + " | "
                     + " | ".join(fmt_ratio(d[f"{key}_vs_{p}"]) if key else "" for p in peers) + " |")
        ch = d["check"]
        L.append("\nCross-check (prefill, first step logits): "
                 + "; ".join(f"carve vs {NAMES[p]} max rel err {fmt_err(ch.get(f'carve_vs_{p}'))}, same greedy "
                             f"tokens {ch.get(f'same_tokens_as_{p}')}" for p in peers) + ".\n")
        for fw in cols:
            if d[fw]["errors"]:
                L.append(f"{NAMES[fw]} failed: {d[fw]['errors'][0]}  ")
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
    ap.add_argument("--peer-python", default=os.path.join(REPO, "build", "bench-venv", "bin", "python"),
                    help="the interpreter with onnxruntime, openvino and iree (scripts/bench-compare.sh's venv)")
    ap.add_argument("--models-dir", dest="models", default=os.path.join(REPO, "build", "bench-models"),
                    help="where the .onnx files are (exported there if missing)")
    ap.add_argument("--out", default=os.path.join(REPO, "build", "bench-results"))
    ap.add_argument("--minimalloc", default=os.path.join(os.environ["CARVE_SHARED_DIR"], "data", "minimalloc")
                    if "CARVE_SHARED_DIR" in os.environ else os.path.join(REPO, "tests", "data", "minimalloc"))
    ap.add_argument("--threads", default="1", help="comma list: one end-to-end table per thread count; "
                    "the decoder uses the first")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--decoder-reps", type=int, default=3)
    ap.add_argument("--exact-limit", type=float, default=5.0)
    ap.add_argument("--models", "--model-list", dest="model_list", default=None,
                    help=f"comma list of models (default {','.join(MODELS)} unless a preset is given)")
    ap.add_argument("--cnn", action="store_true", help="add the torchvision CNNs (make_onnx_models.py CNNS)")
    ap.add_argument("--layers", action="store_true", help="add the single-layer models (make_layer_models.py)")
    ap.add_argument("--transformers", action="store_true",
                    help="add the transformer sweep (make_onnx_models.py TRANSFORMERS: nn.TransformerEncoder "
                    "sequence-/batch-first at opset 13/17, gpt and bert with 512 positions; 32, 128, 512 tokens)")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS), help="comma list of " + ",".join(FRAMEWORKS))
    ap.add_argument("--iree-compile-timeout", type=int, default=1800, help="seconds for each IREE import / compile")
    ap.add_argument("--variant", action="append", default=None, metavar="MODEL:FLAGS",
                    help="also run carve with FLAGS on MODEL (diagnostic row); default mobilenet_v2:--no-inplace")
    ap.add_argument("--skip", default="", help="comma list of: e2e,decoder,planner,gbench")
    args = ap.parse_args()
    args.carve = args.carve or os.path.join(args.build, "tools", "carve")
    try:
        args.thread_list = [int(t) for t in args.threads.split(",") if t]
    except ValueError:
        ap.error(f"--threads {args.threads}: expected a comma list of integers, e.g. 1,2")
    args.threads = args.thread_list[0]
    models = [m for m in (args.model_list or "").split(",") if m]
    if args.cnn or args.transformers:
        import make_onnx_models as mk
        models += (mk.CNNS if args.cnn else []) + (mk.TRANSFORMERS if args.transformers else [])
    if args.layers:
        models += list(make_layer_models.LAYERS)
    args.model_list = list(dict.fromkeys(models or MODELS))
    args.frameworks = [f for f in args.frameworks.split(",") if f]
    unknown = set(args.frameworks) - set(FRAMEWORKS)
    if unknown or "carve" not in args.frameworks:
        ap.error(f"--frameworks: carve and any of {', '.join(FRAMEWORKS[1:])} (got {', '.join(args.frameworks)})")
    peers_needed = [f for f in args.frameworks if f in ("ort", "openvino", "iree")]
    if peers_needed and not os.access(args.peer_python, os.X_OK):
        sys.exit(f"compare.py: {args.peer_python} not found: scripts/bench-compare.sh makes that venv "
                 f"(or pass --peer-python, or leave {', '.join(peers_needed)} out of --frameworks)")
    if not os.access(args.carve, os.X_OK):
        sys.exit(f"compare.py: carve CLI {args.carve} not found (build it, or pass --carve PATH)")
    variants = args.variant if args.variant is not None else ["mobilenet_v2:--no-inplace"]
    args.variants = dict(v.split(":", 1) for v in variants if ":" in v)
    skip = set(args.skip.split(","))
    work = os.path.join(args.out, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    res = {"command": "scripts/bench-compare.sh " + " ".join(sys.argv[1:]), "args": dict(vars(args))}
    res["command"] = os.environ.get("CARVE_BENCH_COMMAND", res["command"])
    res["machine"] = args.machine = machine(args)
    if "e2e" not in skip or "planner" not in skip:
        export_models(args.models, args.model_list)
    if "e2e" not in skip:
        print("end to end ...", file=sys.stderr, flush=True)
        # Models outermost: a model's processes at every thread count run close together.
        res["end_to_end"] = {str(t): {} for t in args.thread_list}
        for name in args.model_list:
            for t in args.thread_list:
                res["end_to_end"][str(t)].update(end_to_end(args, work, t, [name]))
        tb = next((r["runs"]["torch"][0].get("blas") for e2e in res["end_to_end"].values() for r in e2e.values()
                   if r["runs"].get("torch") and "blas" in r["runs"]["torch"][0]), None)
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
