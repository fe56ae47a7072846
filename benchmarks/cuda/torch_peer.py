#!/usr/bin/env python3
"""PyTorch on the same GPU as bench_cuda, for the same-run ratios in docs/benchmarks.md.

Prints one line per measurement: f32 matmul n x n x n (cuBLAS through torch.matmul) with
TF32 off and on, and torchvision resnet18 (random weights, eval, batch 1, 224x224) eager
and replayed as a CUDA graph, TF32 off and on. Times are medians of CUDA-event timings.
Usage: python3 benchmarks/cuda/torch_peer.py   (needs torch + torchvision with CUDA)
"""
import statistics

import torch
import torchvision


def median_ms(fn, iters=50, warmup=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def set_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def main():
    dev = torch.device("cuda")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    for tf32 in (False, True):
        set_tf32(tf32)
        for n in (1024, 2048, 4096):
            a = torch.randn(n, n, device=dev)
            b = torch.randn(n, n, device=dev)
            ms = median_ms(lambda: torch.matmul(a, b))
            print(f"torch matmul n={n} tf32={int(tf32)}: {ms * 1e3:.1f} us, {2 * n ** 3 / ms / 1e9:.1f} TFLOPS")
    model = torchvision.models.resnet18().eval().to(dev)
    x = torch.randn(1, 3, 224, 224, device=dev)
    for tf32 in (False, True):
        set_tf32(tf32)
        with torch.no_grad():
            eager = median_ms(lambda: model(x))
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    model(x)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                model(x)
            replay = median_ms(graph.replay)
        print(f"torch resnet18 tf32={int(tf32)}: eager {eager * 1e3:.0f} us, cuda graph {replay * 1e3:.0f} us")


if __name__ == "__main__":
    main()
