#!/usr/bin/python3
"""Makes the ONNX test models of tests/onnx/models and their PyTorch reference outputs.

Needs Debian's python3-torch, python3-torchvision and python3-onnx (the build and the
tests do not: the models and .npy files are committed). Weights are random (seeded),
never downloaded.

  scripts/make_onnx_models.py                 # regenerate tests/onnx/models (small models)
  scripts/make_onnx_models.py --full DIR      # full-size torchvision CNNs (CNNS) + GPT/BERT + U-Net + Swin-T + SSD + TRANSFORMERS, batch 1
  scripts/make_onnx_models.py --full DIR --only resnet18,vgg16   # some of them
  scripts/make_onnx_models.py --full DIR --only tenc_bf1_op17_t128,gpt_t512   # names: FULL

For each model NAME it writes NAME.onnx, NAME.input.<input>.npy and
NAME.output.<output>.npy (torch's outputs for those inputs), and lists NAME in
manifest.txt. Error-case models (unsupported operator, bad attribute) get no outputs and
are listed in errors.txt. Runs with /usr/bin/python3 (Debian's torch), e.g.
  /usr/bin/python3 scripts/make_onnx_models.py
"""
import argparse
import contextlib
import os
import re
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL_DIR = os.path.join(REPO, "tests", "onnx", "models")


# ----------------------------------------------------------------------------- operators


class Unary(nn.Module):
    """Relu, Sigmoid, Tanh, Sqrt, Erf, HardSigmoid, Clip (ReLU6 / clamp), Neg, Exp."""

    def forward(self, x):
        a = torch.relu(x) + torch.sigmoid(x) * torch.tanh(x)
        b = torch.sqrt(torch.abs(x) + 1.0) + torch.erf(x)
        c = F.hardsigmoid(x) + F.relu6(x * 4.0) + torch.clamp(x, min=-0.5, max=0.25)
        return a * b - c + torch.exp(-x)


class Binary(nn.Module):
    """Add/Sub/Mul/Div/Pow with numpy broadcasting against inputs and constants."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.rand(1, 4, 1, 1) + 0.5)

    def forward(self, x, y):
        a = (x + y) * self.w - y / (self.w + 1.0)
        b = torch.pow(torch.abs(x) + 0.1, 1.5) + torch.pow(y, 2.0)
        return a - b / 3.0


class WhereEqual(nn.Module):
    """Where with a bool mask (masked_fill), Equal, Cast (bool/float/int)."""

    def forward(self, x, ids):
        mask = torch.eq(ids, 2)
        y = x.masked_fill(mask, -1.0)
        z = torch.where(x > 0.2, x, y * 2.0)
        return z + mask.float() + (ids * 2).float()


class ConvVariants(nn.Module):
    """Conv: groups/depthwise, non-square kernels, pads, strides, dilations, no bias."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 6, (3, 5), stride=(2, 1), padding=(1, 2))
        self.b = nn.Conv2d(6, 6, 3, padding=2, dilation=2, groups=6, bias=False)
        self.c = nn.Conv2d(6, 4, (1, 3), stride=(1, 2), padding=(0, 1), groups=2)
        self.d = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return self.d(self.c(F.relu(self.b(self.a(x)))))


class BatchNorm(nn.Module):
    """BatchNormalization not next to a Conv (the exporter folds those), eval mode."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(4)
        self.bn.running_mean.uniform_(-0.5, 0.5)
        self.bn.running_var.uniform_(0.5, 2.0)
        self.bn.weight.data.uniform_(0.5, 1.5)
        self.bn.bias.data.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.bn(torch.relu(x))


class Pools(nn.Module):
    """MaxPool (ceil_mode, pads), AveragePool (pads, count_include_pad), GlobalAveragePool, Pad."""

    def forward(self, x):
        a = F.max_pool2d(x, 3, stride=2, ceil_mode=True)
        b = F.max_pool2d(x, (2, 3), stride=(2, 1), padding=(1, 1))
        c = F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False)
        d = F.avg_pool2d(x, 2, stride=2, padding=1, count_include_pad=True, ceil_mode=True)
        e = F.adaptive_avg_pool2d(x, 1)
        p = F.pad(x, (1, 2, 0, 1), value=0.5)
        return (a.sum() + b.mean() + c.sum() + d.sum()) * e + p[:, :, :1, :1]


class LinearAlgebra(nn.Module):
    """Gemm (Linear, transB), MatMul 2-D, 3-D x 2-D, 4-D batched; Flatten; Softmax; ReduceMean."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 5)
        self.w = nn.Parameter(torch.randn(5, 3))
        self.register_buffer("c", torch.randn(4, 6))

    def forward(self, x, q, k):
        a = self.fc(torch.flatten(x, 1))                 # Gemm
        b = torch.matmul(a, self.w)                      # MatMul 2-D
        c = torch.matmul(q, self.c)                       # 3-D x 2-D (constant)
        s = torch.softmax(torch.matmul(k, k.transpose(-1, -2)), dim=-1)  # 4-D batched
        m = c.mean(dim=-1, keepdim=True) + s.mean(dim=(1, 3)).sum()
        return b.sum(dim=1, keepdim=True) + m.sum(), s


class Layout(nn.Module):
    """Reshape/Split/Slice/Unsqueeze/Squeeze/Transpose/Concat/Expand, shapes from Shape chains."""

    def forward(self, x):
        n, c, h, w = x.shape
        y = x.reshape(n, c, h * w).transpose(1, 2)       # Shape/Gather/Mul/Concat -> Reshape
        a, b = torch.split(y, [2, c - 2], dim=2)         # Split with sizes
        z = torch.cat([b, a * 2.0], dim=2)[:, 1:-1:2, :]  # Concat, Slice with steps
        u = z.unsqueeze(1).squeeze(1)
        e = x[:, :1].expand(n, c, h, w)                  # Expand
        return u, e + x.view(n, -1).view(n, c, h, w)


class Embedding(nn.Module):
    """Gather (embedding with int64 indices), Range (arange from a shape), ConstantOfShape."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 6)
        self.pos = nn.Embedding(8, 6)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], dtype=torch.long).unsqueeze(0)
        x = self.emb(ids) + self.pos(pos)
        ones = torch.ones(ids.shape, dtype=torch.float32)
        return x + ones.unsqueeze(-1), x[:, -1]


class TriluMask(nn.Module):
    """Trilu (triu/tril) masks and Where, as causal attention exports them."""

    def forward(self, x):
        t = x.shape[-1]
        upper = torch.triu(torch.ones(t, t), diagonal=1).bool()
        s = x.masked_fill(upper, float("-inf"))
        return torch.softmax(s, dim=-1) + torch.tril(x, diagonal=-1)


class LayerNormOp(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(6)
        self.ln.weight.data.uniform_(0.5, 1.5)
        self.ln.bias.data.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.ln(x)


class OneD(nn.Module):
    """1-D Conv/MaxPool/AveragePool (run as height-1 2-D ops), BatchNorm1d, PReLU."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 6, 3, stride=2, padding=2, dilation=2)
        self.dw = nn.Conv1d(6, 6, 5, padding=2, groups=6, bias=False)
        self.bn = nn.BatchNorm1d(6)
        self.act = nn.PReLU(6, init=0.1)

    def forward(self, x):
        y = self.act(self.bn(self.dw(self.conv(x))))
        return F.max_pool1d(y, 3, stride=2, ceil_mode=True), F.avg_pool1d(y, 2, padding=1)


