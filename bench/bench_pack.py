"""Stage 4 throughput and memory: bare ``encode_batch_fast`` vs our tokenize+pack+shuffle+write path
on the same texts and threads, then peak RSS of packing the demo (1x) and 10x the demo.

    .venv/bin/python bench/bench_pack.py                       # demo run, all cores
    .venv/bin/python bench/bench_pack.py --threads 1 --reps 3

"bare" is HF ``encode_batch_fast`` alone; "full" is the stage's path, which encodes with tiktoken when
it reproduces the ids (``minideepseek/fastbpe.py``, ``pack.encoder: auto``), so the ratio is the
stage's speed-up over bare HF.

Needs the demo's mixed_dedup and tokenizer (``bash run_pipeline.sh``). The 10x run replicates the
demo's documents ten times with distinct ids and streams them from the memory-mapped upstream, so
nothing holds the whole token stream; each RSS run is its own subprocess, and reads its own peak (VmHWM).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minideepseek.arrow_io import shard_paths  # noqa: E402
from minideepseek.fastbpe import encoder_summary  # noqa: E402
from minideepseek.mapped import MappedArrow  # noqa: E402
from minideepseek.packing.config import PackConfig, PackStageConfig  # noqa: E402
from minideepseek.packing.packer import DocBatch, pack_documents  # noqa: E402
from minideepseek.rng import rng_for  # noqa: E402
from minideepseek.runconfig import load_stage_config  # noqa: E402
from minideepseek.tokenizer.io import char_slices, load_tokenizer  # noqa: E402


def rss_mb() -> float:
    """Peak RSS of this process image in MiB: VmHWM, not ru_maxrss, which Linux carries over from the
    parent across fork+exec (a child of a 400 MB parent reports >= 400 MB before doing anything)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def batches_in_memory(ids: list[str], sources: list[str], texts: list[str], bd: int) -> Iterator[DocBatch]:
    for i in range(0, len(texts), bd):
        yield DocBatch(ids[i:i + bd], sources[i:i + bd], texts[i:i + bd])


def bare(tok, texts: list[str], bd: int, sliced: bool) -> tuple[int, float]:  # type: ignore[no-untyped-def]
    """Tokens and seconds of encode_batch_fast alone (no ids materialized, nothing written), on
    batches of ``bd`` docs, or (``sliced``) on the ~2M-char slices the packer itself encodes: the
    baseline is the faster of the two, so the ratio is not flattered by the packer's slicing."""
    t0 = time.perf_counter()
    n = 0
    for i in range(0, len(texts), bd):
        batch = texts[i:i + bd]
        for lo, hi in char_slices(batch) if sliced else [(0, len(batch))]:
            n += sum(len(e) for e in tok.encode_batch_fast(batch[lo:hi], add_special_tokens=False))
    return n, time.perf_counter() - t0


def full(tok, pc: PackConfig, ids, sources, texts) -> tuple[int, float, dict]:  # type: ignore[no-untyped-def]
    """Tokens and seconds of the stage's pack_documents (tokenize, pack, shuffle, write shards)."""
    with tempfile.TemporaryDirectory(prefix="bench_pack_") as tmp:
        t0 = time.perf_counter()
        st = pack_documents(batches_in_memory(ids, sources, texts, pc.batch_docs), tok, pc,
                            rng_for(1, "pack", "blocks"), Path(tmp) / "out", Path(tmp) / "work")
        dt = time.perf_counter() - t0
    return st.content_tokens, dt, {"blocks": st.blocks, "pack_s": round(st.pack_s, 2),
                                   "write_s": round(st.write_s, 2)}


