#!/usr/bin/python3
"""torch_mha.py - time torch.nn.MultiheadAttention on the inputs bench_attention uses.

The weights and the input come from the same counter-based generator as
bench_attention.c (splitmix64 of seed and index, then exact float32 steps),
so both programs compute the very same layer on the very same numbers, and
bench_attention compares the outputs before it compares the times.

Two ways to run it, always with Debian's interpreter (/usr/bin/python3, the one
that has torch):
  /usr/bin/python3 tests/bench/torch_mha.py --n 128 --E 256 --H 8 [--need-weights] [--causal]
      one case, prints the median time
  /usr/bin/python3 tests/bench/torch_mha.py --serve --threads 2
      what bench_attention does: reads "case n E H need_weights causal
      min_runs min_time out_path" lines on stdin, answers "result median_ms runs
      maxrss_kib" (or "error message") on stdout, so both sides are timed
      interleaved in one run without paying torch's import per case.
"""
import argparse
import ctypes
import math
import os
import resource
import sys
import time

MASK64 = (1 << 64) - 1

# Tensor streams, shared with bench_attention.c: (seed, scale).
SEED_X, SEED_IN_W, SEED_IN_B, SEED_OUT_W, SEED_OUT_B = 1, 2, 3, 4, 5


def stream(np, seed, count, scale):
    """count float32 values in [-scale, scale): bit-identical to bench_value() in C."""
    base = (seed * 0xD1B54A32D192ED03) & MASK64
    i = np.arange(1, count + 1, dtype=np.uint64)
    z = np.uint64(base) + i * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-24)
    return (u * np.float32(2.0) - np.float32(1.0)) * np.float32(scale)


def make_layer(torch, np, E, H):
    mha = torch.nn.MultiheadAttention(E, H, bias=True, batch_first=True).eval()
    ws = 1.0 / math.sqrt(E)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(stream(np, SEED_IN_W, 3 * E * E, ws).reshape(3 * E, E)))
        mha.in_proj_bias.copy_(torch.from_numpy(stream(np, SEED_IN_B, 3 * E, 0.1)))
        mha.out_proj.weight.copy_(torch.from_numpy(stream(np, SEED_OUT_W, E * E, ws).reshape(E, E)))
        mha.out_proj.bias.copy_(torch.from_numpy(stream(np, SEED_OUT_B, E, 0.1)))
    return mha


def blas_kernel():
    """The OpenBLAS kernel torch's libblas.so.3 runs on, when it is OpenBLAS."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return "OpenBLAS " + lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return "unknown BLAS"


def run_case(torch, np, layers, n, E, H, need_weights, causal, min_runs, min_time, out_path):
    if (E, H) not in layers:
        layers.clear()  # one layer at a time keeps memory down
        layers[(E, H)] = make_layer(torch, np, E, H)
    mha = layers[(E, H)]
    x = torch.from_numpy(stream(np, SEED_X, n * E, 1.0).reshape(1, n, E))
    # causal: key j hidden from query i when j > i, as a boolean attn_mask
    # (True: not allowed); torch 1.13's MultiheadAttention has no is_causal
    mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1) if causal else None
    with torch.inference_mode():
        out, _ = mha(x, x, x, need_weights=need_weights, attn_mask=mask)  # warm-up, and the output compared
        if out_path and out_path != "-":
            out.contiguous().numpy().astype(np.float32).tofile(out_path)
        del out
        times = []
        start = time.perf_counter()
        while len(times) < 1000 and (len(times) < min_runs or time.perf_counter() - start < min_time):
            t0 = time.perf_counter()
            out, _ = mha(x, x, x, need_weights=need_weights, attn_mask=mask)
            times.append(time.perf_counter() - t0)
            del out
    times.sort()
    k = len(times)
    median = times[k // 2] if k % 2 else 0.5 * (times[k // 2 - 1] + times[k // 2])
    return median * 1e3, k


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--serve", action="store_true", help="answer case lines on stdin (for bench_attention)")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--E", type=int, default=256)
    ap.add_argument("--H", type=int, default=8)
    ap.add_argument("--need-weights", action="store_true")
    ap.add_argument("--causal", action="store_true", help="the causal mask (a boolean attn_mask)")
    ap.add_argument("--min-runs", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=1.0)
    args = ap.parse_args()

    try:
        import numpy as np
        import torch
    except ImportError as e:
        print(f"error cannot import torch/numpy with {sys.executable}: {e}", flush=True)
        return 1
    torch.set_num_threads(args.threads)
    layers = {}

    if not args.serve:
        ms, runs = run_case(torch, np, layers, args.n, args.E, args.H, args.need_weights,
                            args.causal, args.min_runs, args.min_time, None)
        print(f"torch {torch.__version__} threads {torch.get_num_threads()} {blas_kernel()}: "
              f"n={args.n} E={args.E} H={args.H} need_weights={args.need_weights} causal={args.causal}: "
              f"median {ms:.3f} ms over {runs} runs")
        return 0

    print(f"ready torch {torch.__version__}, {torch.get_num_threads()} threads, {blas_kernel()}, "
          f"oneDNN {'on' if torch.backends.mkldnn.is_available() else 'off'}, "
          f"OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY', 'unset')}", flush=True)
    for line in sys.stdin:
        f = line.split()
        if not f:
            continue
        try:
            if f[0] != "case" or len(f) != 9:
                raise ValueError(f"bad request {line.strip()!r}")
            n, E, H, need, causal = int(f[1]), int(f[2]), int(f[3]), f[4] == "1", f[5] == "1"
            ms, runs = run_case(torch, np, layers, n, E, H, need, causal, int(f[6]), float(f[7]), f[8])
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            print(f"result {ms:.6f} {runs} {rss}", flush=True)
        except Exception as e:  # report and go on: one failed case must not end the run
            print(f"error {type(e).__name__}: {e}".replace("\n", " "), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