class HardSwishOp(nn.Module):
    def forward(self, x):
        return F.hardswish(x) + F.gelu(x)


# ----------------------------------------------------------------------------- architectures


def conv_bn(cin, cout, k=3, s=1, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


def tiny_resnet():
    from torchvision.models.resnet import BasicBlock, Bottleneck

    def down(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    return nn.Sequential(
        nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1),
        BasicBlock(8, 8), BasicBlock(8, 16, 2, down(8, 16, 2)),
        Bottleneck(16, 4, 2, down(16, 16, 2)),  # expansion 4: 4 -> 16
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


def tiny_mobilenet_v2():
    setting = [[1, 8, 1, 1], [6, 8, 2, 2], [6, 16, 2, 2]]
    return torchvision.models.MobileNetV2(num_classes=10, width_mult=0.25, inverted_residual_setting=setting)


def tiny_mobilenet_v3():
    from torchvision.models.mobilenetv3 import MobileNetV3, _mobilenet_v3_conf
    setting, last = _mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.25)
    return MobileNetV3(setting[:5], last // 4, num_classes=10)


def tiny_squeezenet():
    from torchvision.models.squeezenet import Fire
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(8, 4, 8, 8), Fire(16, 4, 8, 8), nn.MaxPool2d(3, 2, ceil_mode=True), Fire(16, 6, 12, 12),
        nn.Dropout(0.5), nn.Conv2d(24, 10, 1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten())


def tiny_swin():
    """torchvision's Swin Transformer at toy size: two stages of two blocks (the second block
    of each shifts its 2x2 windows: Roll, the attention mask built with Mod), patch merging."""
    torch.manual_seed(51)
    from torchvision.models.swin_transformer import SwinTransformer
    return randomize(SwinTransformer(patch_size=[4, 4], embed_dim=8, depths=[2, 2], num_heads=[1, 2],
                                     window_size=[2, 2], num_classes=5), 52)


def tiny_vgg():
    from torchvision.models.vgg import make_layers
    return nn.Sequential(
        make_layers([8, "M", 16, "M", 16, 16, "M"], batch_norm=False), nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten(),
        nn.Linear(64, 32), nn.ReLU(True), nn.Dropout(), nn.Linear(32, 10))


class UNet(nn.Module):
    """A U-Net-style segmentation net: two conv blocks down (max pool between), up once by
    ConvTranspose (stride 2) and once by bilinear interpolation (Resize), the skip
    connections concatenated, a 1x1 conv to the class maps."""

    def __init__(self, base=8, classes=2):
        super().__init__()

        def block(cin, cout):
            return nn.Sequential(conv_bn(cin, cout), conv_bn(cout, cout))

        c0, c1, c2 = base, 2 * base, 4 * base
        self.inc, self.down1, self.down2 = block(3, c0), block(c0, c1), block(c1, c2)
        self.up_t = nn.ConvTranspose2d(c2, c1, 2, stride=2)
        self.dec1, self.dec0 = block(2 * c1, c1), block(c1 + c0, c0)
        self.head = nn.Conv2d(c0, classes, 1)

    def forward(self, x):
        x0 = self.inc(x)
        x1 = self.down1(F.max_pool2d(x0, 2))
        x2 = self.down2(F.max_pool2d(x1, 2))
        d1 = self.dec1(torch.cat([self.up_t(x2), x1], 1))
        u0 = F.interpolate(d1, scale_factor=2, mode="bilinear", align_corners=False)
        return self.head(self.dec0(torch.cat([u0, x0], 1)))


class Recurrent(nn.Module):
    """PyTorch's recurrent layers as the exporter writes them (ONNX LSTM, GRU with
    linear_before_reset, RNN): a bidirectional batch-first LSTM with initial states, a
    GRU and a ReLU RNN on its output; the sequence and the last hidden states."""

    def __init__(self, features=8, hidden=6):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(2 * hidden, hidden)
        self.rnn = nn.RNN(hidden, 4, nonlinearity="relu")

    def forward(self, x, h0, c0):
        y, (h, _) = self.lstm(x, (h0, c0))
        z, g = self.gru(y.transpose(0, 1))
        r, _ = self.rnn(z)
        return r, torch.cat([h, g], 0)


class Attention(nn.Module):
    def __init__(self, dim, heads, causal):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, mask=None):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = [z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) / ((c // self.heads) ** 0.5)
        if self.causal:
            causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
            att = att.masked_fill(causal, float("-inf"))
        if mask is not None:
            att = att + (1.0 - mask[:, None, None, :].float()) * -10000.0
        y = torch.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class GptBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, causal=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Gpt(nn.Module):
    """GPT-style decoder: token + position embeddings (Gather), causal mask (Trilu/Where),
    LayerNorm, GELU (Erf), softmax, tied-free LM head."""

    def __init__(self, vocab=50, ctx=16, dim=16, heads=2, layers=2):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(ctx, dim)
        self.blocks = nn.ModuleList([GptBlock(dim, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], dtype=torch.long).unsqueeze(0)
        x = self.tok(ids) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class BertLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.attn = Attention(dim, heads, causal=False)
        self.ln1, self.ln2 = nn.LayerNorm(dim, eps=1e-12), nn.LayerNorm(dim, eps=1e-12)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        x = self.ln1(x + self.attn(x, mask))
        return self.ln2(x + self.ff(x))


class Bert(nn.Module):
    """BERT-style encoder: word + segment + position embeddings, padding mask, post-LN
    layers, tanh pooler on the first token."""

    def __init__(self, vocab=60, ctx=16, dim=16, heads=2, layers=2):
        super().__init__()
        self.word, self.seg, self.pos = nn.Embedding(vocab, dim), nn.Embedding(2, dim), nn.Embedding(ctx, dim)
        self.ln = nn.LayerNorm(dim, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer(dim, heads) for _ in range(layers)])
        self.pool = nn.Linear(dim, dim)

    def forward(self, ids, segments, mask):
        pos = torch.arange(ids.shape[1], dtype=torch.long).unsqueeze(0).expand_as(ids)
        x = self.ln(self.word(ids) + self.seg(segments) + self.pos(pos))
        for layer in self.layers:
            x = layer(x, mask)
        return x, torch.tanh(self.pool(x[:, 0]))


# ----------------------------------------------------------------------------- export


def randomize(model, seed):
    """Random weights and BatchNorm statistics (so eval-mode BN is not the identity)."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.rand(m.num_features, generator=g) - 0.5)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.rand(m.num_features, generator=g) - 0.5)
    return model.eval()


def export(model, name, inputs, opset, out_dir, input_names, output_names, dynamic=None):
    """Exports `model` traced on `inputs`. With `dynamic` = (dynamic_axes, test inputs) the
    export has symbolic dims and the saved inputs/outputs are the test inputs' (another
    shape than the traced one: carve fixes the symbolic dims from them)."""
    model.eval()
    path = os.path.join(out_dir, name + ".onnx")
    # torch 1.13's batch-first TransformerEncoderLayer takes a fused fast path under no_grad
    # (aten::_transformer_encoder_layer_fwd) that has no ONNX export: trace it with grad
    # enabled (the composite ops), compute the reference outputs under no_grad as torch runs it.
    fast_path = any(isinstance(m, nn.TransformerEncoderLayer) for m in model.modules())
    with contextlib.nullcontext() if fast_path else torch.no_grad():
        torch.onnx.export(model, tuple(inputs), path, opset_version=opset, input_names=input_names,
                          output_names=output_names, do_constant_folding=True,
                          dynamic_axes=dynamic[0] if dynamic else None)
    with torch.no_grad():
        if dynamic:
            inputs = dynamic[1]
        expected = model(*inputs)
    if not isinstance(expected, (tuple, list)):
        expected = (expected,)
    for n, t in zip(input_names, inputs):
        np.save(os.path.join(out_dir, f"{name}.input.{n}.npy"), t.numpy())
    for n, t in zip(output_names, expected):
        np.save(os.path.join(out_dir, f"{name}.output.{n}.npy"), t.numpy())
    ops = sorted({node.op_type for node in onnx.load(path).graph.node})
    size = os.path.getsize(path)
    print(f"{name}: opset {opset}, {size} bytes, ops {' '.join(ops)}")
    return ops


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def ids(high, *shape, seed=0):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed), dtype=torch.long)


def bert_lengths(out_dir):
    """A bert_dynamic with 512 positions, for onnx::Model (one program per input shape):
    torch's outputs at 32, 128 and 512 tokens, as bert_lengths.L<n>.{input,output}.*.npy."""
    torch.manual_seed(6)
    model = Bert(ctx=512).eval()
    names, outs = ["ids", "segments", "mask"], ["hidden", "pooled"]
    axes = {n: {0: "batch", 1: "length"} for n in names}
    axes.update({"hidden": {0: "batch", 1: "length"}, "pooled": {0: "batch"}})
    traced = (ids(60, 1, 8, seed=41), ids(2, 1, 8, seed=42), torch.ones(1, 8, dtype=torch.long))
    path = os.path.join(out_dir, "bert_lengths.onnx")
    with torch.no_grad():
        torch.onnx.export(model, traced, path, opset_version=14, input_names=names, output_names=outs,
                          do_constant_folding=True, dynamic_axes=axes)
    for n in (32, 128, 512):
        mask = torch.ones(1, n, dtype=torch.long)
        mask[0, n - n // 4:] = 0  # padding at the end
        inputs = (ids(60, 1, n, seed=43 + n), ids(2, 1, n, seed=44 + n), mask)
        with torch.no_grad():
            expected = model(*inputs)
        for name, t in zip(names, inputs):
            np.save(os.path.join(out_dir, f"bert_lengths.L{n}.input.{name}.npy"), t.numpy())
        for name, t in zip(outs, expected):
            np.save(os.path.join(out_dir, f"bert_lengths.L{n}.output.{name}.npy"), t.numpy())
    print(f"bert_lengths: opset 14, {os.path.getsize(path)} bytes")


def dynamic_bert(out_dir):
    """bert_tiny exported with symbolic batch and length (Shape/Range/Concat chains stay in
    the file), tested at batch 2, length 6."""
    torch.manual_seed(5)
    axes = {n: {0: "batch", 1: "length"} for n in ["ids", "segments", "mask"]}
    axes.update({"hidden": {0: "batch", 1: "length"}, "pooled": {0: "batch"}})
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    test = [ids(60, 2, 6, seed=34), ids(2, 2, 6, seed=35), mask]
    traced = [ids(60, 1, 8, seed=31), ids(2, 1, 8, seed=32), torch.ones(1, 8, dtype=torch.long)]
    return export(Bert(), "bert_dynamic", traced, 14, out_dir, ["ids", "segments", "mask"], ["hidden", "pooled"],
                  dynamic=(axes, test))


def small_models():
    """(name, module, inputs, opset, input names, output names)."""
    torch.manual_seed(0)
    x4 = rand(1, 4, 6, 6, seed=1)
    mask = torch.ones(1, 8, dtype=torch.long)
    mask[0, 6:] = 0
    return [
        ("op_unary", Unary(), [rand(2, 3, 4, seed=2)], 13, ["x"], ["y"]),
        ("op_binary", Binary(), [x4, rand(1, 1, 6, 1, seed=3)], 11, ["x", "y"], ["z"]),
        ("op_where_equal", WhereEqual(), [rand(2, 5, seed=4), ids(4, 2, 5, seed=5)], 13, ["x", "ids"], ["y"]),
        ("op_conv", ConvVariants(), [rand(1, 3, 9, 10, seed=6)], 11, ["x"], ["y"]),
        ("op_batchnorm", randomize(BatchNorm(), 7), [x4], 15, ["x"], ["y"]),
        ("op_pools", Pools(), [rand(1, 2, 7, 8, seed=8)], 11, ["x"], ["y"]),
        ("op_pools_13", Pools(), [rand(1, 2, 7, 8, seed=8)], 13, ["x"], ["y"]),
        ("op_linalg", LinearAlgebra(), [rand(2, 3, 2, 2, seed=9), rand(2, 3, 4, seed=10), rand(1, 2, 3, 4, seed=11)],
         13, ["x", "q", "k"], ["y", "s"]),
        ("op_linalg_11", LinearAlgebra(), [rand(2, 3, 2, 2, seed=9), rand(2, 3, 4, seed=10), rand(1, 2, 3, 4, seed=11)],
         11, ["x", "q", "k"], ["y", "s"]),
        ("op_layout", Layout(), [rand(2, 5, 3, 2, seed=12)], 13, ["x"], ["u", "e"]),
        ("op_layout_11", Layout(), [rand(2, 5, 3, 2, seed=12)], 11, ["x"], ["u", "e"]),
        ("op_embedding", Embedding(), [ids(11, 2, 5, seed=13)], 13, ["ids"], ["x", "last"]),
        ("op_trilu", TriluMask(), [rand(2, 4, 4, seed=14)], 14, ["x"], ["y"]),
        ("op_layernorm", LayerNormOp(), [rand(2, 3, 6, seed=15)], 17, ["x"], ["y"]),
        ("op_hardswish", HardSwishOp(), [rand(2, 8, seed=16) * 4], 14, ["x"], ["y"]),
        ("op_1d", randomize(OneD(), 17), [rand(2, 3, 19, seed=18)], 13, ["x"], ["max", "avg"]),
        ("resnet_tiny", randomize(tiny_resnet(), 20), [rand(1, 3, 32, 32, seed=21)], 11, ["image"], ["logits"]),
        ("mobilenet_v2_tiny", randomize(tiny_mobilenet_v2(), 22), [rand(1, 3, 32, 32, seed=23)], 12, ["image"],
         ["logits"]),
        ("mobilenet_v3_tiny", randomize(tiny_mobilenet_v3(), 24), [rand(1, 3, 32, 32, seed=25)], 14, ["image"],
         ["logits"]),
        ("mobilenet_v3_tiny_13", randomize(tiny_mobilenet_v3(), 24), [rand(1, 3, 32, 32, seed=25)], 13, ["image"],
         ["logits"]),
        ("squeezenet_tiny", randomize(tiny_squeezenet(), 26), [rand(1, 3, 33, 33, seed=27)], 11, ["image"],
         ["logits"]),
        ("vgg_tiny", randomize(tiny_vgg(), 28), [rand(1, 3, 32, 32, seed=29)], 15, ["image"], ["logits"]),
        ("gpt_tiny", Gpt(), [ids(50, 1, 12, seed=30)], 17, ["ids"], ["logits"]),
        ("gpt_tiny_14", Gpt(), [ids(50, 1, 12, seed=30)], 14, ["ids"], ["logits"]),
        ("bert_tiny", Bert(), [ids(60, 1, 8, seed=31), ids(2, 1, 8, seed=32), mask], 14, ["ids", "segments", "mask"],
         ["hidden", "pooled"]),
        ("unet_tiny", randomize(UNet(base=4), 45), [rand(1, 3, 16, 16, seed=46)], 13, ["image"], ["mask"]),
        ("ssd_tiny", randomize(SsdLite(classes=3, width=4, image=48), 53), [rand(1, 3, 48, 48, seed=54)], 13, ["image"],
         ["boxes", "scores", "selected"]),
        ("recurrent_tiny", Recurrent(), [rand(2, 5, 8, seed=48), rand(2, 2, 6, seed=49), rand(2, 2, 6, seed=50)], 14,
         ["x", "h0", "c0"], ["y", "h"]),
        ("swin_tiny", tiny_swin(), [rand(1, 3, 32, 32, seed=52)], 17, ["image"], ["logits"]),
    ]


class NmsRows(torch.autograd.Function):
    """ONNX NonMaxSuppression on boxes [B, N, 4] (y1, x1, y2, x2) and scores [B, C, N]: rows
    (batch, class, box) of the boxes kept, per batch and class in score order. torch
    computes the same selection with torchvision.ops.nms; the export is the one ONNX node."""

    @staticmethod
    def forward(ctx, boxes, scores, max_per_class, iou_threshold, score_threshold):
        rows = []
        for b in range(boxes.shape[0]):
            y1, x1, y2, x2 = boxes[b].unbind(-1)
            xyxy = torch.stack([torch.min(x1, x2), torch.min(y1, y2), torch.max(x1, x2), torch.max(y1, y2)], -1)
            for c in range(scores.shape[1]):
                candidates = torch.nonzero(scores[b, c] > score_threshold).flatten()
                kept = torchvision.ops.nms(xyxy[candidates], scores[b, c][candidates], iou_threshold)[:max_per_class]
                rows += [[b, c, i] for i in candidates[kept].tolist()]
        return torch.tensor(rows, dtype=torch.long).reshape(-1, 3)

    @staticmethod
    def symbolic(g, boxes, scores, max_per_class, iou_threshold, score_threshold):
        def const(value, dtype):
            return g.op("Constant", value_t=torch.tensor([value], dtype=dtype))
        return g.op("NonMaxSuppression", boxes, scores, const(max_per_class, torch.long),
                    const(iou_threshold, torch.float), const(score_threshold, torch.float))


class SsdLite(nn.Module):
    """An SSD-style detector: a conv backbone, box deltas and class scores per anchor on
    two feature maps (1/8 and 1/16 of the image), boxes decoded from fixed anchors,
    then NonMaxSuppression per class. Outputs the boxes, the scores and the selected rows
    (the post-NMS gather stays with the caller: carve refuses nodes that read a
    data-dependent extent, runtime/session.h)."""

    def __init__(self, classes=4, anchors=3, width=16, image=96):
        super().__init__()
        self.classes, self.anchors = classes, anchors
        w = width
        self.stem = nn.Sequential(conv_bn(3, w, s=2), conv_bn(w, 2 * w, s=2), conv_bn(2 * w, 4 * w, s=2))
        self.down = conv_bn(4 * w, 6 * w, s=2)
        self.loc = nn.ModuleList([nn.Conv2d(c, anchors * 4, 3, padding=1) for c in (4 * w, 6 * w)])
        self.conf = nn.ModuleList([nn.Conv2d(c, anchors * classes, 3, padding=1) for c in (4 * w, 6 * w)])
        priors = []  # (cy, cx, h, w) per cell and anchor, in image fractions
        for size in (image // 8, image // 16):
            for i in range(size):
                for j in range(size):
                    for k in range(anchors):
                        side = (k + 1) * 1.5 / size
                        priors.append([(i + 0.5) / size, (j + 0.5) / size, side, side * (0.5 + 0.5 * k)])
        self.register_buffer("priors", torch.tensor(priors))

    def forward(self, image):
        f1 = self.stem(image)
        f2 = self.down(f1)
        deltas = torch.cat([l(f).permute(0, 2, 3, 1).reshape(1, -1, 4) for l, f in zip(self.loc, (f1, f2))], 1)
        logits = torch.cat([c(f).permute(0, 2, 3, 1).reshape(1, -1, self.classes) for c, f in zip(self.conf, (f1, f2))], 1)
        p = self.priors
        cy = p[:, 0] + deltas[..., 0] * 0.1 * p[:, 2]
        cx = p[:, 1] + deltas[..., 1] * 0.1 * p[:, 3]
        h = p[:, 2] * torch.exp(deltas[..., 2] * 0.2)
        w = p[:, 3] * torch.exp(deltas[..., 3] * 0.2)
        boxes = torch.stack([cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2], -1)
        scores = torch.sigmoid(logits).transpose(1, 2).contiguous()  # C order in the .npy
        return boxes, scores, NmsRows.apply(boxes, scores, 10, 0.5, 0.3)


# The torchvision CNNs of --full (and of benchmarks/compare/compare.py --cnn): random
# weights, batch 1, the default constructor arguments.
CNNS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "squeezenet1_0",
        "vgg16", "densenet121", "inception_v3", "efficientnet_b0", "shufflenet_v2_x1_0", "mnasnet1_0",
        "regnet_y_400mf", "googlenet", "convnext_tiny"]


def cnn(name):
    """torchvision's NAME with the seeds the exports use (benchmarks/compare/worker.py
    rebuilds the same module with this, so torch runs the exported weights)."""
    kwargs = {}
    if name in ("inception_v3", "googlenet"):
        # Without pretrained weights both default to aux_logits=True and init_weights=None
        # (a warning); the aux heads are unused in eval mode, so leave them out of the module.
        kwargs = dict(aux_logits=False, init_weights=True)
    torch.manual_seed(1)
    return randomize(getattr(torchvision.models, name)(weights=None, **kwargs), 2)


def cnn_input(name):
    # inception_v3 is defined for 299x299 (the others 224x224).
    size = 299 if name == "inception_v3" else 224
    return [rand(1, 3, size, size, seed=40)]


# The transformer sweep of --full (and of benchmarks/compare/compare.py --transformers):
# PyTorch's own nn.TransformerEncoder, sequence-first [T, 1, 256] (bf0) and batch-first
# [1, T, 256] (bf1), at opset 13 (LayerNorm decomposed into ReduceMean/Sub/Pow/Sqrt/Div) and
# opset 17 (LayerNormalization); and the GPT/BERT-style models of gpt/bert with 512
# positions; each at T tokens. The plain gpt and bert (64 tokens, 128 positions) are the
# default set's.
SEQ_LENS = [32, 128, 512]
TRANSFORMERS = ([f"tenc_bf{bf}_op{opset}_t{t}" for bf in (0, 1) for opset in (13, 17) for t in SEQ_LENS]
                + [f"{m}_t{t}" for m in ("gpt", "bert") for t in SEQ_LENS])
FULL = CNNS + ["gpt", "bert", "unet", "swin_t", "ssd_lite"] + TRANSFORMERS


def transformer_encoder(batch_first):
    """nn.TransformerEncoder: 4 post-norm layers of width 256, 8 heads, MLP 1024 (ReLU),
    the same weights for both layouts."""
    torch.manual_seed(5)
    layer = nn.TransformerEncoderLayer(256, 8, 1024, dropout=0.0, batch_first=batch_first)
    return nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).eval()


def gpt_model(tokens, ctx):
    torch.manual_seed(3)
    return Gpt(vocab=1000, ctx=ctx, dim=256, heads=8, layers=4), [ids(1000, 1, tokens, seed=41)], 17, ["ids"], ["logits"]


def bert_model(tokens, ctx):
    torch.manual_seed(4)
    mask = torch.ones(1, tokens, dtype=torch.long)
    mask[0, tokens * 25 // 32:] = 0  # the last 22% padding (bert at 64 tokens: 50 real)
    return (Bert(vocab=1000, ctx=ctx, dim=256, heads=8, layers=4),
            [ids(1000, 1, tokens, seed=42), ids(2, 1, tokens, seed=43), mask], 14, ["ids", "segments", "mask"],
            ["hidden", "pooled"])


def full_model(name):
    """(module, inputs, opset, input names, output names) of the --full model NAME, built
    with its seeds (benchmarks/compare/worker.py rebuilds the same module with this, so
    torch runs the exported weights); None for an unknown name."""
    if name in CNNS:
        return cnn(name), cnn_input(name), 13, ["image"], ["logits"]
    if name == "gpt":
        return gpt_model(64, 128)
    if name == "bert":
        return bert_model(64, 128)
    if name == "unet":  # 256x256, 32/64/128 channels
        torch.manual_seed(6)
        return randomize(UNet(base=32), 47), [rand(1, 3, 256, 256, seed=48)], 13, ["image"], ["mask"]
    if name == "swin_t":  # torchvision's Swin-T (shifted windows: Roll -> Slice/Concat, Mod in the mask)
        torch.manual_seed(7)
        return randomize(torchvision.models.swin_t(weights=None), 8), [rand(1, 3, 224, 224, seed=49)], 17, ["image"], ["logits"]
    if name == "ssd_lite":  # 96x96, 4 classes, 540 anchors
        torch.manual_seed(7)
        return randomize(SsdLite(), 51), [rand(1, 3, 96, 96, seed=52)], 13, ["image"], ["boxes", "scores", "selected"]
    m = re.fullmatch(r"(gpt|bert)_t(\d+)", name)
    if m:
        return (gpt_model if m.group(1) == "gpt" else bert_model)(int(m.group(2)), max(512, int(m.group(2))))
    m = re.fullmatch(r"tenc_bf([01])_op(\d+)_t(\d+)", name)
    if m:
        bf, t = m.group(1) == "1", int(m.group(3))
        x = rand(t, 256, seed=44)  # the same tokens in both layouts
        return (transformer_encoder(bf), [x.unsqueeze(0) if bf else x.unsqueeze(1)], int(m.group(2)), ["src"],
                ["out"])
    return None


def full_models(only=None):
    """Yields (name, module, inputs, opset, input names, output names); a generator that
    builds a module only when it is reached and selected, since vgg16 alone is 0.5 GB."""
    for name in FULL:
        if only is None or name in only:
            yield (name, *full_model(name))


# ----------------------------------------------------------------------------- special files


def write_external(out_dir):
    """A model whose initializers live in an external data file at 64-byte aligned
    offsets (so carve maps them in place), plus one at an odd offset (copied)."""
    w = np.random.default_rng(50).standard_normal((4, 3)).astype(np.float32)
    b = np.random.default_rng(51).standard_normal((4,)).astype(np.float32)
    odd = np.random.default_rng(52).standard_normal((4,)).astype(np.float32)
    blobs, tensors, offset = [], [], 0
    for name, arr, align in [("w", w, 64), ("b", b, 64), ("odd", odd, 1)]:
        offset = (offset + 63) // 64 * 64 if align == 64 else offset + 1
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=arr.shape)
        t.data_location = TensorProto.EXTERNAL
        for k, v in [("location", "external_weights.bin"), ("offset", str(offset)), ("length", str(arr.nbytes))]:
            e = t.external_data.add()
            e.key, e.value = k, v
        tensors.append(t)
        blobs.append((offset, arr.tobytes()))
        offset += arr.nbytes
    data = bytearray(offset)
    for off, raw in blobs:
        data[off:off + len(raw)] = raw
    with open(os.path.join(out_dir, "external_weights.bin"), "wb") as f:
        f.write(bytes(data))
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1, name="fc"),
             helper.make_node("Add", ["g", "odd"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "external", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, os.path.join(out_dir, "external_weights.onnx"))
    x = np.random.default_rng(53).standard_normal((2, 3)).astype(np.float32)
    np.save(os.path.join(out_dir, "external_weights.input.x.npy"), x)
    np.save(os.path.join(out_dir, "external_weights.output.y.npy"), x @ w.T + b + odd)


def single_node(name, op, inputs, outputs, out_dir, opset=13, initializers=(), **attrs):
    node = helper.make_node(op, [i[0] for i in inputs] + [t.name for t in initializers],
                            [o[0] for o in outputs], name=name + "_node", **attrs)
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
                              list(initializers))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]),
              os.path.join(out_dir, name + ".onnx"))


