"""Stage 4 on an executor (``--executor ray``): tokenize and pack per partition, with the partial
blocks at partition edges handed over, so the blocks are exactly those of the local run.

The local run concatenates every document's tokens (+ EOT) in the seeded document order and cuts
the stream into ``seq_len`` blocks. Here the document order is split into partitions of
``PARTITION_DOCS`` documents:

1. *tokenize* (one task per partition): encode, check the special ids, save the token ids and
   lengths under the work directory; return the token count and per-source counters;
2. the driver turns the counts into each partition's offset O_p in the global stream;
3. *pack* (one task per partition): every block lying wholly inside [O_p, O_p + L_p) is written to
   the partition's Arrow file with its spans, in the same coordinates as the local packer; the
   (at most two) partial blocks at its edges are returned as *pieces* (tokens + spans);
4. the driver joins the pieces of each block in partition order — a block can take pieces from
   several short partitions — and the last partial block of the whole stream is the run's tail
   (dropped or padded, as locally). A map from pack-order block index to (file, row) feeds the
   seeded block shuffle, which then writes the same shards as the local run.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..fastbpe import use_encoder
from ..mapped import MappedArrow
from ..tokenizer.config import EOT_ID, PAD_ID
from ..tokenizer.io import encode_docs, load_tokenizer
from .config import PackConfig
from .packer import (
    PackStats,
    block_batch,
    check_encoded,
    packed_features,
    shuffle_and_write,
)

PARTITION_DOCS = 4_096  # documents per partition task
_TOKENIZERS: dict[str, Any] = {}  # per worker process: a Ray worker runs many tasks


def tokenize_partition(args: tuple) -> dict[str, Any]:
    """Round 1 task: encode partition ``p`` (document rows ``idx``) and save ids/lengths/metadata."""
    shards, idx, tok_path, work, p, vocab, pc_encoder = args
    st = Path(tok_path).stat()
    key = f"{tok_path}:{st.st_mtime_ns}:{st.st_size}"  # a retrained tokenizer at the same path is a new one
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = load_tokenizer(Path(tok_path))
        use_encoder(_TOKENIZERS[key], pc_encoder)
    docs = MappedArrow([Path(x) for x in shards], "stream", columns=["id", "source", "text"])
    try:
        t = docs.take(np.asarray(idx))
    finally:
        docs.close()
    ids, sources = t.column("id").to_pylist(), t.column("source").to_pylist()
    flat, lens = encode_docs(_TOKENIZERS[key], t.column("text").to_pylist())
    top = check_encoded(ids, flat, lens, vocab)
    work = Path(work)
    np.save(work / f"tok-{p:05d}.npy", flat)
    np.save(work / f"len-{p:05d}.npy", lens)
    (work / f"meta-{p:05d}.json").write_text(json.dumps({"ids": ids, "sources": sources}))
    src_docs: Counter = Counter(sources)
    src_tokens: Counter = Counter()
    for s, n in zip(sources, lens.tolist()):
        src_tokens[s] += n - 1
    return {"p": p, "docs": len(ids), "tokens": int(len(flat)), "max_id": top, "source_docs": dict(src_docs),
            "source_tokens": dict(src_tokens)}


def _parts(lens: np.ndarray, offset: int, S: int) -> tuple[np.ndarray, ...]:
    """Every (document, block) part of a partition in global coordinates: document index, block,
    [lo, hi) stream positions, offset in the document (the local packer's arithmetic)."""
    n = len(lens)
    ends = offset + np.cumsum(lens)
    starts = ends - lens
    first, last = starts // S, (ends - 1) // S
    counts = last - first + 1
    rep = np.repeat(np.arange(n), counts)
    within = np.arange(len(rep)) - np.repeat(np.cumsum(counts) - counts, counts)
    blk = first[rep] + within
    lo = np.maximum(starts[rep], blk * S)
    hi = np.minimum(ends[rep], (blk + 1) * S)
    return rep, blk, lo, hi, lo - starts[rep], counts


def pack_partition(args: tuple) -> dict[str, Any]:
    """Round 2 task: write partition ``p``'s whole blocks, return its edge pieces and counters."""
    work, p, offset, S = args
    work = Path(work)
    flat = np.load(work / f"tok-{p:05d}.npy")
    lens = np.load(work / f"len-{p:05d}.npy")
    ids = json.loads((work / f"meta-{p:05d}.json").read_text())["ids"]
    L = len(flat)
    rep, blk, lo, hi, dts, counts = _parts(lens, offset, S)
    b0, b1 = -(-offset // S), (offset + L) // S  # whole blocks: b0 <= b < b1
    schema = packed_features(S).arrow_schema
    full = (blk >= b0) & (blk < b1)
    nb = max(0, b1 - b0)
    out: dict[str, Any] = {"p": p, "first_full": b0, "n_full": nb, "split_docs": int(np.count_nonzero(counts > 1)),
                           "spans_per_block": {}, "eot_full": 0, "pieces": []}
    path = work / f"blocks-{p:05d}.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as w:
        if nb:
            tokens = flat[b0 * S - offset:b1 * S - offset]
            b = blk[full] - b0
            batch, per_block = block_batch(schema, S, tokens, b, [ids[i] for i in rep[full].tolist()],
                                           lo[full] - blk[full] * S, hi[full] - blk[full] * S, dts[full], nb)
            w.write_batch(batch)
            out["spans_per_block"] = dict(Counter(per_block.tolist()))
            out["eot_full"] = int(np.count_nonzero(tokens == EOT_ID))
    for b in sorted({offset // S, (offset + L - 1) // S} - set(range(b0, b1))):
        m = blk == b
        out["pieces"].append({
            "block": int(b), "tokens": flat[max(b * S, offset) - offset:min((b + 1) * S, offset + L) - offset],
            "ids": [ids[i] for i in rep[m].tolist()], "lo": (lo[m] - b * S).tolist(), "hi": (hi[m] - b * S).tolist(),
            "dts": dts[m].tolist()})
    return out


def pack_partitioned(executor: Any, shards: list[str], doc_order: np.ndarray, tok_path: str, vocab: int,
                     pc: PackConfig, block_seed: Any, out_dir: Path, work_dir: Path, units: Any = None,
                     tag: str = "") -> PackStats:
    """The whole of ``packer.pack_documents`` with tokenization and packing as executor tasks."""
    st, files, phys = partitioned_blocks(executor, shards, doc_order, tok_path, vocab, pc, work_dir, units, tag)
    return shuffle_and_write(st, files, phys, block_seed, out_dir, pc, work_dir, units=units, tag=tag)


def _in_units(executor: Any, fn: Any, args: list[tuple], units: Any, names: list[str]) -> list[dict[str, Any]]:
    """``executor.map(fn, args)`` in order, each task's result a unit recorded by the driver (``units``: the
    stage's, or None); the tasks of the units a killed run finished are not run again (their results are
    the recorded states). A task the kill cut short left only its own partition's files: it rewrites them."""
    if units is None:
        return list(executor.map(fn, args))
    done = [units.done(n) for n in names]
    fresh = iter(executor.map(fn, [a for a, d in zip(args, done) if not d]))
    out = []
    for name, d in zip(names, done):
        if d:
            r = dict(units.get(name) or {})
            r.pop("_seconds", None)
        else:
            r = _plain(next(fresh))
            units.finish(name, r)
        out.append(r)
    return out


def _plain(r: dict[str, Any]) -> dict[str, Any]:
    """A task result as JSON (a unit's state): the edge pieces' token arrays as lists."""
    if "pieces" in r:
        r = {**r, "pieces": [{**pc, "tokens": np.asarray(pc["tokens"]).tolist()} for pc in r["pieces"]]}
    return r


def partitioned_blocks(executor: Any, shards: list[str], doc_order: np.ndarray, tok_path: str, vocab: int,
                       pc: PackConfig, work_dir: Path, units: Any = None,
                       tag: str = "") -> tuple[PackStats, list[Path], np.ndarray]:
    """Tokenize + pack ``doc_order`` as executor tasks: the stats, the block files and the map from
    pack-order block index to row across those files (the input of the seeded shuffle). With the stage's
    ``units`` every task is a unit ("<tag>tok=<p>", "<tag>pack=<p>"), recorded by the driver."""
    S = pc.seq_len
    work = work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    parts = [doc_order[j:j + PARTITION_DOCS] for j in range(0, len(doc_order), PARTITION_DOCS)]
    r1 = _in_units(executor, tokenize_partition, [(shards, idx, tok_path, str(work), p, vocab, pc.encoder)
                                                  for p, idx in enumerate(parts)],
                   units, [f"{tag}tok={p:05d}" for p in range(len(parts))])
    st = PackStats(seq_len=S, vocab_size=vocab)
    offsets = np.concatenate([[0], np.cumsum([r["tokens"] for r in r1])]).astype(np.int64)
    for r in r1:
        st.docs += r["docs"]
        st.tokens_produced += r["tokens"]
        st.max_id = max(st.max_id, r["max_id"])
        st.source_docs.update(r["source_docs"])
        st.source_tokens.update(r["source_tokens"])
    st.content_tokens = st.tokens_produced - st.docs
    st.eot_produced = st.docs
    r2 = _in_units(executor, pack_partition, [(str(work), p, int(offsets[p]), S) for p in range(len(parts))],
                   units, [f"{tag}pack={p:05d}" for p in range(len(parts))])
    files = [work / f"blocks-{p:05d}.arrow" for p in range(len(parts))]
    n_blocks = st.tokens_produced // S
    phys = np.full(n_blocks + 1, -1, dtype=np.int64)
    row = 0
    for r in r2:
        phys[r["first_full"]:r["first_full"] + r["n_full"]] = np.arange(row, row + r["n_full"])
        row += r["n_full"]
        st.split_docs += r["split_docs"]
        st.spans_per_block.update({int(k): v for k, v in r["spans_per_block"].items()})
    edges = _join_pieces(p for r in r2 for p in r["pieces"])
    boundary = work / "boundary.arrow"
    schema = packed_features(S).arrow_schema
    with pa.OSFile(str(boundary), "wb") as sink, pa.ipc.new_file(sink, schema) as w:
        for b, (tokens, ids, lo, hi, dts) in edges:
            if len(tokens) < S:  # the stream's last partial block: the run's tail
                assert b == n_blocks, f"partial block {b} inside the stream"
                if pc.tail == "drop":
                    st.dropped_tail_tokens = len(tokens)
                    st.tail_dropped_docs = [d for d, s in zip(ids, dts) if s == 0]
                    st.tail_truncated_docs = [d for d, s in zip(ids, dts) if s > 0]
                    continue
                st.pad_tokens = S - len(tokens)
                tokens = np.concatenate([tokens, np.full(S - len(tokens), PAD_ID, np.uint32)])
            batch, per_block = block_batch(schema, S, tokens, np.zeros(len(ids), np.int64), ids, np.array(lo),
                                           np.array(hi), np.array(dts), 1)
            w.write_batch(batch)
            st.spans_per_block.update(per_block.tolist())
            phys[b] = row
            row += 1
    st.blocks = n_blocks + (1 if st.pad_tokens else 0)
    st.tokens_in_blocks = st.tokens_produced - st.dropped_tail_tokens
    phys = phys[:st.blocks]
    assert (phys >= 0).all() and len(np.unique(phys)) == st.blocks, "every block written exactly once"
    st.pack_s = time.time() - t0
    return st, [*files, boundary], phys


def _join_pieces(pieces: Any) -> Iterator[tuple[int, tuple[np.ndarray, list[str], list[int], list[int], list[int]]]]:
    """Pieces (in partition order) of the same block -> one block's tokens and spans, by block index."""
    cur: dict[str, Any] | None = None
    for pc in pieces:
        if cur is not None and pc["block"] != cur["block"]:
            yield cur["block"], (np.concatenate(cur["tokens"]), cur["ids"], cur["lo"], cur["hi"], cur["dts"])
            cur = None
        if cur is None:
            cur = {"block": pc["block"], "tokens": [], "ids": [], "lo": [], "hi": [], "dts": []}
        cur["tokens"].append(np.asarray(pc["tokens"], dtype=np.uint32))
        for k in ("ids", "lo", "hi", "dts"):
            cur[k] += pc[k]
    if cur is not None:
        yield cur["block"], (np.concatenate(cur["tokens"]), cur["ids"], cur["lo"], cur["hi"], cur["dts"])
