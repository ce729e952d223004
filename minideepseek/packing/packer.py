"""Tokenize documents, pack them into ``seq_len`` blocks with one EOT after each, shuffle the blocks,
write bounded ``save_to_disk`` shards. Pure functions over batches; the stage driver feeds it.

How it keeps memory bounded (a few batches), whatever the run's size:

1. *Pack (pack order).* Batches of ``batch_docs`` documents are encoded with ``encode_batch_fast``
   (Rust threads; it releases the GIL, so the next batch encodes on a helper thread while this one
   is packed). A batch's ids are concatenated behind the carried tail of the previous batch, with
   ``<|endoftext|>`` after every document; the full ``seq_len`` blocks go to a temporary Arrow IPC
   *file* (random access) and the remainder, with its span records, is carried to the next batch.
   So only the last partial block of the whole run can be dropped (or padded), never one per batch
   as in the seed's ``dataset.map`` listing. Spans are computed with numpy from document lengths.
2. *Shuffle (block order).* A seeded permutation of the block indices (8 bytes a block in memory)
   is walked in groups of about 1 MiB of tokens; each group is gathered from the memory-mapped temp
   file (see ``mapped.py``: its pages are dropped from RSS as we go) and appended to the final
   shards by ``DatasetWriter``. The temp file is deleted afterwards: the stage needs its output's
   size again in free disk, transiently.

Span convention (per block, parallel lists): ``doc_ids[k]`` occupies tokens ``[starts[k], ends[k])``
of the block (end exclusive); a document's span includes its trailing EOT; ``doc_token_start[k]`` is
where that part begins in the document's own token sequence (its tokens + EOT). A document cut by a
block boundary appears in each block it touches, so every token of a document can be found again.
Padding (``tail: pad``) belongs to no span.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import datasets
import numpy as np
import pyarrow as pa
from tokenizers import Tokenizer
from tqdm import tqdm

from ..arrow_io import DatasetWriter
from ..mapped import MappedArrow
from ..tokenizer.config import EOT_ID, PAD_ID, UNK_ID
from ..tokenizer.io import encode_docs
from .config import PackConfig

log = logging.getLogger(__name__)

WRITE_GROUP_BYTES = 1 << 20  # tokens gathered per shuffled write: bounds memory and shard overshoot
# Resume inside the stage (minideepseek/units.py): with the stage's units, packing is cut into units of about
# pack.unit_tokens tokens (at a batch boundary; each unit's blocks in a file of its own, its state the counters
# and the carried partial block), and the shuffle+write is one more unit ("written"). 512K tokens take ~0.7 s
# on the demo's 2 cores (9.4M tokens in 5 sources: 16 units); the demo's shuffle+write (2,285 blocks) 0.4 s.


def packed_features(seq_len: int) -> datasets.Features:
    """One row = one block. ``List(..., length=)`` is Arrow ``fixed_size_list<uint32>[seq_len]``:
    a flat uint32 buffer a loader maps and views as ``(rows, seq_len)`` without copying."""
    return datasets.Features({
        "input_ids": datasets.List(datasets.Value("uint32"), length=seq_len),
        "doc_ids": datasets.List(datasets.Value("string")),
        "starts": datasets.List(datasets.Value("int32")),
        "ends": datasets.List(datasets.Value("int32")),
        "doc_token_start": datasets.List(datasets.Value("int64")),
    })


class DocBatch(NamedTuple):
    ids: list[str]
    sources: list[str]
    texts: list[str]


@dataclass
class PackStats:
    """Counters of one packing run (what the report and manifest are built from)."""

    seq_len: int
    vocab_size: int
    docs: int = 0
    content_tokens: int = 0  # tokenizer output, EOT excluded
    tokens_produced: int = 0  # content + one EOT per document
    blocks: int = 0
    tokens_in_blocks: int = 0  # real tokens written (padding excluded)
    dropped_tail_tokens: int = 0
    pad_tokens: int = 0
    eot_produced: int = 0
    eot_in_blocks: int = 0  # counted in the blocks as written
    split_docs: int = 0  # documents touching more than one block
    max_id: int = 0
    spans_per_block: Counter = field(default_factory=Counter)
    source_docs: Counter = field(default_factory=Counter)
    source_tokens: Counter = field(default_factory=Counter)  # content tokens
    tail_dropped_docs: list[str] = field(default_factory=list)  # wholly in the dropped tail: in no block
    tail_truncated_docs: list[str] = field(default_factory=list)  # lost their last part (and EOT)
    block_order_sha256: str = ""
    shards: list[dict[str, Any]] = field(default_factory=list)
    pack_s: float = 0.0
    write_s: float = 0.0


_COUNTERS = ("spans_per_block", "source_docs", "source_tokens")


def stats_json(st: PackStats) -> dict[str, Any]:
    """PackStats as JSON (a unit's state); ``stats_from_json`` gives it back exactly (counters in order)."""
    d = dataclasses.asdict(st)
    for k in _COUNTERS:
        d[k] = [[key, n] for key, n in getattr(st, k).items()]  # pairs: spans_per_block's keys are ints
    return d


def stats_from_json(d: dict[str, Any]) -> PackStats:
    st = PackStats(**{k: v for k, v in d.items() if k not in _COUNTERS})
    for k in _COUNTERS:
        setattr(st, k, Counter({key: n for key, n in d[k]}))
    return st


def block_batch(schema: pa.Schema, S: int, tokens: np.ndarray, blk: np.ndarray, ids: list[str], lo: np.ndarray,
                hi: np.ndarray, dts: np.ndarray, nb: int) -> tuple[pa.RecordBatch, np.ndarray]:
    """``nb`` blocks as one record batch: ``tokens`` (nb * S), and the parts sorted by ``blk`` (block
    0..nb-1) with block-local [lo, hi) and their ``doc_token_start``; also the parts per block."""
    per_block = np.bincount(blk, minlength=nb)
    offsets = pa.array(np.concatenate([[0], np.cumsum(per_block)]).astype(np.int32))
    cols = [
        pa.FixedSizeListArray.from_arrays(pa.array(tokens, pa.uint32()), S),
        pa.ListArray.from_arrays(offsets, pa.array(ids, pa.string())),
        pa.ListArray.from_arrays(offsets, pa.array(np.asarray(lo).astype(np.int32))),
        pa.ListArray.from_arrays(offsets, pa.array(np.asarray(hi).astype(np.int32))),
        pa.ListArray.from_arrays(offsets, pa.array(np.asarray(dts).astype(np.int64))),
    ]
    return pa.RecordBatch.from_arrays(cols, schema=schema), per_block


class Packer:
    """Phase 1: documents (in the order given) -> full blocks in pack order, in a temp Arrow file."""

    def __init__(self, pc: PackConfig, vocab_size: int, temp_path: Path) -> None:
        self.pc = pc
        self.S = pc.seq_len
        self.features = packed_features(pc.seq_len)
        self.schema = self.features.arrow_schema
        self.stats = PackStats(seq_len=pc.seq_len, vocab_size=vocab_size)
        self.carry = np.empty(0, dtype=np.uint32)  # tokens of the partial block (< seq_len)
        self.carry_spans: tuple[list[str], np.ndarray, np.ndarray, np.ndarray] = (
            [], np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64))
        self.open_file(temp_path)

    def open_file(self, path: Path) -> None:
        """Write the next full blocks to the Arrow file ``path`` (a new file per resumable unit)."""
        self.temp_path = path
        self._sink = pa.OSFile(str(path), "wb")
        self._writer = pa.ipc.new_file(self._sink, self.schema)

    def close_file(self) -> None:
        self._writer.close()
        self._sink.close()

    def state(self) -> dict[str, Any]:
        """What a resumed run needs to go on from here (a unit boundary; the file is closed): the counters
        and the carried partial block with its spans (< seq_len tokens)."""
        ids, lo, hi, dts = self.carry_spans
        return {"stats": stats_json(self.stats), "carry": self.carry.tolist(),
                "carry_spans": [list(ids), lo.tolist(), hi.tolist(), dts.tolist()]}

    def restore(self, state: dict[str, Any]) -> None:
        self.stats = stats_from_json(state["stats"])
        self.carry = np.asarray(state["carry"], dtype=np.uint32)
        ids, lo, hi, dts = state["carry_spans"]
        self.carry_spans = (list(ids), np.asarray(lo, np.int64), np.asarray(hi, np.int64), np.asarray(dts, np.int64))

    def add(self, batch: DocBatch, flat: np.ndarray, lens: np.ndarray) -> None:
        """Append one encoded batch; write every block it completes, carry the rest."""
        st, S, n = self.stats, self.S, len(lens)
        self._check(batch, flat, lens)
        st.docs += n
        st.tokens_produced += len(flat)
        st.content_tokens += len(flat) - n
        st.eot_produced += n
        for src, ln in zip(batch.sources, lens.tolist()):
            st.source_docs[src] += 1
            st.source_tokens[src] += ln - 1

        c0 = len(self.carry)
        stream = np.concatenate([self.carry, flat]) if c0 else flat
        ends = c0 + np.cumsum(lens)
        starts = ends - lens
        first, last = starts // S, (ends - 1) // S
        counts = last - first + 1
        st.split_docs += int(np.count_nonzero(counts > 1))
        rep = np.repeat(np.arange(n), counts)  # one entry per (document, block) part
        within = np.arange(len(rep)) - np.repeat(np.cumsum(counts) - counts, counts)
        blk = first[rep] + within
        p_lo = np.maximum(starts[rep], blk * S)
        p_hi = np.minimum(ends[rep], (blk + 1) * S)

        c_ids, c_lo, c_hi, c_dts = self.carry_spans  # the carried spans sit in block 0 of `stream`
        blk = np.concatenate([np.zeros(len(c_ids), np.int64), blk])
        lo = np.concatenate([c_lo, p_lo - blk[len(c_ids):] * S])
        hi = np.concatenate([c_hi, p_hi - blk[len(c_ids):] * S])
        dts = np.concatenate([c_dts, p_lo - starts[rep]])
        ids = c_ids + [batch.ids[i] for i in rep.tolist()]

        nb = len(stream) // S
        k = int(np.searchsorted(blk, nb))  # parts are sorted by block: the first k are in full blocks
        if nb:
            self._write(stream[: nb * S], blk[:k], ids[:k], lo[:k], hi[:k], dts[:k], nb)
        self.carry = stream[nb * S:].copy()
        self.carry_spans = (ids[k:], lo[k:], hi[k:], dts[k:])

    def _check(self, batch: DocBatch, flat: np.ndarray, lens: np.ndarray) -> None:
        self.stats.max_id = max(self.stats.max_id, check_encoded(batch.ids, flat, lens, self.stats.vocab_size))

    def _write(self, tokens: np.ndarray, blk: np.ndarray, ids: list[str], lo: np.ndarray, hi: np.ndarray,
               dts: np.ndarray, nb: int) -> None:
        batch, per_block = block_batch(self.schema, self.S, tokens, blk, ids, lo, hi, dts, nb)
        self._writer.write_batch(batch)
        st = self.stats
        st.blocks += nb
        st.tokens_in_blocks += nb * self.S
        st.spans_per_block.update(per_block.tolist())

    def finish(self) -> PackStats:
        """Handle the run's one partial block (drop or pad it) and close the temp file."""
        st, S = self.stats, self.S
        ids, lo, hi, dts = self.carry_spans
        n_tail = len(self.carry)
        if n_tail and self.pc.tail == "pad":
            tokens = np.concatenate([self.carry, np.full(S - n_tail, PAD_ID, np.uint32)])
            self._write(tokens, np.zeros(len(ids), np.int64), ids, lo, hi, dts, 1)
            st.tokens_in_blocks -= S - n_tail
            st.pad_tokens = S - n_tail
        elif n_tail:
            st.dropped_tail_tokens = n_tail
            # every part in the tail ends with its document's EOT (the stream ends with one)
            st.tail_dropped_docs = [d for d, s in zip(ids, dts.tolist()) if s == 0]
            st.tail_truncated_docs = [d for d, s in zip(ids, dts.tolist()) if s > 0]
        self.close_file()
        assert st.tokens_in_blocks + st.dropped_tail_tokens == st.tokens_produced
        return st


