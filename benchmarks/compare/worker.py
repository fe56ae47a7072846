"""One peer framework in its own process (so its peak RSS is its own), for compare.py.

  worker.py ort      model   --models DIR --name NAME --threads T --iters N --out DIR
  worker.py openvino model   --models DIR --name NAME --threads T --iters N --out DIR
  worker.py iree     model   --models DIR --name NAME --vmfb FILE --threads T --iters N --out DIR
  worker.py torch    model   --models DIR --name NAME --threads T --iters N --out DIR
  worker.py ort      decoder --dump DIR --onnx-dir DIR --threads T --reps R --out DIR
  worker.py torch    decoder --dump DIR --threads T --reps R --out DIR

Prints one JSON line (latencies in ms, or prefill ms / decode tokens/s per rep) and saves
its outputs as .npy under --out for the cross-check. Two interpreters run it (see
scripts/bench-compare.sh): torch with /usr/bin/python3 (Debian's torch, numpy 1.x), the
others with build/bench-venv's (PyPI wheels, numpy 2.x); so ort, openvino and iree never
import torch, and torch never imports the PyPI packages.
Timing protocol, the same for carve (carve run --iters N): N runs in one process, the
first one included, median reported by compare.py.
"""
import argparse
import json
import os
import re
import sys
import time

import numpy as np
from urllib.parse import quote  # carve run: output_file_name (tools/cli/run_command.h)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def inputs_of(models, name):
    """{input name: array} from NAME.input.<input>.npy (written by make_onnx_models.py)."""
    out = {}
    for f in sorted(os.listdir(models)):
        m = re.fullmatch(re.escape(name) + r"\.input\.(.+)\.npy", f)
        if m:
            out[m.group(1)] = np.load(os.path.join(models, f))
    return out