def write_shape_input_model(out_dir):
    """reshape_by_input: y = Reshape(x f32[2,3], shape int64[rank]), the target shape a
    graph input (onnx::Model imports it as a value per run)."""
    node = helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")
    graph = helper.make_graph([node], "reshape_by_input",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("shape", TensorProto.INT64, ["rank"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]),
              os.path.join(out_dir, "reshape_by_input.onnx"))


def write_older_forms(out_dir):
    """Operator forms torch 1.13 does not emit: Split/Squeeze/ReduceMean/Pad/Clip from
    other opsets, Trilu lower with k, Range/ConstantOfShape over Shape, checked against numpy."""
    rng = np.random.default_rng(60)
    x = rng.standard_normal((2, 6, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Split", ["x"], ["s0", "s1"], axis=1, split=[2, 4], name="split"),
        helper.make_node("ReduceMean", ["s1"], ["m"], axes=[2], keepdims=1, name="mean"),
        helper.make_node("Squeeze", ["m"], ["sq"], axes=[2], name="squeeze"),
        helper.make_node("Unsqueeze", ["sq"], ["us"], axes=[0], name="unsqueeze"),
        helper.make_node("Pad", ["s0"], ["p"], mode="constant", pads=[0, 0, 1, 0, 1, 0], value=2.0, name="pad"),
        helper.make_node("Clip", ["p"], ["c"], min=-0.5, max=1.5, name="clip"),
        helper.make_node("Slice", ["c"], ["sl"], starts=[1], ends=[100], axes=[2], name="slice"),
    ]
    graph = helper.make_graph(nodes, "older", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("us", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("sl", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)]),
              os.path.join(out_dir, "forms_opset10.onnx"))
    s0, s1 = x[:, :2], x[:, 2:]
    us = s1.mean(axis=2, keepdims=True).squeeze(2)[None]
    p = np.pad(s0, [(0, 0), (0, 1), (1, 0)], constant_values=2.0)  # ONNX pads: all begins, then all ends
    np.save(os.path.join(out_dir, "forms_opset10.input.x.npy"), x)
    np.save(os.path.join(out_dir, "forms_opset10.output.us.npy"), us)
    np.save(os.path.join(out_dir, "forms_opset10.output.sl.npy"), np.clip(p, -0.5, 1.5)[:, :, 1:])

    i64 = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)
    nodes = [
        helper.make_node("Trilu", ["x", "k"], ["t"], upper=0, name="tril"),
        helper.make_node("Shape", ["x"], ["shape"], start=-1, name="shape"),
        helper.make_node("Squeeze", ["shape"], ["n"], name="scalar_n"),
        helper.make_node("Range", ["zero", "n", "one"], ["r"], name="range"),
        helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT, name="cast"),
        helper.make_node("ConstantOfShape", ["shape"], ["cs"], name="fill",
                         value=numpy_helper.from_array(np.array([3.0], dtype=np.float32))),
        helper.make_node("Add", ["t", "rf"], ["a"], name="add"),
        helper.make_node("Mul", ["a", "cs"], ["y"], name="mul"),
        helper.make_node("Cast", ["shape"], ["shape_f"], to=TensorProto.FLOAT, name="shape_float"),
        helper.make_node("Div", ["shape_f", "three"], ["third"], name="third"),
        helper.make_node("Floor", ["third"], ["fl"], name="floor"),
        helper.make_node("Ceil", ["third"], ["ce"], name="ceil"),
        helper.make_node("Add", ["fl", "ce"], ["flce"], name="add_rounded"),
        helper.make_node("Add", ["y", "flce"], ["y2"], name="add_y"),
        helper.make_node("ReduceSum", ["y2", "axes"], ["z"], keepdims=0, name="sum"),
        helper.make_node("Split", ["x", "sizes"], ["h0", "h1"], axis=2, name="split"),
        helper.make_node("Concat", ["h1", "h0"], ["swap"], axis=2, name="concat"),
    ]
    graph = helper.make_graph(nodes, "newer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("swap", TensorProto.FLOAT, None)],
                              [i64("k", 1), i64("zero", 0), i64("one", 1), i64("axes", [1]), i64("sizes", [1, 3]),
                               numpy_helper.from_array(np.array(3.0, dtype=np.float32), "three")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]),
              os.path.join(out_dir, "forms_opset15.onnx"))
    t = np.tril(x, k=1)
    y = (t + np.arange(4, dtype=np.float32)) * 3.0 + (np.floor(4 / 3) + np.ceil(4 / 3))
    np.save(os.path.join(out_dir, "forms_opset15.input.x.npy"), x)
    np.save(os.path.join(out_dir, "forms_opset15.output.z.npy"), y.sum(axis=1))
    np.save(os.path.join(out_dir, "forms_opset15.output.swap.npy"), np.concatenate([x[:, :, 1:], x[:, :, :1]], axis=2))