def check_encoded(doc_ids: list[str], flat: np.ndarray, lens: np.ndarray, vocab_size: int) -> int:
    """Exactly one special id per document (its EOT, at its end) and every id in the vocabulary;
    returns the largest id."""
    if len(flat) == 0:
        return 0
    eot_pos = np.cumsum(lens) - 1
    specials = int(np.count_nonzero(flat <= UNK_ID))
    if specials != len(lens) or not np.all(flat[eot_pos] == EOT_ID):
        bad = [doc_ids[i] for i, (a, b) in enumerate(zip(eot_pos - lens + 1, eot_pos))
               if np.count_nonzero(flat[a:b] <= UNK_ID)][:5]
        raise AssertionError(f"special token ids inside documents {bad}: the tokenizer must encode "
                             f"special-token strings as text (encode_special_tokens)")
    top = int(flat.max())
    assert top < vocab_size and top < 2**32, f"token id {top} >= vocab {vocab_size}"
    return top


def write_group_rows(pc: PackConfig) -> int:
    """Blocks per shuffled gather/write: ~1 MiB of tokens, and at most 1/8 of a shard, so a shard
    (closed by DatasetWriter once it reaches max_shard_bytes) overshoots by at most that much."""
    return max(1, min(WRITE_GROUP_BYTES, pc.max_shard_bytes // 8) // (4 * pc.seq_len))


def emit_shuffled(temp_path: Path | list[Path], perm: np.ndarray, out_dir: Path, pc: PackConfig, stats: PackStats,
                  phys: np.ndarray | None = None) -> None:
    """Phase 2: gather blocks in ``perm`` order from the temp file(s) into the final shards. ``phys``
    maps a pack-order block index to its row across the files (None: the files hold pack order)."""
    src = MappedArrow(temp_path if isinstance(temp_path, list) else [temp_path], "file")
    if phys is not None:
        perm = phys[perm]
    writer = DatasetWriter(out_dir, packed_features(pc.seq_len), max_shard_bytes=pc.max_shard_bytes)
    rows = write_group_rows(pc)
    bar = tqdm(total=len(perm), unit="blocks", desc="shuffle+write", mininterval=2)
    try:
        for j in range(0, len(perm), rows):
            table = src.take(perm[j:j + rows])
            # after every gather: the kernel maps ~64 KiB around each faulting page (fault-around),
            # so waiting 32 gathers let the mapped temp file reach 130 MB of RSS on a 147 MB file
            src.release()
            ids = table.column("input_ids").chunk(0).flatten().to_numpy()
            stats.eot_in_blocks += int(np.count_nonzero(ids == EOT_ID))
            writer.write_batch(table)
            bar.update(table.num_rows)
    finally:
        bar.close()
        src.close()
    names = writer.close()
    stats.shards = [shard_info(out_dir / name) for name in names]


def shard_info(path: Path) -> dict[str, Any]:
    """Blocks and bytes of a written shard, read back the way a training loader opens it."""
    with pa.memory_map(str(path)) as mm:
        rows = sum(b.num_rows for b in pa.ipc.open_stream(mm))
    return {"file": path.name, "bytes": path.stat().st_size, "blocks": rows}


def order_sha256(perm: np.ndarray) -> str:
    return hashlib.sha256(np.asarray(perm, dtype="<i8").tobytes()).hexdigest()


def _encoded(tok: Tokenizer, batches: Iterable[DocBatch]) -> Iterator[tuple[DocBatch, np.ndarray, np.ndarray]]:
    """Encode batch k+1 on a helper thread while the caller packs batch k (two batches in flight)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="encode") as pool:
        pending: tuple[DocBatch, Future] | None = None
        for batch in batches:
            fut = pool.submit(encode_docs, tok, batch.texts)
            if pending is not None:
                yield pending[0], *pending[1].result()
            pending = (batch, fut)
        if pending is not None:
            yield pending[0], *pending[1].result()


def pack_to_file(tok: Tokenizer, batches: Iterable[DocBatch], pc: PackConfig, temp: Path, desc: str) -> PackStats:
    """Tokenize + pack ``batches`` into blocks in pack order in the Arrow file ``temp`` (not shuffled)."""
    packer = Packer(pc, tok.get_vocab_size(), temp)
    bar = tqdm(unit="tokens", unit_scale=True, desc=desc, mininterval=2)
    try:
        for batch, flat, lens in _encoded(tok, batches):
            packer.add(batch, flat, lens)
            bar.update(len(flat))
    finally:
        bar.close()
    return packer.finish()


def pack_to_files(tok: Tokenizer, batches_from: Callable[[int], Iterable[DocBatch]], pc: PackConfig, work: Path,
                  prefix: str, desc: str, units: Any, tag: str) -> tuple[PackStats, list[Path]]:
    """``pack_to_file`` in resumable units (``pc.unit_tokens``): blocks in pack order across the files
    ``work/<prefix>-<unit>.arrow`` (returned, in order). ``batches_from(k)``: the batches from document
    ``k`` on (k is at a batch boundary). A resumed run restores the state of the killed run's last finished
    unit (counters, carried partial block) and packs from there; the file of the unit it was in is rewritten."""
    def path(u: int) -> Path:
        return work / f"{prefix}-{u:05d}.arrow"

    def name(u: int) -> str:
        return f"{tag}part={u:05d}"

    u, state = 0, None
    while units.done(name(u)):
        state = units.get(name(u))
        u += 1
    if state is not None and state.get("final"):
        return stats_from_json(state["stats"]), [path(i) for i in range(u)]
    packer = Packer(pc, tok.get_vocab_size(), path(u))
    docs_done = 0
    if state is not None:
        packer.restore(state)
        docs_done = state["docs_done"]
        log.info("%s: resuming after %s documents (%s units done)", desc, f"{docs_done:,}", u)
    since = 0
    bar = tqdm(unit="tokens", unit_scale=True, desc=desc, mininterval=2, initial=packer.stats.tokens_produced)
    try:
        for batch, flat, lens in _encoded(tok, batches_from(docs_done)):
            packer.add(batch, flat, lens)
            bar.update(len(flat))
            docs_done += len(lens)
            since += len(flat)
            if since >= pc.unit_tokens:
                packer.close_file()
                units.finish(name(u), {**packer.state(), "docs_done": docs_done})
                u, since = u + 1, 0
                packer.open_file(path(u))
    finally:
        bar.close()
    st = packer.finish()
    units.finish(name(u), {"final": True, "stats": stats_json(st)})
    return st, [path(i) for i in range(u + 1)]


def pack_documents(batches: Iterable[DocBatch] | Callable[[int], Iterable[DocBatch]], tok: Tokenizer, pc: PackConfig,
                   block_seed: Any, out_dir: Path, work_dir: Path, units: Any = None, tag: str = "") -> PackStats:
    """Tokenize + pack ``batches`` (already in document-shuffled order) and write the blocks to
    ``out_dir`` in the order of ``block_seed`` (a ``np.random.Generator``) — the whole stage minus
    reading and reporting; the benchmark calls exactly this. (``partition.py`` does the same with
    tokenization and packing as executor tasks.) With the stage's ``units``, ``batches`` is a function of
    the first document (``pack_to_files``) and the work is done in resumable units."""
    work_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    if units is not None:
        assert callable(batches), "resumable packing starts at a unit boundary: batches_from(first_doc)"
        stats, temps = pack_to_files(tok, batches, pc, work_dir, "blocks-pack-order", "tokenize+pack", units, tag)
    else:
        temps = [work_dir / "blocks-pack-order.arrow"]
        stats = pack_to_file(tok, batches(0) if callable(batches) else batches, pc, temps[0], "tokenize+pack")
    stats.pack_s = time.time() - t0
    log.info("packed %s docs, %s tokens -> %s blocks of %s in %.1f s (%s tokens/s)", f"{stats.docs:,}",
             f"{stats.tokens_produced:,}", f"{stats.blocks:,}", f"{pc.seq_len:,}", stats.pack_s,
             f"{stats.tokens_produced / max(stats.pack_s, 1e-9):,.0f}")
    return shuffle_and_write(stats, temps, None, block_seed, out_dir, pc, work_dir, units=units, tag=tag)


def shuffle_and_write(stats: PackStats, paths: list[Path], phys: np.ndarray | None, block_seed: Any, out_dir: Path,
                      pc: PackConfig, work_dir: Path, perm: np.ndarray | None = None, units: Any = None,
                      tag: str = "") -> PackStats:
    """The seeded block order (or the given ``perm``: per-source packing shuffles within each
    source), the gather into shards, the EOT accounting check; removes ``work_dir``. With the stage's
    ``units`` the shuffle+write is the unit "<tag>written" (a resumed run that finds it skips the gather; the
    work files go only after it is recorded, and a killed write's partial shards are rewritten)."""
    t1 = time.time()
    if perm is None:
        perm = block_seed.permutation(stats.blocks)
    stats.block_order_sha256 = order_sha256(perm)
    done = units.get(f"{tag}written") if units is not None and units.done(f"{tag}written") else None
    if done is not None:
        stats.eot_in_blocks, stats.shards = done["eot_in_blocks"], done["shards"]
    else:
        for stale in out_dir.glob(".part-*.arrow"):  # a killed write's shards: rewritten whole
            stale.unlink()
        emit_shuffled(paths, perm, out_dir, pc, stats, phys)
        if units is not None:
            units.finish(f"{tag}written", {"eot_in_blocks": stats.eot_in_blocks, "shards": stats.shards})
    shutil.rmtree(work_dir, ignore_errors=True)
    stats.write_s = time.time() - t1
    expected = stats.eot_produced - (len(stats.tail_dropped_docs) + len(stats.tail_truncated_docs))
    assert stats.eot_produced == stats.docs, "one EOT per document"
    assert stats.eot_in_blocks == expected, f"EOT in blocks {stats.eot_in_blocks:,} != {expected:,}"
    return stats