def child(args: argparse.Namespace, run_dir: Path) -> None:
    """One RSS measurement: stream the demo ``--copies`` times through pack_documents."""
    pc = PackConfig(batch_docs=args.batch_docs, num_threads=args.threads, seq_len=args.seq_len)
    tok = load_tokenizer(run_dir / "tokenizer" / "tokenizer.json", args.threads)
    docs = MappedArrow(shard_paths(run_dir / "mixed_dedup"), "stream", columns=["id", "source", "text"])
    import numpy as np

    base = rss_mb()

    def stream() -> Iterator[DocBatch]:
        for rep in range(args.copies):
            for j in range(0, docs.num_rows, pc.batch_docs):
                t = docs.take(np.arange(j, min(j + pc.batch_docs, docs.num_rows)))
                docs.release()
                yield DocBatch([f"{d}#r{rep}" for d in t.column("id").to_pylist()], t.column("source").to_pylist(),
                               t.column("text").to_pylist())

    with tempfile.TemporaryDirectory(prefix="bench_pack_rss_") as tmp:
        t0 = time.perf_counter()
        st = pack_documents(stream(), tok, pc, rng_for(1, "pack", "blocks"), Path(tmp) / "out", Path(tmp) / "work")
        wall = time.perf_counter() - t0
        out_bytes = sum(s["bytes"] for s in st.shards)
    print(json.dumps({"copies": args.copies, "docs": st.docs, "tokens": st.tokens_produced, "blocks": st.blocks,
                      "shards": len(st.shards), "output_mb": round(out_bytes / 2**20, 1), "wall_s": round(wall, 1),
                      "tokens_per_s": round(st.tokens_produced / wall), "rss_before_pack_mb": base,
                      "peak_rss_mb": rss_mb()}))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/demo.yaml")
    p.add_argument("--threads", type=int, default=0, help="tokenizer threads (0 = all cores)")
    p.add_argument("--batch-docs", type=int, default=256)
    p.add_argument("--seq-len", type=int, default=4096)
    p.add_argument("--reps", type=int, default=2, help="alternating bare/full repetitions (best of each)")
    p.add_argument("--copies", type=int, default=0, help=argparse.SUPPRESS)  # child mode
    p.add_argument("--skip-rss", action="store_true")
    args = p.parse_args()
    run_dir = load_stage_config(PackStageConfig, args.config, quiet=True).run.run_dir
    if args.copies:
        child(args, run_dir)
        return 0

    import datasets

    ds = datasets.load_from_disk(str(run_dir / "mixed_dedup"))
    ids, sources, texts = ds["id"], ds["source"], ds["text"]
    pc = PackConfig(batch_docs=args.batch_docs, num_threads=args.threads, seq_len=args.seq_len)
    tok = load_tokenizer(run_dir / "tokenizer" / "tokenizer.json", args.threads)
    print(f"{len(texts):,} docs, {sum(map(len, texts)):,} chars; threads={args.threads or 'all'}, "
          f"batch_docs={args.batch_docs}, seq_len={args.seq_len}")
    bare(tok, texts[:64], args.batch_docs, False)  # warm the thread pool
    best_bare = best_full = 0.0
    for r in range(args.reps):
        for sliced in (False, True):
            n, dt = bare(tok, texts, args.batch_docs, sliced)
            best_bare = max(best_bare, n / dt)
            print(f"  rep {r}: bare encode_batch_fast ({'2M-char slices' if sliced else f'{args.batch_docs} docs'}) "
                  f"{n:,} tokens in {dt:.2f} s = {n / dt:,.0f} tokens/s")
        n2, dt2, info = full(tok, pc, ids, sources, texts)
        assert n2 == n, "both paths see the same tokens"
        best_full = max(best_full, n2 / dt2)
        print(f"  rep {r}: tokenize+pack+shuffle+write {n2:,} tokens in {dt2:.2f} s = {n2 / dt2:,.0f} tokens/s {info}")
    engine = encoder_summary(tok)
    print(f"best: bare {best_bare:,.0f} tokens/s, full {best_full:,.0f} tokens/s, ratio {best_full / best_bare:.3f} "
          f"(target >= 2.0 with the tiktoken encoder); full encoder: {engine['engine']} {engine['reason']}")
    if args.skip_rss:
        return 0
    for copies in (1, 10):
        cmd = [sys.executable, __file__, "--config", args.config, "--threads", str(args.threads),
               "--batch-docs", str(args.batch_docs), "--seq-len", str(args.seq_len), "--copies", str(copies)]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True)
        print(f"rss {copies}x: {res.stdout.strip().splitlines()[-1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
