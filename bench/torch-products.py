"""The two product rules of the torch backend's BatchMatMul on CPU, measured with PyTorch's own
ATen kernels (the ones the addon calls): a few rows against a large transposed weight (x·Wᵀ
against (W·xᵀ)ᵀ), and a weight held in bfloat16 (a bfloat16 product against a float32 copy of the
weight). Run it with the torch the backend was set up with, on a quiet machine:

    PYTHONPATH=.torch/build/site python3 bench/torch-products.py [threads]

Prints milliseconds per product (best of 5 runs of 10). Figures only.
"""
import sys
import time

import torch


def best_ms(f, reps=10, runs=5):
    for _ in range(2):
        f()
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        for _ in range(reps):
            f()
        best = min(best, (time.perf_counter() - t) / reps * 1e3)
    return best


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    n, k = 6144, 2048
    w = torch.randn(n, k)
    wb = w.bfloat16()
    print(f"torch {torch.__version__}, {threads} threads, weight [{n}, {k}] (ms per product)\n")
    print("| rows | x·Wᵀ | (W·xᵀ)ᵀ | bf16 W: bf16 product | bf16 W: float32 copy, then product |")
    print("|---|---|---|---|---|")
    for m in [1, 2, 4, 8, 16, 32, 64, 300]:
        x = torch.randn(m, k)
        direct = best_ms(lambda: x @ w.t())
        flipped = best_ms(lambda: (w @ x.t()).t())
        slow = m > 32  # the bfloat16 product takes seconds per call at many rows here
        bf16 = best_ms(lambda: (x.bfloat16() @ wb.t()).float(), reps=1 if slow else 10, runs=1 if slow else 5)
        copy = best_ms(lambda: x @ wb.float().t())
        print(f"| {m} | {direct:.2f} | {flipped:.2f} | {bf16:.2f} | {copy:.2f} |")


if __name__ == "__main__":
    main()
