"""Near-duplicate detection on a Ray cluster, in datatrove's four phases, with the same result as the
local ``NearDedup`` (same signatures, same candidate pairs, same verified edges, same clusters):

1. *signatures*: one task per block of documents reads its texts from the (shared) dataset, computes
   the MinHash signatures and the b band keys, and writes them as files: ``sigs/block-K.npy`` and
   ``keys/band-I/block-K.npy``. Nothing is returned but row counts, so no process ever holds all
   signatures.
2. *buckets* (the shuffle): one task per band reads that band's key column from every block (n x 8
   bytes: the bytes shuffled per band) and turns equal keys into pair codes, exactly as the local
   per-band step does (cliques, stars for giant buckets); it writes ``pairs/band-I.npy``. The driver
   merges the bands' pair codes (sorted, unique): candidate pairs, not signatures.
3. *verify + components*: tasks verify chunks of candidate pairs (exact Jaccard of the shingle sets,
   read from the dataset, or the signature estimate, read from the block files); the driver runs
   union-find over the verified edges in the local order.
4. *filter*: the stage applies the keep policy and writes the survivors, as in the local run.

Memory per task: one block's texts and signatures, or one band's key column (8 bytes a document).
The work files live inside the artifact's temporary directory on the shared filesystem and are
removed with ``close()`` before the stage commits.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..dedup import (
    band_keys,
    band_pair_codes,
    estimated_jaccard,
    exact_jaccard,
    merge_pair_codes,
    shingle_hashes,
    signatures_for_texts,
)
from ..dedup.lsh import DEFAULT_MAX_CLIQUE
from ..mapped import take_texts
from .config import DedupConfig
from .docs import Texts
from .near import VERIFY_PAIRS, NearDedup
from .resume import Memo
from .unionfind import UnionFind

log = logging.getLogger(__name__)

BLOCK_DOCS = 20_000  # documents per signature task (~40 MB of text at 2 KB a document)


class BlockedSigs:
    """The signature matrix as the phase-1 block files, read on demand (memory-mapped)."""

    def __init__(self, files: Sequence[Path], rows: Sequence[int], num_perm: int) -> None:
        self.files = [Path(f) for f in files]
        self.starts = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
        self.num_perm = num_perm

    def __len__(self) -> int:
        return int(self.starts[-1])

    @property
    def shape(self) -> tuple[int, int]:
        return len(self), self.num_perm

    def take(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((len(rows), self.num_perm), dtype=np.uint32)
        blk = np.searchsorted(self.starts, rows, side="right") - 1
        for b in np.unique(blk).tolist():
            m = blk == b
            out[m] = np.load(self.files[b], mmap_mode="r")[rows[m] - self.starts[b]]
        return out

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, slice):
            return self.take(np.arange(*key.indices(len(self))))
        return self.take(np.asarray(key))


def _sig_block(args: tuple) -> dict[str, Any]:
    """Phase 1 task: texts of ``doc_idx`` -> signature and band-key files of block ``k``."""
    shards, doc_idx, c, b, r, work, k = args
    texts = take_texts((shards, doc_idx))
    text_bytes = sum(len(t) for t in texts)
    # in sub-batches of dedup.batch_size, as the local engine: shingle arrays of a whole block would
    # cost ~8 bytes per character (measured 645 MB for a 20K-document block in one call)
    bs = c["batch_size"]
    parts = [signatures_for_texts(texts[s:s + bs], c["shingle"], c["ngram"], c["num_perm"], c["seed"], c["base_hash"])
             for s in range(0, len(texts), bs)]
    sigs = np.concatenate(parts) if parts else np.empty((0, c["num_perm"]), np.uint32)
    del texts
    work = Path(work)
    np.save(work / "sigs" / f"block-{k:05d}.npy", sigs)
    keys = band_keys(sigs, b, r)
    for i in range(b):
        np.save(work / "keys" / f"band-{i:03d}" / f"block-{k:05d}.npy", np.ascontiguousarray(keys[:, i]))
    return {"block": k, "rows": len(sigs), "text_bytes": text_bytes}


def _band_task(args: tuple) -> dict[str, Any]:
    """Phase 2 task: one band's keys from every block -> that band's pair codes."""
    i, files, max_clique, out = args
    col = np.concatenate([np.load(f) for f in files]) if files else np.empty(0, np.uint64)
    codes = band_pair_codes(col, max_clique)
    np.save(out, codes)
    return {"band": i, "bytes_in": int(col.nbytes), "pair_codes": int(len(codes))}


def _verify_task(args: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Phase 3 task: (exact or estimated Jaccard, estimate) of a chunk of candidate pairs."""
    pairs, doc_of_row, sig_files, sig_rows, c, shards = args
    sigs = BlockedSigs(sig_files, sig_rows, c["num_perm"])
    est = np.asarray(estimated_jaccard(sigs.take(pairs[:, 0]), sigs.take(pairs[:, 1])), dtype=np.float64)
    if c["verify"] != "exact":
        return est, est
    # as the local engine: a pair whose estimate is below threshold - prefilter_margin gets j = -1
    # (rejected without reading its texts)
    live = est >= c["threshold"] - c["prefilter_margin"]
    j = np.full(len(pairs), -1.0, dtype=np.float64)
    if not live.any():
        return j, est
    rows = np.unique(pairs[live].ravel())
    texts = take_texts((shards, doc_of_row[rows]))
    sets = {int(r): shingle_hashes(t, c["shingle"], c["ngram"], c["base_hash"]) for r, t in zip(rows, texts)}
    j[live] = [float(exact_jaccard(sets[int(a)], sets[int(b)])) for a, b in pairs[live]]
    return j, est


