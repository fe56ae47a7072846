"""The GPT-style decoder of examples/kv_decoder (decoder_model.cpp) in PyTorch, with the
weights kv_decoder_bench --dump wrote, and its ONNX export for ONNX Runtime and OpenVINO (a
prefill graph and a one-token step graph that takes the past keys/values as inputs).

How the peers run a decode step (worker.py ort_decoder / openvino_decoder; compare.py
decoder_rows times prefill and the whole greedy decode, argmax included, like
kv_decoder_bench):
- ONNX Runtime: IO binding. The caches are the OrtValues ORT allocated for the previous
  run's present_* outputs, bound as this step's past_* inputs (never converted to numpy);
  the outputs are bound afresh each run (they grow by a row, so ORT cannot reuse the
  previous ones); token and position are numpy arrays bound once and written in place; only
  the logits ([1, vocab]) come back as numpy.
- OpenVINO: the same two .onnx files, CPU plugin, the end-to-end settings (f32, LATENCY,
  INFERENCE_NUM_THREADS); the step's past length is a dynamic dimension. Two step infer
  requests take turns: each step binds the other request's present_* output tensors as its
  past_* input tensors (set_input_tensor, no copy) and infers with shared outputs, so no
  cache is ever copied and no request reads its own outputs while overwriting them. The
  first rep of a process meets every past length for the first time (OpenVINO prepares each
  new input shape then), so it is slower than the next ones; the median over
  --decoder-reps (3) is the steady state. Not the stateful form
  (openvino._offline_transformations.apply_make_stateful_transformation: past/present as
  ReadValue/Assign state, the prefill's caches written into the state): with this graph's
  Concat caches it decoded at about half the rate of the two-request form (1 thread, about
  600 vs 1000-1400 tokens/s in a trial on the 2-core development machine).

Architecture, as decoder_model.cpp builds it: x = tok_emb[ids] + pos_emb[positions]; per
layer (pre-norm): n1 = LN(x); q, k, v = n1 @ wq, wk, wv (no bias); causal softmax
attention with scale 1/sqrt(head_dim) and masked scores -1e9; x += attn @ wo;
x += gelu(LN(x) @ w1 + b1) @ w2 + b2 (erf GELU); logits = LN(x) @ w_out. LayerNorm eps 1e-5.
carve's decode graph attends over the whole fixed-size cache (max_seq rows, the unwritten
ones masked); here the step attends over the pos+1 rows it has (the same numbers: masked
rows weigh exp(-1e9) = 0).
"""
import os

import numpy as np
import torch
import torch.nn.functional as F


def load_weights(dump_dir):
    wdir = os.path.join(dump_dir, "weights")
    return {f[:-4]: torch.from_numpy(np.load(os.path.join(wdir, f))) for f in os.listdir(wdir) if f.endswith(".npy")}


class KvDecoder(torch.nn.Module):
    def __init__(self, cfg, weights):
        super().__init__()
        self.cfg = cfg
        for name, t in weights.items():
            self.register_buffer(name.replace(".", "_"), t.clone())
        self.layers, self.heads, self.d = cfg["layers"], cfg["heads"], cfg["d_model"]

    def w(self, name):
        return getattr(self, name.replace(".", "_"))

    def ln(self, x, p):
        return F.layer_norm(x, (self.d,), self.w(p + "_s"), self.w(p + "_b"), 1e-5)

    def block(self, l, x, past_k=None, past_v=None, causal=True):
        p = f"l{l}."
        t, h, hd = x.shape[0], self.heads, self.d // self.heads
        n1 = self.ln(x, p + "ln1")
        q, k, v = n1 @ self.w(p + "wq"), n1 @ self.w(p + "wk"), n1 @ self.w(p + "wv")
        keys = k if past_k is None else torch.cat([past_k, k], 0)
        values = v if past_v is None else torch.cat([past_v, v], 0)
        kv = keys.shape[0]
        qh = q.reshape(t, h, hd).transpose(0, 1)
        kt = keys.reshape(kv, h, hd).permute(1, 2, 0)
        vh = values.reshape(kv, h, hd).transpose(0, 1)
        scores = (qh @ kt) * (1.0 / hd ** 0.5)
        if causal:
            mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
            scores = torch.where(mask, scores, torch.tensor(-1e9))
        attn = (torch.softmax(scores, -1) @ vh).transpose(0, 1).reshape(t, self.d)
        x = x + attn @ self.w(p + "wo")
        up = F.gelu(self.ln(x, p + "ln2") @ self.w(p + "w1") + self.w(p + "b1"))
        return x + up @ self.w(p + "w2") + self.w(p + "b2"), keys, values

    def prefill(self, ids):
        """ids [T] -> logits [T, vocab], [k0, v0, k1, v1, ...] each [T, d]."""
        x = self.tok_emb[ids] + self.pos_emb[torch.arange(ids.shape[0])]
        cache = []
        for l in range(self.layers):
            x, k, v = self.block(l, x, causal=True)
            cache += [k, v]
        return self.ln(x, "lnf") @ self.w_out, cache

    def step(self, token, pos, cache):
        """token [1], pos [1] -> logits [1, vocab], the caches grown by one row."""
        x = self.tok_emb[token] + self.pos_emb[pos]
        out = []
        for l in range(self.layers):
            x, k, v = self.block(l, x, cache[2 * l], cache[2 * l + 1], causal=False)
            out += [k, v]
        return self.ln(x, "lnf") @ self.w_out, out


class _Prefill(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):
        logits, cache = self.m.prefill(ids)
        return (logits, *cache)


class _Step(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, token, pos, *cache):
        logits, out = self.m.step(token, pos, list(cache))
        return (logits, *out)


def cache_names(layers, prefix):
    return [f"{prefix}_{kv}{l}" for l in range(layers) for kv in "kv"]


def export_onnx(model, prompt_len, out_dir):
    """Writes decoder_prefill.onnx (ids[T] -> logits, present_*) and decoder_step.onnx
    (token[1], pos[1], past_* [P, d] -> logits, present_* [P+1, d]; P dynamic)."""
    layers, d = model.layers, model.d
    present = cache_names(layers, "present")
    past = cache_names(layers, "past")
    with torch.no_grad():
        ids = torch.arange(prompt_len, dtype=torch.long) % model.cfg["vocab"]
        torch.onnx.export(_Prefill(model), (ids,), os.path.join(out_dir, "decoder_prefill.onnx"), opset_version=17,
                          input_names=["ids"], output_names=["logits"] + present, do_constant_folding=True)
        cache = [torch.zeros(prompt_len, d) for _ in past]
        args = (torch.tensor([1]), torch.tensor([prompt_len]), *cache)
        dyn = {n: {0: "past"} for n in past}
        dyn.update({n: {0: "present"} for n in present})
        torch.onnx.export(_Step(model), args, os.path.join(out_dir, "decoder_step.onnx"), opset_version=17,
                          input_names=["token", "pos"] + past, output_names=["logits"] + present,
                          dynamic_axes=dyn, do_constant_folding=True)
