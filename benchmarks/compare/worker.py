"""One peer framework in its own process (so its peak RSS is its own), for compare.py.

  worker.py ort   model   --models DIR --name NAME --threads T --iters N --out DIR
  worker.py torch model   --models DIR --name NAME --threads T --iters N --out DIR
  worker.py ort   decoder --dump DIR --onnx-dir DIR --threads T --reps R --out DIR
  worker.py torch decoder --dump DIR --threads T --reps R --out DIR

Prints one JSON line (latencies in ms, or prefill ms / decode tokens/s per rep) and saves
its outputs as .npy under --out for the cross-check. The ort worker never imports torch.
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


def torch_model(name):
    """The module make_onnx_models.py --full exported as NAME, rebuilt with the same seeds
    (the weights are checked against the exported reference outputs by compare.py)."""
    import torch
    import torchvision
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    import make_onnx_models as mk
    if name == "gpt":
        torch.manual_seed(3)
        return mk.Gpt(vocab=1000, ctx=128, dim=256, heads=8, layers=4).eval()
    if name == "bert":
        torch.manual_seed(4)
        return mk.Bert(vocab=1000, ctx=128, dim=256, heads=8, layers=4).eval()
    torch.manual_seed(1)
    return mk.randomize(getattr(torchvision.models, name)(weights=None), 2).eval()


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
    else:
        torch = torch_setup(a.threads)
        ins, names = input_order(a.models, a.name)
        model = torch_model(a.name)
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
    p.add_argument("framework", choices=["ort", "torch"])
    p.add_argument("kind", choices=["model", "decoder"])
    p.add_argument("--models")
    p.add_argument("--name")
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