def ort_session(path, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def openvino_model(path, threads):
    """OpenVINO's CPU plugin on the same .onnx file: f32 throughout (no bf16/f16 down-
    conversion on CPUs that have it), latency mode (one stream: one request at a time uses
    all its threads) and the same thread count as the others."""
    import openvino as ov
    core = ov.Core()
    compiled = core.compile_model(core.read_model(path), "CPU", {
        "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads})
    extra = {"openvino_threads": int(compiled.get_property("INFERENCE_NUM_THREADS")),
             "openvino_precision": str(compiled.get_property("INFERENCE_PRECISION_HINT"))}
    return compiled, compiled.create_infer_request(), extra


def iree_function(vmfb, threads):
    """The entry function of an IREE module compiled by compare.py (iree-compile for
    llvm-cpu, host CPU). One thread: the local-sync driver, which runs the dispatches on the
    calling thread; more: local-task with that many workers (task topology group count)."""
    import iree.runtime as rt
    if threads > 1:
        rt.flags.parse_flags(f"--task_topology_max_group_count={threads}")
    config = rt.Config("local-sync" if threads == 1 else "local-task")
    ctx = rt.SystemContext(config=config)
    vm = rt.VmModule.mmap(config.vm_instance, vmfb)
    ctx.add_vm_module(vm)
    # The synchronous entry point (the module also exports NAME$async and __init).
    names = [n for n in vm.function_names if not n.startswith("__") and "$" not in n]
    if len(names) != 1:
        raise SystemExit(f"{vmfb}: expected one entry function, found {names}")
    return getattr(ctx.modules, vm.name)[names[0]], {"iree_driver": "local-sync" if threads == 1 else "local-task"}


def torch_layer(models, name):
    """A single-layer model of make_layer_models.py as torch functions (Conv, then Relu or
    Clip), with the .onnx file's own weights."""
    import onnx
    import torch
    import torch.nn.functional as F
    from onnx import numpy_helper
    g = onnx.load(os.path.join(models, name + ".onnx")).graph
    w = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in g.initializer}
    steps = []
    for node in g.node:
        at = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Conv":
            steps.append(lambda x, n=node, at=at: F.conv2d(x, w[n.input[1]], w[n.input[2]] if len(n.input) > 2 else None,
                                                           stride=at["strides"], padding=at["pads"][:2], groups=at["group"]))
        elif node.op_type == "Relu":
            steps.append(torch.relu)
        elif node.op_type == "Clip":
            steps.append(lambda x, n=node: torch.clamp(x, float(w[n.input[1]]), float(w[n.input[2]])))
        else:
            raise SystemExit(f"{name}: torch_layer has no {node.op_type}")

    def run(x):
        for f in steps:
            x = f(x)
        return x
    return run


def torch_setup(threads):
    import torch
    torch.set_num_threads(threads)
    torch.set_grad_enabled(False)
    return torch


def blas_libraries():
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            if re.search(r"blas|lapack|mkl|dnnl|gomp", line):
                libs.add(line.split()[-1])
    return sorted(libs)


def torch_model(models, name):
    """The module make_onnx_models.py --full exported as NAME, rebuilt with the same seeds
    (the weights are checked against the exported reference outputs by compare.py)."""
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    import make_onnx_models as mk
    if name.startswith("layer_"):
        return torch_layer(models, name)
    full = mk.full_model(name)
    if full is None:
        raise SystemExit(f"{name}: not a model of make_onnx_models.py (FULL) or make_layer_models.py (LAYERS)")
    return full[0].eval()


def input_order(models, name):
    import onnx
    g = onnx.load(os.path.join(models, name + ".onnx"), load_external_data=False).graph
    inits = {i.name for i in g.initializer}
    return [i.name for i in g.input if i.name not in inits], [o.name for o in g.output]


def run_model(a):
    feeds = inputs_of(a.models, a.name)
    lat, cpu, outputs, extra = [], [], None, {}
    if a.framework == "ort":
        s = ort_session(os.path.join(a.models, a.name + ".onnx"), a.threads)
        names = [o.name for o in s.get_outputs()]
        for _ in range(a.iters):
            t, c = time.perf_counter(), time.process_time()
            outputs = s.run(None, feeds)
            lat.append((time.perf_counter() - t) * 1e3)
            cpu.append((time.process_time() - c) * 1e3)
    elif a.framework == "openvino":
        compiled, req, extra = openvino_model(os.path.join(a.models, a.name + ".onnx"), a.threads)
        # An output's names after compile_model can include the producer's tensor name
        # (tenc_bf0_op13_*: '/layers.3/norm2/Div_output_0' for 'out'): take the ONNX one.
        graph_outputs = input_order(a.models, a.name)[1]
        names = [next((n for n in graph_outputs if n in o.get_names()), o.get_any_name()) for o in compiled.outputs]
        for _ in range(a.iters):
            t, c = time.perf_counter(), time.process_time()
            res = req.infer(feeds)
            lat.append((time.perf_counter() - t) * 1e3)
            cpu.append((time.process_time() - c) * 1e3)
        outputs = [res[o] for o in compiled.outputs]
    elif a.framework == "iree":
        fn, extra = iree_function(a.vmfb, a.threads)
        ins, names = input_order(a.models, a.name)
        args = [feeds[n] for n in ins]
        for _ in range(a.iters):
            t, c = time.perf_counter(), time.process_time()
            out = fn(*args)
            # The results as host arrays, like ORT's and OpenVINO's (local-CPU buffers are
            # host-visible, so this maps rather than copies, but it is part of a run).
            outputs = [o.to_host() for o in (out if isinstance(out, (tuple, list)) else (out,))]
            lat.append((time.perf_counter() - t) * 1e3)
            cpu.append((time.process_time() - c) * 1e3)
    else:
        torch = torch_setup(a.threads)
        ins, names = input_order(a.models, a.name)
        model = torch_model(a.models, a.name)
        args = [torch.from_numpy(feeds[n]) for n in ins]
        for _ in range(a.iters):
            t, c = time.perf_counter(), time.process_time()
            out = model(*args)
            lat.append((time.perf_counter() - t) * 1e3)
            cpu.append((time.process_time() - c) * 1e3)
        outputs = [o.numpy() for o in (out if isinstance(out, (tuple, list)) else (out,))]
        extra = {"blas": blas_libraries(), "torch_threads": torch.get_num_threads()}
    os.makedirs(a.out, exist_ok=True)
    for n, o in zip(names, outputs):
        np.save(os.path.join(a.out, quote(n, safe="") + ".npy"), o)
    return {"latency_ms": lat, "cpu_ms": cpu, **extra}


def run_decoder(a):
    cfg = json.load(open(os.path.join(a.dump, "config.json")))["config"]
    prompt = np.load(os.path.join(a.dump, "prompt.npy"))
    T, steps, vocab = len(prompt), cfg["max_seq"] - 1 - len(prompt), cfg["vocab"]
    prefill_ms, tps, generated, prefill_cpu, cpu_tps = [], [], [], [], []
    if a.framework == "ort":
        pre = ort_session(os.path.join(a.onnx_dir, "decoder_prefill.onnx"), a.threads)
        step = ort_session(os.path.join(a.onnx_dir, "decoder_step.onnx"), a.threads)
        past_names = [i.name for i in step.get_inputs()][2:]
        for _ in range(a.reps):
            t, c = time.perf_counter(), time.process_time()
            out = pre.run(None, {"ids": prompt})
            prefill_ms.append((time.perf_counter() - t) * 1e3)
            prefill_cpu.append((time.process_time() - c) * 1e3)
            prefill_logits, cache = out[0], out[1:]
            token = int(np.argmax(prefill_logits[-1]))
            generated = [token]
            t, c = time.perf_counter(), time.process_time()
            for i in range(steps):
                feeds = {"token": np.array([token], np.int64), "pos": np.array([T + i], np.int64)}
                feeds.update(zip(past_names, cache))
                out = step.run(None, feeds)
                if i == 0:
                    first = out[0][0]
                cache = out[1:]
                token = int(np.argmax(out[0][0]))
                generated.append(token)
            tps.append(steps / (time.perf_counter() - t))
            cpu_tps.append(steps / (time.process_time() - c))
    else:
        torch = torch_setup(a.threads)
        sys.path.insert(0, HERE)
        import decoder
        model = decoder.KvDecoder(cfg, decoder.load_weights(a.dump)).eval()
        ids = torch.from_numpy(prompt)
        for _ in range(a.reps):
            t, c = time.perf_counter(), time.process_time()
            logits, cache = model.prefill(ids)
            prefill_ms.append((time.perf_counter() - t) * 1e3)
            prefill_cpu.append((time.process_time() - c) * 1e3)
            prefill_logits = logits.numpy()
            token = int(torch.argmax(logits[-1]))
            generated = [token]
            t, c = time.perf_counter(), time.process_time()
            for i in range(steps):
                out, cache = model.step(torch.tensor([token]), torch.tensor([T + i]), cache)
                if i == 0:
                    first = out[0].numpy()
                token = int(torch.argmax(out[0]))
                generated.append(token)
            tps.append(steps / (time.perf_counter() - t))
            cpu_tps.append(steps / (time.process_time() - c))
    os.makedirs(a.out, exist_ok=True)
    np.save(os.path.join(a.out, "prefill_logits.npy"), prefill_logits)
    np.save(os.path.join(a.out, "decode0_logits.npy"), first)
    return {"prefill_ms": prefill_ms, "decode_tokens_per_s": tps, "prefill_cpu_ms": prefill_cpu,
            "decode_cpu_tokens_per_s": cpu_tps, "decode_steps": steps, "generated": generated}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("framework", choices=["ort", "openvino", "iree", "torch"])
    p.add_argument("kind", choices=["model", "decoder"])
    p.add_argument("--models")
    p.add_argument("--name")
    p.add_argument("--vmfb", help="iree: the module compare.py compiled from the .onnx file")
    p.add_argument("--dump")
    p.add_argument("--onnx-dir")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    r = run_model(a) if a.kind == "model" else run_decoder(a)
    print(json.dumps(r))


if __name__ == "__main__":
    main()
