"""Memory of the mixture sampler per billion training tokens (indices only), and its speed.

    .venv/bin/python bench/bench_mixture_memory.py

Builds a sampler over 5 sources with 1M training windows in all, draws 20,000 samples (crossing a
phase switch), and reports the bytes it holds (tracemalloc, numpy arrays included) per window and
per billion tokens at seq_len 4096 and 256, and the draw rate."""

import time
import tracemalloc

import numpy as np

from minideepseek.train.mixture import MixtureSampler

N = 1_000_000
W = {"a": 0.4, "b": 0.25, "c": 0.15, "d": 0.1, "e": 0.1}
tracemalloc.start()
base = tracemalloc.get_traced_memory()[0]
sizes = np.array([0.4, 0.25, 0.15, 0.1, 0.1]) * N
sources, lo = {}, 0
for n, k in zip(W, sizes.astype(int)):
    sources[n] = np.arange(lo, lo + k, dtype=np.int64)
    lo += k
m = MixtureSampler(sources, [(0.8, W), (1.0, {"a": 0.2, "b": 0.35, "c": 0.25, "d": 0.1, "e": 0.1})], 1, 1000, 4,
                   grad_accum=1, world=5)
st = m.initial()
for _ in range(1000):
    _, _, st = m.micro_batch_at(st)
held = tracemalloc.get_traced_memory()[0] - base
per_window = held / lo
tracemalloc.stop()  # it hooks every allocation: time without it
st = m.initial()
t0 = time.perf_counter()
for _ in range(1000):
    _, _, st = m.micro_batch_at(st)
dt = time.perf_counter() - t0
print(f"windows {lo:,}; held {held / 2**20:.1f} MiB = {per_window:.1f} bytes/window; per billion tokens: "
      f"{per_window * 1e9 / 4096 / 2**20:.1f} MiB at seq_len 4096, {per_window * 1e9 / 256 / 2**20:.1f} MiB at 256; "
      f"{st.slot / dt:,.0f} samples/s drawn")
t0 = time.perf_counter()
m.state_at(25_000)
print(f"state_at(25,000 micro-batches = {25_000 * 4:,} slots) replay: {time.perf_counter() - t0:.3f} s")
