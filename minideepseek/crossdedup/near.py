"""Near-duplicate detection for stage 2, in datatrove's four phases on one machine:
signatures (process pool over batches) -> band buckets (sorted keys per band) -> verified edges
(candidate pairs with Jaccard >= threshold; union-find components for the report) -> filter (done
by the stage with the keep policy, :mod:`.keep`). After the filter, :meth:`NearDedup.residual`
checks the survivors: no verified edge between two kept documents, and a sample of kept pairs that
share a bucket under a looser banding, to estimate the near duplicates the banding itself misses.

Only the uint32 signature matrix (num_perm x 4 bytes per document) and the band keys stay in
memory; texts are streamed for signatures and fetched again (memory-mapped) only for the
documents of candidate pairs when verifying with exact Jaccard.
"""

from __future__ import annotations

import logging
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
from tqdm import tqdm

from ..dedup import (
    band_keys,
    banding_summary,
    candidate_pairs,
    estimated_jaccard,
    exact_jaccard,
    lsh_params,
    recall_params,
    s_curve,
    shingle_hashes,
    signatures_for_texts,
)
from ..mapped import take_texts
from .config import DedupConfig
from .docs import Texts
from .resume import Memo
from .unionfind import UnionFind

log = logging.getLogger(__name__)

VERIFY_PAIRS = 50_000  # candidate pairs per verification unit (the Ray engine's task size too)


def _sig_rows(args: tuple[list[str], np.ndarray, str, int, int, int, str]) -> np.ndarray:
    """Pool task: the signatures of dataset rows ``rows`` (texts read here, not sent)."""
    shards, rows, kind, n, num_perm, seed, base_hash = args
    return signatures_for_texts(take_texts((shards, rows)), kind, n, num_perm, seed, base_hash)


def banding(cfg: DedupConfig) -> tuple[int, int]:
    """(bands, rows): explicit, or chosen for recall at the threshold, or datasketch's optimum."""
    if cfg.bands is not None and cfg.rows is not None:
        return cfg.bands, cfg.rows
    if cfg.banding == "recall":
        return recall_params(cfg.threshold, cfg.num_perm, cfg.min_recall)
    return lsh_params(cfg.threshold, cfg.num_perm)


