"""``packed`` -> Megatron-LM indexed datasets: one ``<source>.bin``/``<source>.idx`` pair per source
and the blend for ``--data-path`` (``w1 prefix1 w2 prefix2 ...``).

What is exported: every document as Megatron's ``preprocess_data.py --append-eod`` would write it,
one sequence (= one document) of our token ids followed by our ``<|endoftext|>`` (id 0), in int32
(the format has no uint32; our vocabularies are far below 2^31). The tokens come from the packed
blocks, put back together from the span columns (``doc_token_start`` orders a document's parts), so
the export holds exactly what stage 4 packed: a document cut by a dropped tail keeps its packed part
(its ``<|endoftext|>`` is then missing), a document wholly in the dropped tail is absent. Megatron's
GPTDataset packs and shuffles the documents again itself at its own ``--seq-length``.

Sources: from mixed_dedup's ``id -> source`` (so the mixed and the by_source packing both export per
source). Documents in a source are written in id order (deterministic; Megatron shuffles them).

Format (megatron/core/datasets/indexed_dataset.py, ``_IndexWriter``): ``.idx`` = b"MMIDIDX\\0\\0",
<Q 1, <B dtype code (4 = int32), <Q sequence count, <Q document count, int32 lengths, int64 byte
pointers, int64 document indices (0, 1, ..., n: one sequence per document); ``.bin`` = the tokens.
The CI test reads the files back with Megatron-Core's own ``IndexedDataset``.

Memory: the parts index (a few ints per document part) and one document's tokens at a time; the
blocks are memory-mapped.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..arrow_io import shard_paths
from ..config import ConfigError
from ..fsio import atomic_writer, write_bytes_atomic, write_json_atomic, write_text_atomic
from ..pipeline import MIXED_DEDUP, MIXED_RAW, PACKED
from ..stage import verify_before_use

log = logging.getLogger(__name__)

INDEX_HEADER = b"MMIDIDX\x00\x00"
INT32_CODE = 4


def _source_map(run_dir: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in shard_paths(run_dir / MIXED_DEDUP):
        with pa.memory_map(str(path)) as mm:
            for b in pa.ipc.open_stream(mm):
                out.update(zip(b.column("id").to_pylist(), b.column("source").to_pylist()))
    return out


def _parts(packed_dir: Path) -> tuple[list[np.ndarray], dict[str, list[tuple[int, int, int, int, int]]]]:
    """Memory-mapped block token arrays (one per record batch) and each document's parts as
    (doc_token_start, batch, row, lo, hi) sorted by doc_token_start."""
    blocks: list[np.ndarray] = []
    parts: dict[str, list[tuple[int, int, int, int, int]]] = {}
    for path in shard_paths(packed_dir):
        mm = pa.memory_map(str(path))
        for b in pa.ipc.open_stream(mm):
            if b.num_rows == 0:
                continue
            col = b.column("input_ids")
            S = col.type.list_size
            k = len(blocks)
            blocks.append(col.flatten().to_numpy(zero_copy_only=True).reshape(-1, S))
            for row, (ids, st, en, dts) in enumerate(zip(b.column("doc_ids").to_pylist(), b.column("starts").to_pylist(),
                                                        b.column("ends").to_pylist(),
                                                        b.column("doc_token_start").to_pylist())):
                for d, s, e, t in zip(ids, st, en, dts):
                    parts.setdefault(d, []).append((t, k, row, s, e))
    for v in parts.values():
        v.sort()
    return blocks, parts


def write_indexed(prefix: Path, docs: list[np.ndarray]) -> None:
    """One Megatron indexed dataset (int32 tokens, one sequence per document); each file is written
    atomically, never through a symlink at its name."""
    lengths = np.array([len(d) for d in docs], dtype=np.int32)
    with atomic_writer(Path(f"{prefix}.bin")) as fh:
        for d in docs:
            fh.write(np.asarray(d, dtype=np.int32).tobytes())
    pointers = np.concatenate([[0], np.cumsum(lengths.astype(np.int64) * 4)[:-1]]).astype(np.int64) \
        if len(lengths) else np.empty(0, np.int64)
    write_bytes_atomic(Path(f"{prefix}.idx"), b"".join([
        INDEX_HEADER, struct.pack("<Q", 1), struct.pack("<B", INT32_CODE), struct.pack("<Q", len(lengths)),
        struct.pack("<Q", len(lengths) + 1), lengths.tobytes(), pointers.tobytes(),
        np.arange(len(lengths) + 1, dtype=np.int64).tobytes()]))


def export_megatron(run_dir: Path, out_dir: Path) -> dict[str, Any]:
    """Write ``out_dir/<source>.{bin,idx}`` + ``blend.json`` + ``data_path.txt``; returns the blend."""
    # every artifact it reads is checked against its manifest first: a damaged shard is refused with the
    # file and the rebuild command, never exported
    mans = verify_before_use(run_dir, (MIXED_RAW, MIXED_DEDUP, PACKED), required=(MIXED_DEDUP, PACKED))
    src_of = _source_map(run_dir)
    blocks, parts = _parts(run_dir / PACKED)
    by_src: dict[str, list[str]] = {}
    for d in sorted(parts):
        if d not in src_of:
            raise ConfigError(f"document {d} in {run_dir / PACKED} is not in {MIXED_DEDUP}: the packed data is "
                              f"stale; rerun pack_shuffle.py")
        by_src.setdefault(src_of[d], []).append(d)
    out_dir.mkdir(parents=True, exist_ok=True)
    raw = mans.get(MIXED_RAW) or {}
    recipe = {s["name"]: float(s["weight"]) for s in raw.get("config", {}).get("sources", [])}
    blend: dict[str, Any] = {"sources": {}, "dtype": "int32", "eot_id": 0}
    for name, ids in sorted(by_src.items()):
        docs = [np.concatenate([blocks[k][row, s:e] for _, k, row, s, e in parts[d]]) for d in ids]
        write_indexed(out_dir / name, docs)
        blend["sources"][name] = {"prefix": str((out_dir / name).resolve()), "documents": len(docs),
                                  "tokens": int(sum(len(x) for x in docs)), "recipe_weight": recipe.get(name)}
        log.info("megatron export: %s: %s documents, %s tokens", name, f"{len(docs):,}",
                 f"{blend['sources'][name]['tokens']:,}")
    total = sum(v["recipe_weight"] or 0.0 for v in blend["sources"].values())
    if total <= 0:
        raise ConfigError(f"{run_dir / MIXED_RAW} records no recipe weights for {sorted(by_src)}")
    for v in blend["sources"].values():
        v["weight"] = round((v["recipe_weight"] or 0.0) / total, 6)
    blend["data_path"] = " ".join(f"{v['weight']} {v['prefix']}" for v in blend["sources"].values() if v["weight"] > 0)
    write_json_atomic(out_dir / "blend.json", blend)
    write_text_atomic(out_dir / "data_path.txt", blend["data_path"] + "\n")
    return blend


def read_doc_tokens(run_dir: Path) -> dict[str, tuple[str, list[int]]]:
    """Every packed document's tokens (source, ids): what the export must round-trip (tests)."""
    src_of = _source_map(run_dir)
    blocks, parts = _parts(run_dir / PACKED)
    return {d: (src_of[d], np.concatenate([blocks[k][row, s:e] for _, k, row, s, e in p]).tolist())
            for d, p in parts.items()}



