"""Benchmark the smoke-train model on synthetic batches: the document mask's cost and the chunked
loss's memory, without running the pipeline.

    .venv/bin/python bench/bench_train.py                       # demo model, vocab 95K, seq 256
    .venv/bin/python bench/bench_train.py --vocab 8000 --seq-len 1024 --docs 4
    .venv/bin/python bench/bench_train.py --loss-memory         # chunked vs full logits, peak RSS

Mask cost: forward+backward tokens/s with the block-diagonal mask (``--docs`` documents of equal
length per window) vs plain causal attention, alternating, fastest of ``--steps`` each. Loss
memory: the output projection + cross-entropy of ``--micro-batch x --seq-len`` positions, each
variant in its own process so that ``ru_maxrss`` is its own peak. Results also go to
``bench/out/bench_train.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from minideepseek.train.heap import keep_heap  # noqa: E402
from minideepseek.train.loss import chunked_lm_loss, full_lm_loss  # noqa: E402
from minideepseek.train.model import GPT, ModelConfig  # noqa: E402


def mask_cost(a: argparse.Namespace) -> dict:
    torch.manual_seed(0)
    m = GPT(ModelConfig(a.vocab, a.layers, a.d_model, a.heads, a.seq_len))
    B, T = a.micro_batch, a.seq_len
    x, y = torch.randint(3, a.vocab, (B, T)), torch.randint(3, a.vocab, (B, T))
    seg = (torch.arange(T) * a.docs // T).expand(B, T).contiguous()
    pos = torch.arange(T) - (seg[0] * T // a.docs)
    pos = pos.expand(B, T).contiguous()

    def one(mask: bool) -> float:
        t0 = time.perf_counter()
        m(x, y, seg if mask else None, pos if mask else None, a.loss_chunk).backward()
        m.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    one(True), one(False)
    best = {True: float("inf"), False: float("inf")}
    for _ in range(a.steps):
        for mask in (True, False):
            best[mask] = min(best[mask], one(mask))
    n = B * T
    return {"vocab": a.vocab, "seq_len": T, "micro_batch": B, "docs_per_window": a.docs,
            "with_mask_tok_s": round(n / best[True]), "without_mask_tok_s": round(n / best[False]),
            "mask_cost_pct": round(100 * (best[True] / best[False] - 1), 1)}


def loss_child(variant: str, a: argparse.Namespace) -> dict:
    torch.manual_seed(0)
    N = a.micro_batch * a.seq_len
    h = (torch.randn(N, a.d_model)).requires_grad_()
    w = (torch.randn(a.vocab, a.d_model) * 0.02).requires_grad_()
    t = torch.randint(0, a.vocab, (N,))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    loss = chunked_lm_loss(h, w, t, a.loss_chunk) if variant == "chunked" else full_lm_loss(h, w, t)
    loss.backward()
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"variant": variant, "positions": N, "vocab": a.vocab, "chunk": a.loss_chunk if variant == "chunked" else N,
            "s": round(dt, 3), "peak_rss_mb": round(peak / 1024), "added_mb": round((peak - base) / 1024),
            "full_logits_mb": round(N * a.vocab * 4 / 2**20)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vocab", type=int, default=94_992)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--docs", type=int, default=4, help="documents per window for the mask")
    p.add_argument("--loss-chunk", type=int, default=1024)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--loss-memory", action="store_true", help="compare chunked vs full loss memory instead")
    p.add_argument("--child", choices=["chunked", "full"], help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    keep_heap()
    if a.child:
        print(json.dumps(loss_child(a.child, a)))
        return 0
    if a.loss_memory:
        rows = []
        for variant in ("chunked", "full"):
            rest = [x for x in (argv or sys.argv[1:]) if x != "--loss-memory"]
            args = [sys.executable, __file__, "--child", variant, *rest]
            rows.append(json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout))
        result = {"loss_memory": rows}
    else:
        result = {"mask_cost": mask_cost(a), "threads": torch.get_num_threads()}
    print(json.dumps(result, indent=2))
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_train.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