def loose_banding(cfg: DedupConfig, b: int, r: int) -> tuple[int, int]:
    """A banding with fewer rows that proposes pairs ~0.1 below the threshold (same min_recall),
    for the residual sample: the kept pairs it finds at or above the threshold are exactly the
    near duplicates the stage's banding missed (or that hid in a giant bucket's star)."""
    lb, lr = recall_params(max(0.05, cfg.threshold - 0.1), cfg.num_perm, cfg.min_recall)
    return (lb, lr) if lr < r else (cfg.num_perm // max(1, r - 1), max(1, r - 1))


class NearDedup:
    def __init__(self, cfg: DedupConfig, pool: ProcessPoolExecutor | None, memo: Memo | None = None) -> None:
        self.cfg = cfg
        self.pool = pool
        self.memo = memo or Memo(None)  # the stage's units (resume.py); none: every result computed
        self.b, self.r = banding(cfg)
        self.doc_index: np.ndarray = np.empty(0, dtype=np.int64)  # row in sigs -> doc index
        self.sigs: np.ndarray | None = None
        self.texts: Texts | None = None  # the documents' texts (signatures() names them)
        self._shingles: dict[int, np.ndarray] = {}
        self._pos: dict[int, int] = {}
        self.prefiltered = 0

    # phase 1: signatures
    def signatures(self, texts: Texts, todo: list[int]) -> None:
        """Signatures of the ``todo`` documents (rows of ``texts``) in batches of ``dedup.batch_size`` (units
        ``minhash.bs=B.k=K``: a resumed run loads the batches a killed run finished); each pool task
        reads its batch's texts from the memory-mapped dataset itself."""
        self.texts = texts
        self.doc_index = np.array(sorted(set(todo)), dtype=np.int64)
        self._pos = {int(d): k for k, d in enumerate(self.doc_index)}
        c = self.cfg
        bs = c.batch_size
        blocks = [self.doc_index[s0:s0 + bs] for s0 in range(0, len(self.doc_index), bs)]
        names = [f"minhash.bs={bs}.k={k:06d}" for k in range(len(blocks))]

        def args(k: int) -> tuple:
            return (*texts.task(blocks[k]), c.shingle, c.ngram, c.num_perm, c.seed, c.base_hash)

        out: list[np.ndarray] = []
        with tqdm(total=len(self.doc_index), unit="docs", desc="minhash", mininterval=2) as bar:
            for sig in self.memo.imap(names, _sig_rows, args, self.pool):
                out.append(sig)
                bar.update(len(sig))
        self.sigs = np.concatenate(out) if out else np.empty((0, c.num_perm), dtype=np.uint32)

    # phases 2-3: buckets -> candidate pairs -> verified edges -> clusters
    def clusters(self) -> tuple[list[list[int]], dict[str, Any]]:
        assert self.sigs is not None
        keys = band_keys(self.sigs, self.b, self.r)
        pairs = candidate_pairs(keys)
        uf = UnionFind(len(self.doc_index))
        verified = []
        # pairs from a giant bucket are (star centre, member): verifying each checks every member
        # against the centre, so a cluster never grows through unverified links
        ests = np.asarray(self._estimates(pairs))
        floor = self.cfg.threshold - self.cfg.prefilter_margin
        # far below the threshold by the signatures: not worth reading two texts. Filtered in numpy: the
        # recall banding proposes millions of pairs at scale (7.1M at 1M bench documents), most of them far off
        near = ests >= floor
        self.prefiltered = int(len(pairs) - near.sum())
        live, live_est = pairs[near], ests[near]
        # exact Jaccard in chunks of VERIFY_PAIRS candidate pairs (units verify.n=N.k=K)
        chunks = [live[s0:s0 + VERIFY_PAIRS] for s0 in range(0, len(live), VERIFY_PAIRS)]
        names = [f"verify.n={VERIFY_PAIRS}.k={k:06d}" for k in range(len(chunks))]
        js = (self.memo.imap(names, self._exact_chunk, lambda k: chunks[k]) if self.cfg.verify == "exact"
              else iter([live_est[s0:s0 + VERIFY_PAIRS] for s0 in range(0, len(live), VERIFY_PAIRS)]))
        bar = tqdm(total=len(live), unit="pairs", desc="verify", mininterval=2)
        for s0, (ch, jch) in enumerate(zip(chunks, js)):
            for (a, b), j, est in zip(ch.tolist(), np.asarray(jch).tolist(),
                                      live_est[s0 * VERIFY_PAIRS:s0 * VERIFY_PAIRS + len(ch)].tolist()):
                if j >= self.cfg.threshold:
                    uf.union(a, b)
                    verified.append((a, b, j, est))
            bar.update(len(ch))
        bar.close()
        return self._finish(uf, pairs, verified)

    def _finish(self, uf: UnionFind, pairs: np.ndarray, verified: list[tuple[int, int, float, float]]
                ) -> tuple[list[list[int]], dict[str, Any]]:
        """Clusters (doc indices, largest first) and the report's figures from the verified edges."""
        clusters = [[int(self.doc_index[m]) for m in members] for members in uf.clusters().values()]
        clusters.sort(key=lambda c: (-len(c), c[0]))
        c = self.cfg
        info = {
            "bands": self.b, "rows": self.r,
            "banding": {"chosen_by": "explicit bands/rows" if c.bands is not None else
                        (f"recall: P(candidate | J={c.threshold}) >= {c.min_recall}, fewest candidates below"
                         if c.banding == "recall" else "datasketch MinHashLSH optimum (equal fp/fn weights)"),
                        **banding_summary(c.threshold, self.b, self.r)},
            "candidate_pairs": int(len(pairs)),
            "verified_pairs": len(verified),
            "rejected_candidates": int(len(pairs)) - len(verified),
            # rejected on the signature estimate alone (estimate < threshold - prefilter_margin)
            "rejected_by_estimate": int(self.prefiltered),
            "exact_jaccard_computed": int(len(pairs)) - int(self.prefiltered) if c.verify == "exact" else 0,
            "min_verified_jaccard": round(min((j for _, _, j, _ in verified), default=1.0), 4),
            "verified_edges": [(int(self.doc_index[a]), int(self.doc_index[b]), round(j, 4), round(e, 4))
                               for a, b, j, e in verified],
        }
        log.info("near dedup: b=%d r=%d, %s candidate pairs, %s verified, %s clusters", self.b, self.r,
                 f"{len(pairs):,}", f"{len(verified):,}", f"{len(clusters):,}")
        return clusters, info

    def _estimates(self, pairs: np.ndarray) -> np.ndarray:
        """Signature estimate of every pair, in chunks: 2 x 64K x num_perm x 4 bytes at a time (the
        recall banding proposes millions of pairs at scale; gathering all rows at once would not fit)."""
        assert self.sigs is not None
        out = np.empty(len(pairs), dtype=np.float64)
        step = 1 << 16
        for s0 in range(0, len(pairs), step):
            p = pairs[s0:s0 + step]
            out[s0:s0 + step] = estimated_jaccard(self.sigs[p[:, 0]], self.sigs[p[:, 1]])
        return out

    def _sig_columns(self, c0: int, c1: int) -> np.ndarray:
        """Columns [c0, c1) of the signature matrix, all rows (one looser band at a time)."""
        assert self.sigs is not None
        return np.ascontiguousarray(self.sigs[:, c0:c1])

    def _loose_runs(self, rows: np.ndarray, i: int, lr: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Loose band i over the kept `rows`: sort order, start and size of every bucket of >= 2."""
        col = band_keys(self._sig_columns(i * lr, (i + 1) * lr), 1, lr)[rows, 0]
        order = np.argsort(col, kind="stable")
        sc = col[order]
        brk = np.flatnonzero(sc[1:] != sc[:-1]) + 1
        starts = np.concatenate(([0], brk))
        sizes = np.diff(np.concatenate((starts, [len(sc)])))
        keep = sizes >= 2
        return order, starts[keep], sizes[keep]

    def _loose_shared(self, ra: int, rb: int, lb: int, lr: int) -> int:
        """How many loose bands rows ra and rb share (>= 1 for a pair drawn from a loose bucket)."""
        assert self.sigs is not None
        two = np.asarray(self.sigs[np.array([ra, rb])])
        k = band_keys(two, lb, lr)
        return max(1, int((k[0] == k[1]).sum()))

    def residual(self, kept_docs: set[int], edges: list[tuple[int, int, float]], seed: int) -> dict[str, Any]:
        """The survivors' check: verified edges between kept documents (0 expected), and an estimate
        of the near duplicates left among them.

        The estimate draws kept pairs uniformly from the bucket pairs of a looser banding (nothing is
        enumerated: a giant bucket costs nothing), up to 100 x ``residual_sample`` draws; those whose
        signature estimate is within ``prefilter_margin`` of the threshold (at most ``residual_sample``)
        get an exact Jaccard. Each pair >= threshold counts 1/(loose bands it shares), Horvitz-Thompson,
        so the estimate is of distinct kept pairs >= threshold that share a looser bucket.
        """
        c = self.cfg
        both_kept = sum(1 for a, b, _ in edges if a in kept_docs and b in kept_docs)
        out: dict[str, Any] = {"kept_docs": len(kept_docs), "verified_edges_between_kept": both_kept}
        if c.residual_sample == 0 or self.sigs is None or len(kept_docs) < 2:
            return out
        rows = np.array(sorted(self._pos[d] for d in kept_docs if d in self._pos), dtype=np.int64)
        lb, lr = loose_banding(c, self.b, self.r)
        weights = []
        for i in range(lb):  # pass 1: bucket-pair totals per band (one band's keys in memory at a time)
            _, _, sizes = self._loose_runs(rows, i, lr)
            weights.append(float((sizes * (sizes - 1) // 2).sum()))
        total = sum(weights)
        rng = np.random.default_rng([seed, 14])
        out.update({"loose_bands": lb, "loose_rows": lr,
                    "loose_p_at": {f"{j:.2f}": round(float(s_curve(j, lb, lr)), 4)
                                   for j in (c.threshold - 0.2, c.threshold - 0.1, c.threshold)},
                    "loose_bucket_pairs": int(total)})
        if total == 0:
            out.update({"drawn": 0, "within_margin": 0, "exact_checked": 0, "exact_at_or_above_threshold": 0,
                        "estimated_missed_near_dups": 0.0, "upper_95_if_none_found": None, "found": []})
            return out
        # with replacement (bucket pairs are drawn independently); never more draws than bucket pairs
        # draw many kept bucket pairs (with replacement, each bucket pair equally likely), screen them by
        # their signature estimate (a vector compare), and compute the exact Jaccard only for those
        # within prefilter_margin of the threshold (at most residual_sample of them)
        draws = min(100 * c.residual_sample, int(total))
        per_band = rng.multinomial(draws, np.array(weights) / total)
        picked = []
        for i in range(lb):  # pass 2: the band's share of the draws, uniform over its bucket pairs
            k = int(per_band[i])
            if k == 0:
                continue
            order, starts, sizes = self._loose_runs(rows, i, lr)
            w = (sizes * (sizes - 1) // 2).astype(np.float64)
            bk = rng.choice(len(sizes), size=k, p=w / w.sum())
            st, sz = starts[bk], sizes[bk]
            x = rng.integers(0, sz)
            y = rng.integers(0, sz - 1)
            y = y + (y >= x)  # two distinct members of the bucket
            a_, b_ = order[st + x], order[st + y]
            picked.append(np.stack((rows[np.minimum(a_, b_)], rows[np.maximum(a_, b_)]), axis=1))
        drawn = np.concatenate(picked)
        est = self._estimates(drawn)
        live = np.flatnonzero(est >= c.threshold - c.prefilter_margin)
        checked = live if len(live) <= c.residual_sample else np.sort(rng.choice(live, c.residual_sample, replace=False))
        found, hits_weight = [], 0.0
        for ra, rb in drawn[checked].tolist():
            j = self._exact(ra, rb)
            if j >= c.threshold:
                hits_weight += 1.0 / self._loose_shared(ra, rb, lb, lr)
                found.append((int(self.doc_index[ra]), int(self.doc_index[rb]), round(j, 4)))
        scale = len(live) / len(checked) if len(checked) else 0.0
        estimate = total / len(drawn) * hits_weight * scale
        out.update({"drawn": len(drawn), "drawn_jaccard_estimate_p50": round(float(np.median(est)), 4),
                    "within_margin": int(len(live)), "exact_checked": int(len(checked)),
                    "exact_at_or_above_threshold": len(found),
                    "estimated_missed_near_dups": round(estimate, 1),
                    # zero hits: a 95% upper bound by the rule of three over the draws
                    "upper_95_if_none_found": round(3 * total / len(drawn), 1) if not found else None,
                    "found": sorted(set(found))[:20]})
        log.info("residual: %d verified edges between kept docs; looser banding %dx%d: %s kept bucket pairs, %s drawn, "
                 "%d within the margin, %d of %d checked >= %.2f: estimated %.1f near dups still among the %s kept docs",
                 both_kept, lb, lr, f"{int(total):,}", f"{len(drawn):,}", len(live), len(found), len(checked),
                 c.threshold, estimate, f"{len(kept_docs):,}")
        return out

    def close(self) -> None:
        """Release work files (the local engine keeps everything in memory: nothing to do)."""

    def _shingle_set(self, k: int) -> np.ndarray:
        if k not in self._shingles:
            text = self.text_of(int(self.doc_index[k]))
            self._shingles[k] = shingle_hashes(text, self.cfg.shingle, self.cfg.ngram, self.cfg.base_hash)
        return self._shingles[k]

    def _exact_chunk(self, pairs: np.ndarray) -> np.ndarray:
        return np.array([self._exact(a, b) for a, b in pairs.tolist()], dtype=np.float64)

    def _exact(self, a: int, b: int) -> float:
        return float(exact_jaccard(self._shingle_set(a), self._shingle_set(b)))

    def pair_jaccard(self, doc_a: int, doc_b: int) -> float:
        """Exact Jaccard of two documents by doc index (for the removed doc vs its kept one)."""
        return round(self._exact(self._pos[doc_a], self._pos[doc_b]), 4)

    def pair_jaccards(self, pairs: list[tuple[int, int]], chunk: int = 20_000) -> list[float]:
        """:meth:`pair_jaccard` of many (doc, doc) pairs, reading the texts in bulk (sorted ``take``
        per chunk of pairs, nothing cached): random row access costs ~1 ms a document at 1M rows."""
        assert self.texts is not None
        out: list[float] = []
        c = self.cfg
        for s0 in range(0, len(pairs), chunk):
            part = pairs[s0:s0 + chunk]
            need = np.unique(np.array(part, dtype=np.int64).ravel())
            texts = self.texts.take(need)
            sets = {int(d): shingle_hashes(t, c.shingle, c.ngram, c.base_hash) for d, t in zip(need, texts)}
            out.extend(round(float(exact_jaccard(sets[a], sets[b])), 4) for a, b in part)
        return out

    def text_of(self, doc: int) -> str:
        assert self.texts is not None
        return self.texts[doc]

    def shingles_of_text(self, text: str) -> np.ndarray:
        return shingle_hashes(text, self.cfg.shingle, self.cfg.ngram, self.cfg.base_hash)

    def sig_of_texts(self, texts: list[str]) -> np.ndarray:
        return signatures_for_texts(texts, self.cfg.shingle, self.cfg.ngram, self.cfg.num_perm, self.cfg.seed,
                                    self.cfg.base_hash)
