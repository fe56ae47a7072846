"""One peer framework in its own process (so its peak RSS is its own), for compare.py.

  worker.py ort      model   --models DIR --name NAME --threads T --iters N --out DIR
  worker.py openvino model   --models DIR --name NAME --threads T --iters N --out DIR
  worker.py iree     model   --models DIR --name NAME --vmfb FILE --threads T --iters N --out DIR
  worker.py torch    model   --models DIR --name NAME --threads T --iters N --out DIR
  worker.py ort      decoder --dump DIR --onnx-dir DIR --threads T --reps R --out DIR
  worker.py openvino decoder --dump DIR --onnx-dir DIR --threads T --reps R --out DIR
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


def ort_decoder(a, cfg):
    """ONNX Runtime's prefill and step (decoder.py) through IO binding: the caches stay
    OrtValues that ORT allocated (a step's present_* are bound as the next step's past_*,
    never copied to numpy), token and position are numpy arrays bound once and written in
    place; only the logits come back as numpy."""
    pre = ort_session(os.path.join(a.onnx_dir, "decoder_prefill.onnx"), a.threads)
    step = ort_session(os.path.join(a.onnx_dir, "decoder_step.onnx"), a.threads)
    pre_io, step_io = pre.io_binding(), step.io_binding()
    past_names = [i.name for i in step.get_inputs()][2:]
    token, pos = np.zeros(1, np.int64), np.zeros(1, np.int64)
    step_io.bind_cpu_input("token", token)
    step_io.bind_cpu_input("pos", pos)

    def run(session, io):
        # Outputs bound afresh for every run: a bound output keeps the OrtValue of the run
        # before, which a step cannot reuse (the caches grow by a row) and the next step reads.
        io.clear_binding_outputs()
        for o in session.get_outputs():
            io.bind_output(o.name, "cpu")
        session.run_with_iobinding(io)
        out = io.get_outputs()
        return out[0].numpy(), out[1:]

    def prefill(prompt):
        pre_io.bind_cpu_input("ids", prompt)
        return run(pre, pre_io)

    def decode(t, p, cache):
        token[0], pos[0] = t, p
        for n, v in zip(past_names, cache):
            step_io.bind_ortvalue_input(n, v)
        logits, cache = run(step, step_io)
        return logits[0], cache
    return prefill, decode, {}


def openvino_decoder(a, cfg):
    """OpenVINO's CPU plugin on the same prefill and step files (openvino_model's
    settings; the step's past length is a dynamic dimension). No copies: two step requests
    take turns, each step binding the other request's present_* output tensors as its
    past_* input tensors (a request never reads its own outputs, which its next run
    overwrites); token and position are numpy arrays shared with their input tensors; the
    logits are read through a view of the output tensor."""
    import openvino as ov
    pre, pre_req, extra = openvino_model(os.path.join(a.onnx_dir, "decoder_prefill.onnx"), a.threads)
    step, req, _ = openvino_model(os.path.join(a.onnx_dir, "decoder_step.onnx"), a.threads)
    requests = [req, step.create_infer_request()]
    token, pos = np.zeros(1, np.int64), np.zeros(1, np.int64)
    for r in requests:
        r.set_input_tensor(0, ov.Tensor(token, shared_memory=True))
        r.set_input_tensor(1, ov.Tensor(pos, shared_memory=True))
    outputs = range(len(step.outputs))
    turn = [0]

    def run(r):
        r.infer(share_outputs=True)
        return r.get_output_tensor(0).data, [r.get_output_tensor(i) for i in outputs[1:]]

    def prefill(prompt):
        pre_req.set_input_tensor(0, ov.Tensor(prompt, shared_memory=True))
        return run(pre_req)

    def decode(t, p, cache):
        token[0], pos[0] = t, p
        r = requests[turn[0]]
        turn[0] ^= 1
        for i, v in enumerate(cache):
            r.set_input_tensor(2 + i, v)
        logits, cache = run(r)
        return logits[0], cache
    return prefill, decode, extra


def torch_decoder(a, cfg):
    """The same module in eager mode (decoder.py), torch.cat caches."""
    torch = torch_setup(a.threads)
    sys.path.insert(0, HERE)
    import decoder
    model = decoder.KvDecoder(cfg, decoder.load_weights(a.dump)).eval()

    def prefill(prompt):
        logits, cache = model.prefill(torch.from_numpy(prompt))
        return logits.numpy(), cache

    def decode(t, p, cache):
        logits, cache = model.step(torch.tensor([t]), torch.tensor([p]), cache)
        return logits[0].numpy(), cache
    return prefill, decode, {}


def run_decoder(a):
    """Per rep: the prefill of the prompt, timed; then greedy decode from position T to
    max_seq - 1, one step per token, timed as a whole (tokens/s), argmax included."""
    cfg = json.load(open(os.path.join(a.dump, "config.json")))["config"]
    prompt = np.load(os.path.join(a.dump, "prompt.npy"))
    T, steps = len(prompt), cfg["max_seq"] - 1 - len(prompt)
    make = {"ort": ort_decoder, "openvino": openvino_decoder, "torch": torch_decoder}[a.framework]
    prefill, decode, extra = make(a, cfg)
    prefill_ms, tps, generated, prefill_cpu, cpu_tps = [], [], [], [], []
    for _ in range(a.reps):
        t, c = time.perf_counter(), time.process_time()
        prefill_logits, cache = prefill(prompt)
        prefill_ms.append((time.perf_counter() - t) * 1e3)
        prefill_cpu.append((time.process_time() - c) * 1e3)
        token = int(np.argmax(prefill_logits[-1]))
        generated = [token]
        t, c = time.perf_counter(), time.process_time()
        for i in range(steps):
            logits, cache = decode(token, T + i, cache)
            if i == 0:
                first = np.array(logits)  # a copy: OpenVINO's view is overwritten by later steps
            token = int(np.argmax(logits))
            generated.append(token)
        tps.append(steps / (time.perf_counter() - t))
        cpu_tps.append(steps / (time.process_time() - c))
    os.makedirs(a.out, exist_ok=True)
    np.save(os.path.join(a.out, "prefill_logits.npy"), prefill_logits)
    np.save(os.path.join(a.out, "decode0_logits.npy"), first)
    return {"prefill_ms": prefill_ms, "decode_tokens_per_s": tps, "prefill_cpu_ms": prefill_cpu,
            "decode_cpu_tokens_per_s": cpu_tps, "decode_steps": steps, "generated": generated, **extra}


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