def write_edge_forms(out_dir):
    """Negative axes, reversed slices, non-last Softmax, 1-D MatMul, 2-D BatchNorm, Expand,
    Not/And/Or, Min/Max/Sum, Reciprocal, LeakyRelu (opset 13), checked against numpy."""
    rng = np.random.default_rng(70)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    v = rng.standard_normal((4,)).astype(np.float32)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    bn = [rng.uniform(0.5, 1.5, 4).astype(np.float32), rng.standard_normal(4).astype(np.float32),
          rng.standard_normal(4).astype(np.float32), rng.uniform(0.5, 2.0, 4).astype(np.float32)]
    i64 = lambda name, vals: numpy_helper.from_array(np.array(vals, dtype=np.int64), name)
    f32 = lambda name, vals: numpy_helper.from_array(np.array(vals, dtype=np.float32), name)
    node = helper.make_node
    nodes = [
        node("Unsqueeze", ["x", "ax_m1_0"], ["u"]), node("Squeeze", ["u", "ax_m1"], ["s"]),
        node("ReduceMean", ["s"], ["m"], axes=[-1], keepdims=0),
        node("Concat", ["s", "s"], ["c"], axis=-1),
        node("Gather", ["c", "idx"], ["g"], axis=-1), node("Flatten", ["g"], ["f"], axis=-1),
        node("Slice", ["c", "st", "en", "ax_m1", "step"], ["r"]),
        node("Softmax", ["c"], ["sm"], axis=1),
        node("MatMul", ["v", "w"], ["mv"]),
        node("BatchNormalization", ["x"] + ["bn%d" % i for i in range(4)], ["b"], epsilon=1e-3),
        node("Expand", ["col", "shape"], ["e"]),
        node("Greater", ["x", "zero"], ["pos"]), node("Not", ["pos"], ["neg"]),
        node("And", ["pos", "big"], ["and"]), node("Or", ["neg", "big"], ["or"]),
        node("Cast", ["or"], ["or_f"], to=TensorProto.FLOAT), node("Where", ["and", "x", "or_f"], ["wh"]),
        node("Max", ["x", "b", "wh"], ["mx"]), node("Min", ["x", "b"], ["mn"]), node("Sum", ["mx", "mn", "x"], ["sum"]),
        node("Reciprocal", ["den"], ["rc"]), node("LeakyRelu", ["x"], ["lr"], alpha=0.3),
        node("Add", ["sum", "rc"], ["t0"]), node("Add", ["t0", "lr"], ["y"]),
    ]
    col = rng.standard_normal((3, 1)).astype(np.float32)
    inits = [i64("ax_m1_0", [-1, 0]), i64("ax_m1", [-1]), i64("idx", [[0, -1]]), i64("st", [-1]),
             i64("en", [-(2 ** 63)]), i64("step", [-3]), f32("w", w), f32("zero", 0.0), i64("shape", [2, 1, 4])] + \
        [f32("bn%d" % i, bn[i]) for i in range(4)] + [f32("col", col)]
    outs = ["m", "f", "r", "sm", "mv", "e", "y"]
    graph = helper.make_graph(
        nodes, "edges",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape), helper.make_tensor_value_info("v", TensorProto.FLOAT, v.shape),
         helper.make_tensor_value_info("big", TensorProto.BOOL, [3, 1]), helper.make_tensor_value_info("den", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(out_dir, "forms_edges.onnx"))
    big = np.array([[True], [False], [True]])
    den = rng.uniform(0.5, 2.0, 4).astype(np.float32)
    s = x[None]
    c = np.concatenate([s, s], axis=-1)
    g = c[..., np.array([[0, 7]])]
    e = np.exp(c - c.max(axis=1, keepdims=True))
    b = (x - bn[2]) / np.sqrt(bn[3] + 1e-3) * bn[0] + bn[1]
    pos = x > 0
    wh = np.where(pos & big, x, (~pos | big).astype(np.float32))
    y = np.maximum(np.maximum(x, b), wh) + np.minimum(x, b) + x + 1.0 / den + np.where(x < 0, 0.3 * x, x)
    expected = {"m": s.mean(axis=-1), "f": g.reshape(-1, 2), "r": c[..., ::-3], "sm": e / e.sum(axis=1, keepdims=True),
                "mv": v @ w, "e": np.broadcast_to(col, (2, 3, 4)), "y": y}
    for name, arr in [("x", x), ("v", v), ("big", big), ("den", den)]:
        np.save(os.path.join(out_dir, f"forms_edges.input.{name}.npy"), arr)
    for name, arr in expected.items():
        np.save(os.path.join(out_dir, f"forms_edges.output.{name}.npy"), np.ascontiguousarray(arr, dtype=np.float32))