class RayNearDedup(NearDedup):
    """``NearDedup`` whose phases run as tasks of ``executor`` (a ``RayExecutor``)."""

    def __init__(self, cfg: DedupConfig, executor: Any, work_dir: Path, memo: Memo | None = None) -> None:
        super().__init__(cfg, None, memo)
        self.ex = executor
        self.work = Path(work_dir)
        self.stats: dict[str, Any] = {}
        self._params = {"shingle": cfg.shingle, "ngram": cfg.ngram, "num_perm": cfg.num_perm, "seed": cfg.seed,
                        "base_hash": cfg.base_hash, "verify": cfg.verify, "batch_size": cfg.batch_size,
                        "threshold": cfg.threshold, "prefilter_margin": cfg.prefilter_margin}

    def signatures(self, texts: Texts, todo: list[int]) -> None:
        self.texts = texts  # the tasks get its shard paths (absolute) and map the files themselves
        self.doc_index = np.array(sorted(set(todo)), dtype=np.int64)
        self._pos = {int(d): k for k, d in enumerate(self.doc_index)}
        for sub in ["sigs"] + [f"keys/band-{i:03d}" for i in range(self.b)] + ["pairs"]:
            (self.work / sub).mkdir(parents=True, exist_ok=True)
        blocks = [self.doc_index[s:s + BLOCK_DOCS] for s in range(0, len(self.doc_index), BLOCK_DOCS)]
        # units ray.minhash...: a block's files are complete when the driver records its task's result
        names = [f"ray.minhash.docs={BLOCK_DOCS}.block={k:05d}" for k in range(len(blocks))]
        res = list(self.memo.imap(names, _sig_block, lambda k: (list(texts.shards), blocks[k], self._params, self.b, self.r,
                                                                 str(self.work), k), self._pool()))
        self._rows = [x["rows"] for x in res]
        self.sigs = BlockedSigs([self.work / "sigs" / f"block-{k:05d}.npy" for k in range(len(blocks))],  # type: ignore[assignment]
                                self._rows, self.cfg.num_perm)
        self.stats["signature_tasks"] = len(blocks)
        self.stats["text_bytes_read"] = sum(x["text_bytes"] for x in res)
        log.info("ray minhash: %s documents in %s block task(s)", f"{len(self.doc_index):,}", len(blocks))

    def clusters(self) -> tuple[list[list[int]], dict[str, Any]]:
        n = len(self.doc_index)
        band_files = [[self.work / "keys" / f"band-{i:03d}" / f"block-{k:05d}.npy" for k in range(len(self._rows))]
                      for i in range(self.b)]
        outs = [self.work / "pairs" / f"band-{i:03d}.npy" for i in range(self.b)]
        names = [f"ray.band={i:03d}.blocks={len(self._rows)}" for i in range(self.b)]
        res = list(self.memo.imap(names, _band_task, lambda i: (i, band_files[i], DEFAULT_MAX_CLIQUE, outs[i]),
                                  self._pool()))
        self.stats["bytes_shuffled_per_band"] = [x["bytes_in"] for x in res]
        pairs = merge_pair_codes([np.load(f) for f in outs], n)
        assert self.texts is not None
        shards = list(self.texts.shards)
        sig_files = self.sigs.files  # type: ignore[union-attr]
        chunks = [pairs[s:s + VERIFY_PAIRS] for s in range(0, len(pairs), VERIFY_PAIRS)]
        verified = []
        uf = UnionFind(n)
        names = [f"ray.verify.n={VERIFY_PAIRS}.k={k:06d}" for k in range(len(chunks))]
        results = self.memo.imap(names, _verify_task, lambda k: (chunks[k], self.doc_index, sig_files, self._rows,
                                                                  self._params, shards), self._pool())
        floor = self.cfg.threshold - self.cfg.prefilter_margin
        for ch, (js, ests) in zip(chunks, results):
            self.prefiltered += int((np.asarray(ests) < floor).sum())
            for (a, b), j, est in zip(ch.tolist(), js.tolist(), ests.tolist()):
                if est < floor:
                    continue
                if j >= self.cfg.threshold:
                    uf.union(a, b)
                    verified.append((a, b, j, est))
        return self._finish(uf, pairs, verified)

    def _pool(self) -> Any:
        """Tasks in flight: 2 per cluster CPU, each task's result recorded (a unit) as soon as it completes."""
        return self.ex.pool(0)

    def _sig_columns(self, c0: int, c1: int) -> np.ndarray:
        """Columns [c0, c1) of every block file (memory-mapped): n x (c1 - c0) uint32 on the driver."""
        files = self.sigs.files  # type: ignore[union-attr]
        parts = [np.asarray(np.load(f, mmap_mode="r")[:, c0:c1]) for f in files]
        return np.ascontiguousarray(np.concatenate(parts)) if parts else np.empty((0, c1 - c0), np.uint32)

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
