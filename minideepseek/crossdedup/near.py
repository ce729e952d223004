"""Near-duplicate detection for stage 2, in datatrove's four phases on one machine:
signatures (process pool over batches) -> band buckets (sorted keys per band) -> clusters
(union-find over verified candidate pairs) -> filter (done by the stage with the keep policy).

Only the uint32 signature matrix (num_perm x 4 bytes per document) and the band keys stay in
memory; texts are streamed for signatures and fetched again (memory-mapped) only for the
documents of candidate pairs when verifying with exact Jaccard.
"""

from __future__ import annotations

import logging
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import datasets
import numpy as np
from tqdm import tqdm

from ..arrow_io import iter_dataset_rows
from ..dedup import (
    band_keys,
    candidate_pairs,
    estimated_jaccard,
    exact_jaccard,
    lsh_params,
    shingle_hashes,
    signatures_for_texts,
)
from .config import DedupConfig
from .unionfind import UnionFind

log = logging.getLogger(__name__)


def _sig_batch(args: tuple[list[str], str, int, int, int, str]) -> np.ndarray:
    texts, kind, n, num_perm, seed, base_hash = args
    return signatures_for_texts(texts, kind, n, num_perm, seed, base_hash)


class NearDedup:
    def __init__(self, cfg: DedupConfig, pool: ProcessPoolExecutor | None) -> None:
        self.cfg = cfg
        self.pool = pool
        if cfg.bands is not None and cfg.rows is not None:
            self.b, self.r = cfg.bands, cfg.rows
        else:
            self.b, self.r = lsh_params(cfg.threshold, cfg.num_perm)
        self.doc_index: np.ndarray = np.empty(0, dtype=np.int64)  # row in sigs -> doc index
        self.sigs: np.ndarray | None = None
        self._ds: datasets.Dataset | None = None
        self._shingles: dict[int, np.ndarray] = {}
        self._pos: dict[int, int] = {}

    # phase 1: signatures
    def signatures(self, src_dir: Path, todo: list[int]) -> None:
        want = set(todo)
        self.doc_index = np.array(sorted(want), dtype=np.int64)
        self._pos = {int(d): k for k, d in enumerate(self.doc_index)}
        c = self.cfg
        out: list[np.ndarray] = []
        pending: deque = deque()  # bounded look-ahead: texts are streamed, never all in memory
        bar = tqdm(total=len(todo), unit="docs", desc="minhash", mininterval=2)

        def submit(texts: list[str]) -> None:
            args = (texts, c.shingle, c.ngram, c.num_perm, c.seed, c.base_hash)
            if self.pool is None:
                out.append(_sig_batch(args))
                bar.update(len(texts))
                return
            pending.append((self.pool.submit(_sig_batch, args), len(texts)))
            while len(pending) > 2 * self.pool._max_workers:  # noqa: SLF001
                drain()

        def drain() -> None:
            fut, k = pending.popleft()
            out.append(fut.result())
            bar.update(k)

        cur: list[str] = []
        for i, row in enumerate(iter_dataset_rows(src_dir, columns=["text"])):
            if i in want:
                cur.append(row["text"])
                if len(cur) >= c.batch_size:
                    submit(cur)
                    cur = []
        if cur:
            submit(cur)
        while pending:
            drain()
        bar.close()
        self.sigs = np.concatenate(out) if out else np.empty((0, c.num_perm), dtype=np.uint32)

    # phases 2-3: buckets -> candidate pairs -> verified edges -> clusters
    def clusters(self, src_dir: Path) -> tuple[list[list[int]], dict[str, Any]]:
        assert self.sigs is not None
        keys = band_keys(self.sigs, self.b, self.r)
        pairs = candidate_pairs(keys)
        self._ds = datasets.load_from_disk(str(src_dir))
        uf = UnionFind(len(self.doc_index))
        verified = []
        # pairs from a giant bucket are (star centre, member): verifying each checks every member
        # against the centre, so a cluster never grows through unverified links
        ests = estimated_jaccard(self.sigs[pairs[:, 0]], self.sigs[pairs[:, 1]]) if len(pairs) else []
        for (a, b), est in tqdm(zip(pairs.tolist(), np.asarray(ests).tolist()), total=len(pairs), unit="pairs",
                                desc="verify", mininterval=2):
            j = self._exact(a, b) if self.cfg.verify == "exact" else est
            if j >= self.cfg.threshold:
                uf.union(a, b)
                verified.append((a, b, j, est))
        return self._finish(uf, pairs, verified)

    def _finish(self, uf: UnionFind, pairs: np.ndarray, verified: list[tuple[int, int, float, float]]
                ) -> tuple[list[list[int]], dict[str, Any]]:
        """Clusters (doc indices, largest first) and the report's figures from the verified edges."""
        clusters = [[int(self.doc_index[m]) for m in members] for members in uf.clusters().values()]
        clusters.sort(key=lambda c: (-len(c), c[0]))
        info = {
            "bands": self.b, "rows": self.r,
            "candidate_pairs": int(len(pairs)),
            "verified_pairs": len(verified),
            "rejected_candidates": int(len(pairs)) - len(verified),
            "min_verified_jaccard": round(min((j for _, _, j, _ in verified), default=1.0), 4),
            "verified_edges": [(int(self.doc_index[a]), int(self.doc_index[b]), round(j, 4), round(e, 4))
                               for a, b, j, e in verified],
        }
        log.info("near dedup: b=%d r=%d, %s candidate pairs, %s verified, %s clusters", self.b, self.r,
                 f"{len(pairs):,}", f"{len(verified):,}", f"{len(clusters):,}")
        return clusters, info

    def close(self) -> None:
        """Release work files (the local engine keeps everything in memory: nothing to do)."""

    def _shingle_set(self, k: int) -> np.ndarray:
        if k not in self._shingles:
            assert self._ds is not None
            text = self._ds[int(self.doc_index[k])]["text"]
            self._shingles[k] = shingle_hashes(text, self.cfg.shingle, self.cfg.ngram, self.cfg.base_hash)
        return self._shingles[k]

    def _exact(self, a: int, b: int) -> float:
        return float(exact_jaccard(self._shingle_set(a), self._shingle_set(b)))

    def pair_jaccard(self, doc_a: int, doc_b: int) -> float:
        """Exact Jaccard of two documents by doc index (for the removed doc vs its kept one)."""
        return round(self._exact(self._pos[doc_a], self._pos[doc_b]), 4)

    def text_of(self, doc: int) -> str:
        assert self._ds is not None
        return self._ds[int(doc)]["text"]

    def shingles_of_text(self, text: str) -> np.ndarray:
        return shingle_hashes(text, self.cfg.shingle, self.cfg.ngram, self.cfg.base_hash)

    def sig_of_texts(self, texts: list[str]) -> np.ndarray:
        return signatures_for_texts(texts, self.cfg.shingle, self.cfg.ngram, self.cfg.num_perm, self.cfg.seed,
                                    self.cfg.base_hash)
