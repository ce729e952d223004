"""``pack.by_source: true``: every source packed into its own single-source blocks.

Why: with one mixed stream the trainer cannot choose the mix; the share of each source in the
training tokens is whatever the documents' token counts made it (seed 003 §六.5 wants per-source
weighted sampling with independent cursors). Here each source is packed exactly like the mixed
stream (``Packer``: same uint32 layout, spans, ``doc_token_start``, one EOT per document), from its
own seeded document order ``rng_for(seed, "pack", "documents", source)``, and the tail rule applies
per source (each source's last partial block is dropped or padded with ``<|pad|>``, so a padded
block also holds one source only). The blocks go into the same one ``packed`` dataset, sources in
sorted name order, each source a contiguous row range ``[lo, hi)`` shuffled within itself by
``rng_for(seed, "pack", "blocks", source)``. The ranges, token and document counts are in the
manifest (``by_source``) and the packing report; ``train/mixture.py`` samples from them.

Memory: one ``<U`` array of source names per document (to split the rows), plus one packer at a
time (the same bounded batches as the mixed mode).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from ..mapped import MappedArrow
from ..rng import rng_for
from .config import PackConfig
from .packer import PackStats, order_sha256, pack_to_file, pack_to_files, shuffle_and_write
from .partition import partitioned_blocks


def source_column(docs: MappedArrow) -> np.ndarray:
    """The ``source`` of every document row (a numpy string array)."""
    parts = [np.asarray(b.column("source").to_pylist()) for b in docs.batches]
    return np.concatenate(parts) if parts else np.empty(0, dtype="<U1")


def pack_by_source(docs: MappedArrow, doc_batches: Any, tok: Tokenizer, pc: PackConfig, seed: int,
                   out_dir: Path, work_dir: Path, executor: Any = None, shards: list[str] | None = None,
                   tok_path: str = "", units: Any = None,
                   tag: str = "") -> tuple[PackStats, dict[str, dict[str, Any]], np.ndarray]:
    """Pack each source separately; returns the merged stats, the per-source table and the
    concatenated per-source document orders (for the manifest's order hash).

    Locally, ``doc_batches(order)`` yields ``DocBatch``es of the given rows (stage.doc_batches); with
    a Ray ``executor``, each source is tokenized and packed as partition tasks (partition.py, with
    ``shards`` and ``tok_path``), which writes the same blocks (tested). With the stage's ``units`` each
    source's packing is done in resumable units named "<tag>src=<i>." + the packer's or the partitions'."""
    work_dir.mkdir(parents=True, exist_ok=True)
    src = source_column(docs)
    names = sorted(set(src.tolist()))
    total = PackStats(seq_len=pc.seq_len, vocab_size=tok.get_vocab_size())
    table: dict[str, dict[str, Any]] = {}
    files: list[Path] = []
    perms, orders, physs = [], [], []
    offset = 0
    t0 = time.time()
    for i, name in enumerate(names):
        rows = np.flatnonzero(src == name)
        order = rows[rng_for(seed, "pack", "documents", name).permutation(len(rows))]
        orders.append(order)
        src_tag = f"{tag}src={i:04d}."
        if executor is not None:
            assert shards is not None
            st, fs, phys = partitioned_blocks(executor, shards, order, tok_path, tok.get_vocab_size(), pc,
                                              work_dir / f"src-{i:04d}", units, src_tag)
        elif units is not None:
            st, fs = pack_to_files(tok, lambda k, order=order: doc_batches(order[k:]), pc, work_dir,
                                   f"blocks-{i:04d}", f"tokenize+pack {name}", units, src_tag)
            phys = np.arange(st.blocks, dtype=np.int64)
        else:
            st, fs, phys = _local_blocks(tok, doc_batches(order), pc, work_dir / f"blocks-{i:04d}.arrow", name)
        _merge(total, st)
        files += fs
        physs.append(offset + phys)  # rows of this source's files come after the previous sources' rows
        perms.append(offset + rng_for(seed, "pack", "blocks", name).permutation(st.blocks))
        table[name] = {"block_range": [offset, offset + st.blocks], "blocks": st.blocks, "docs": st.docs,
                       "content_tokens": st.content_tokens, "tokens_produced": st.tokens_produced,
                       "tokens_in_blocks": st.tokens_in_blocks, "dropped_tail_tokens": st.dropped_tail_tokens,
                       "pad_tokens": st.pad_tokens}
        offset += st.blocks
    total.pack_s = time.time() - t0
    perm = np.concatenate(perms) if perms else np.empty(0, np.int64)
    phys_all = np.concatenate(physs) if physs else np.empty(0, np.int64)
    stats = shuffle_and_write(total, files, phys_all, None, out_dir, pc, work_dir, perm=perm, units=units, tag=tag)
    for name, (lo, hi) in ((n, t["block_range"]) for n, t in table.items()):
        table[name]["block_order_sha256"] = order_sha256(perm[lo:hi])
    return stats, table, np.concatenate(orders) if orders else np.empty(0, np.int64)


def _local_blocks(tok: Tokenizer, batches: Any, pc: PackConfig, temp: Path,
                  name: str) -> tuple[PackStats, list[Path], np.ndarray]:
    st = pack_to_file(tok, batches, pc, temp, f"tokenize+pack {name}")
    return st, [temp], np.arange(st.blocks, dtype=np.int64)


def _merge(total: PackStats, st: PackStats) -> None:
    for k in ("docs", "content_tokens", "tokens_produced", "blocks", "tokens_in_blocks", "dropped_tail_tokens",
              "pad_tokens", "eot_produced", "split_docs"):
        setattr(total, k, getattr(total, k) + getattr(st, k))
    total.max_id = max(total.max_id, st.max_id)
    total.spans_per_block.update(st.spans_per_block)
    total.source_docs.update(st.source_docs)
    total.source_tokens.update(st.source_tokens)
    total.tail_dropped_docs += st.tail_dropped_docs
    total.tail_truncated_docs += st.tail_truncated_docs