def write_misc_forms(out_dir):
    """Log, Less/LessOrEqual/GreaterOrEqual, Tile, GlobalMaxPool, LogSoftmax, ReduceMax/Min,
    Size and Round (folded), Dropout (opset 13), checked against numpy."""
    rng = np.random.default_rng(80)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    img = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    node = helper.make_node
    f = lambda name: helper.make_node("Cast", [name], [name + "_f"], to=TensorProto.FLOAT)
    nodes = [
        node("Abs", ["x"], ["ax"]), node("Add", ["ax", "one"], ["ax1"]), node("Log", ["ax1"], ["lg"]),
        node("Less", ["x", "zero"], ["lt"]), node("LessOrEqual", ["x", "zero"], ["le"]),
        node("GreaterOrEqual", ["x", "zero"], ["ge"]), f("lt"), f("le"), f("ge"),
        node("Size", ["x"], ["n"]), node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT), node("Div", ["nf", "five"], ["q"]),
        node("Round", ["q"], ["rq"]),
        node("Sum", ["lg", "lt_f", "le_f", "ge_f", "rq"], ["s0"]),
        node("Dropout", ["s0"], ["s"], ratio=0.5),
        node("Tile", ["s", "reps"], ["t"]),
        node("LogSoftmax", ["t"], ["ls"], axis=-1),
        node("ReduceMax", ["ls"], ["rmax"], axes=[1], keepdims=1),
        node("ReduceMin", ["ls"], ["rmin"], axes=[0], keepdims=0),
        node("GlobalMaxPool", ["img"], ["gmp"]),
    ]
    inits = [numpy_helper.from_array(np.array(v, dtype=np.float32), n) for n, v in [("one", 1.0), ("zero", 0.0), ("five", 5.0)]]
    inits.append(numpy_helper.from_array(np.array([2, 1], dtype=np.int64), "reps"))
    outs = ["rmax", "rmin", "gmp"]
    graph = helper.make_graph(nodes, "misc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                                              helper.make_tensor_value_info("img", TensorProto.FLOAT, img.shape)],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(out_dir, "forms_misc.onnx"))
    s = np.log(np.abs(x) + 1) + (x < 0) + (x <= 0) + (x >= 0) + np.round(12 / 5)
    t = np.tile(s, (2, 1))
    ls = t - t.max(axis=-1, keepdims=True)
    ls = ls - np.log(np.exp(ls).sum(axis=-1, keepdims=True))
    np.save(os.path.join(out_dir, "forms_misc.input.x.npy"), x)
    np.save(os.path.join(out_dir, "forms_misc.input.img.npy"), img)
    for name, arr in [("rmax", ls.max(axis=1, keepdims=True)), ("rmin", ls.min(axis=0)),
                      ("gmp", img.max(axis=(2, 3), keepdims=True))]:
        np.save(os.path.join(out_dir, f"forms_misc.output.{name}.npy"), arr.astype(np.float32))


def write_layernorm_forms(out_dir):
    """Decomposed LayerNorms as exporters write them (carve imports a full one as one
    layer_norm, onnx/src/patterns.cpp): `a` squares with Mul(d, d), takes eps from an
    initializer and puts gamma/beta first in Mul/Add; `b` has no beta and its mean is also
    a graph output, so it must stay unfused. Checked against numpy."""
    rng = np.random.default_rng(81)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    gamma = rng.standard_normal(8).astype(np.float32)
    beta = rng.standard_normal(8).astype(np.float32)
    node = helper.make_node
    nodes = [
        node("ReduceMean", ["x"], ["ma"], axes=[-1]), node("Sub", ["x", "ma"], ["da"]), node("Mul", ["da", "da"], ["pa"]),
        node("ReduceMean", ["pa"], ["va"], axes=[-1]), node("Add", ["va", "eps"], ["vea"]), node("Sqrt", ["vea"], ["sa"]),
        node("Div", ["da", "sa"], ["na"]), node("Mul", ["gamma", "na"], ["ga"]), node("Add", ["beta", "ga"], ["ya"]),
        node("ReduceMean", ["ya"], ["mb"], axes=[-1]), node("Sub", ["ya", "mb"], ["db"]),
        node("Constant", [], ["two"], value=numpy_helper.from_array(np.array(2.0, dtype=np.float32))),
        node("Pow", ["db", "two"], ["pb"]), node("ReduceMean", ["pb"], ["vb"], axes=[-1]),
        node("Add", ["vb", "eps"], ["veb"]), node("Sqrt", ["veb"], ["sb"]), node("Div", ["db", "sb"], ["nb"]),
        node("Mul", ["nb", "gamma"], ["yb"]),
    ]
    inits = [numpy_helper.from_array(np.array(1e-5, dtype=np.float32), "eps"), numpy_helper.from_array(gamma, "gamma"),
             numpy_helper.from_array(beta, "beta")]
    outs = ["ya", "yb", "mb"]
    graph = helper.make_graph(nodes, "layernorm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              os.path.join(out_dir, "forms_layernorm.onnx"))

    def layer_norm(v):
        d = v.astype(np.float64) - v.mean(axis=-1, keepdims=True, dtype=np.float64)
        return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5)

    ya = layer_norm(x) * gamma + beta
    np.save(os.path.join(out_dir, "forms_layernorm.input.x.npy"), x)
    for name, arr in [("ya", ya), ("yb", layer_norm(ya.astype(np.float32)) * gamma),
                      ("mb", ya.astype(np.float32).mean(axis=-1, keepdims=True, dtype=np.float64))]:
        np.save(os.path.join(out_dir, f"forms_layernorm.output.{name}.npy"), arr.astype(np.float32))


def write_pad_pool_forms(out_dir):
    """Zero Pad before AveragePool, as PyTorch exports avg_pool2d(padding=p) with
    count_include_pad (carve imports it as one avg_pool with pads, onnx/src/patterns.cpp):
    `a` (pads from a Constant node) and `b` (stride 2, uneven pads and a zero
    constant_value from initializers) are fused; `c` pads with 0.5 and `d`'s padded tensor
    is also a graph output, so both stay a Pad and a pool. Checked against numpy."""
    rng = np.random.default_rng(82)
    x = rng.standard_normal((1, 3, 7, 9)).astype(np.float32)
    node = helper.make_node
    pads1 = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int64))
    nodes = [
        node("Constant", [], ["pads1"], value=pads1), node("Pad", ["x", "pads1"], ["xa"], mode="constant"),
        node("AveragePool", ["xa"], ["a"], kernel_shape=[3, 3], pads=[0, 0, 0, 0], strides=[1, 1]),
        node("Pad", ["x", "pads2", "zero"], ["xb"]),
        node("AveragePool", ["xb"], ["b"], kernel_shape=[3, 3], strides=[2, 2]),
        node("Pad", ["x", "pads1", "half"], ["xc"]), node("AveragePool", ["xc"], ["c"], kernel_shape=[3, 3]),
        node("Pad", ["x", "pads1"], ["pd"]), node("AveragePool", ["pd"], ["d"], kernel_shape=[3, 3]),
    ]
    inits = [numpy_helper.from_array(np.array([0, 0, 1, 2, 0, 0, 2, 1], dtype=np.int64), "pads2"),
             numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero"),
             numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half")]
    outs = ["a", "b", "c", "d", "pd"]
    graph = helper.make_graph(nodes, "pad_pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              os.path.join(out_dir, "forms_pad_pool.onnx"))

    def pad(v, top, left, bottom, right, value=0.0):
        return np.pad(v.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=value)

    def avg(v, k, s):
        oh, ow = (v.shape[2] - k) // s + 1, (v.shape[3] - k) // s + 1
        out = np.zeros(v.shape[:2] + (oh, ow))
        for i in range(oh):
            for j in range(ow):
                out[:, :, i, j] = v[:, :, i * s:i * s + k, j * s:j * s + k].mean(axis=(2, 3))
        return out

    np.save(os.path.join(out_dir, "forms_pad_pool.input.x.npy"), x)
    p1 = pad(x, 1, 1, 1, 1)
    results = [("a", avg(p1, 3, 1)), ("b", avg(pad(x, 1, 2, 2, 1), 3, 2)), ("c", avg(pad(x, 1, 1, 1, 1, 0.5), 3, 1)),
               ("d", avg(p1, 3, 1)), ("pd", p1)]
    for name, arr in results:
        np.save(os.path.join(out_dir, f"forms_pad_pool.output.{name}.npy"), arr.astype(np.float32))


def write_io_forms(out_dir):
    """Outputs that are an input, an initializer, or aliases (Identity) of one value; a
    symbolic batch dim (imported as 1)."""
    nodes = [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Identity", ["c"], ["z"]),
             helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["r2"])]
    graph = helper.make_graph(nodes, "io", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ["y", "z", "r", "r2", "x"]],
                              [numpy_helper.from_array(np.arange(3, dtype=np.float32), "c")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(out_dir, "forms_io.onnx"))
    x = np.array([[-1, 2, -3]], dtype=np.float32)
    np.save(os.path.join(out_dir, "forms_io.input.x.npy"), x)
    for name, arr in [("y", x), ("z", np.arange(3, dtype=np.float32)), ("r", np.maximum(x, 0)), ("r2", np.maximum(x, 0)),
                      ("x", x)]:
        np.save(os.path.join(out_dir, f"forms_io.output.{name}.npy"), arr)


def write_error_models(out_dir):
    """Models carve must reject with a clear error (listed in errors.txt: file, expected text)."""
    # StringNormalizer: a string op (carve has no string tensors).
    single_node("err_unsupported_op", "StringNormalizer", [("x", [2, 3])], [("y", [2, 3])], out_dir)
    single_node("err_pad_wrap", "Pad", [("x", [2, 3])], [("y", [2, 5])], out_dir, opset=13,
                initializers=[numpy_helper.from_array(np.array([0, 1, 0, 1], dtype=np.int64), "pads")],
                mode="wrap")
    single_node("err_unknown_attr", "Relu", [("x", [2, 3])], [("y", [2, 3])], out_dir, frobnicate=3)
    single_node("err_conv3d", "Conv", [("x", [1, 1, 3, 3, 3])], [("y", [1, 1, 1, 1, 1])], out_dir,
                initializers=[numpy_helper.from_array(np.ones((1, 1, 3, 3, 3), dtype=np.float32), "w")])
    single_node("err_dynamic_reshape", "Reshape", [("x", [2, 3]), ("shape", [2])], [("y", [3, 2])], out_dir)
    with open(os.path.join(out_dir, "errors.txt"), "w") as f:
        f.write("# model | text the error must contain (ONNX node name, op type, what is missing)\n")
        f.write("err_unsupported_op|onnx node 'err_unsupported_op_node' (StringNormalizer): operator is not supported\n")
        f.write("err_pad_wrap|onnx node 'err_pad_wrap_node' (Pad): mode='wrap'\n")
        f.write("err_unknown_attr|onnx node 'err_unknown_attr_node' (Relu): attribute 'frobnicate' is not supported\n")
        f.write("err_conv3d|onnx node 'err_conv3d_node' (Conv): weights of rank 5\n")
        f.write("err_dynamic_reshape|onnx node 'err_dynamic_reshape_node' (Reshape): input 1 (shape) must be a constant\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", metavar="DIR", help="export the full-size models to DIR instead")
    parser.add_argument("--only", help="comma-separated model names")
    args = parser.parse_args()
    out_dir = args.full or SMALL_DIR
    os.makedirs(out_dir, exist_ok=True)
    only = args.only.split(",") if args.only else None
    models = full_models(only) if args.full else small_models()  # full: built one at a time
    if only and not args.full:
        models = [m for m in models if m[0] in only]
    seen = set()
    for name, model, inputs, opset, input_names, output_names in models:
        seen.update(export(model, name, inputs, opset, out_dir, input_names, output_names))
    if args.full or args.only:
        return
    seen.update(dynamic_bert(out_dir))
    bert_lengths(out_dir)
    write_shape_input_model(out_dir)
    write_external(out_dir)
    write_older_forms(out_dir)
    write_edge_forms(out_dir)
    write_io_forms(out_dir)
    write_misc_forms(out_dir)
    write_layernorm_forms(out_dir)
    write_pad_pool_forms(out_dir)
    write_error_models(out_dir)
    names = [m[0] for m in models] + ["bert_dynamic", "external_weights", "forms_opset10", "forms_opset15", "forms_edges", "forms_io", "forms_misc",
                                          "forms_layernorm", "forms_pad_pool"]
    with open(os.path.join(out_dir, "manifest.txt"), "w") as f:
        f.write("".join(n + "\n" for n in names))
    print("ONNX ops covered by the torch exports:", " ".join(sorted(seen)))


if __name__ == "__main__":
    sys.exit(main())
