"""LSH banding over a signature matrix: band parameters, band keys, and candidate pairs by sorting.

``lsh_params`` picks (b, r) exactly as ``datasketch.MinHashLSH(threshold, num_perm)`` does, so a
threshold means the same here as in the seed. Instead of MinHashLSH's dict of buckets (measured
+616 MB for 258K docs), each band's uint64 keys are sorted and equal runs become candidate pairs:
memory is O(n_docs * b) and the work is b sorts.

Band keys: a band's r uint32 values are folded into 64 bits (multiply/xor-shift per value, murmur3
fmix64 at the end; each step is a bijection of the state, so two bands that differ only in their
last value never collide). Two different bands of pseudo-random MinHash values share a key with
probability ~2**-64: over n = 10**6 documents and b = 9 bands that is ~b * n**2 / 2 / 2**64 ~ 2e-7
spurious pairs in expectation, and the stage verifies every pair anyway.

Giant buckets (boilerplate, license headers: thousands of documents with one band value) would
emit O(k**2) pairs. Buckets larger than ``max_clique`` are emitted as a star instead: every member
paired with the bucket's first (lowest-index) member. A star has the same connected component as
the clique, so union-find over unverified pairs is unchanged; a stage that verifies pairs then
checks each member against the star centre, and a member that fails there can still join through
another band. Usage::

    b, r = lsh_params(0.8, 128)          # (9, 13), datasketch's choice
    keys = band_keys(sigs, b, r)         # (n_docs, b) uint64
    pairs = candidate_pairs(keys)        # (m, 2) int64, i < j, sorted, unique
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.integrate import quad

from .shingles import _FM1, _FM2, _H0, _K, _SHIFT

DEFAULT_MAX_CLIQUE = 64  # a bucket of 64 emits 2,016 pairs; a larger one emits a star of k - 1


def s_curve(j: float | np.ndarray, b: int, r: int) -> float | np.ndarray:
    """P(two documents with Jaccard j share at least one of b bands of r rows) = 1 - (1 - j**r)**b."""
    v = 1.0 - (1.0 - np.asarray(j, dtype=np.float64) ** r) ** b
    return float(v) if v.ndim == 0 else v


# The same integrands, bounds and search order as datasketch.lsh._optimal_param, so the argmin is
# bit-for-bit the same (a closed form would differ in the last float bits and could flip near ties).
def _false_positive(threshold: float, b: int, r: int) -> float:
    return quad(lambda s: 1 - (1 - s ** float(r)) ** float(b), 0.0, threshold)[0]


def _false_negative(threshold: float, b: int, r: int) -> float:
    return quad(lambda s: 1 - (1 - (1 - s ** float(r)) ** float(b)), threshold, 1.0)[0]


@lru_cache(maxsize=64)
def lsh_params(threshold: float = 0.8, num_perm: int = 128, false_positive_weight: float = 0.5,
               false_negative_weight: float = 0.5) -> tuple[int, int]:
    """(bands, rows) minimizing the weighted false positive + false negative areas under the S-curve.

    Equal to ``MinHashLSH(threshold, num_perm, weights=(fp, fn))``'s ``(b, r)``; ~0.1 s, cached.
    """
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    if num_perm < 2:
        raise ValueError(f"num_perm must be >= 2, got {num_perm}")
    best, opt = float("inf"), (0, 0)
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            err = (_false_positive(threshold, b, r) * false_positive_weight
                   + _false_negative(threshold, b, r) * false_negative_weight)
            if err < best:
                best, opt = err, (b, r)
    return opt


@lru_cache(maxsize=64)
def recall_params(threshold: float = 0.8, num_perm: int = 128, min_recall: float = 0.99) -> tuple[int, int]:
    """(bands, rows) whose candidate probability at J = threshold is >= `min_recall`, with the
    smallest false-positive area (the S-curve integrated over [0, threshold]: expected candidates
    below the threshold, which cost verification time only, since every candidate is verified).

    datasketch's optimum (:func:`lsh_params`) weighs misses and false candidates equally and gives
    9 x 13 for 0.8 / 128, whose P(candidate | J = 0.8) is only 0.87; here 0.8 / 128 gives 16 x 6
    (P = 0.992 at 0.8, 0.22 at 0.5, 0.012 at 0.3). When no banding reaches `min_recall` (few
    permutations) the one with the highest probability at the threshold wins.
    """
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    if num_perm < 2:
        raise ValueError(f"num_perm must be >= 2, got {num_perm}")
    if not 0.0 < min_recall < 1.0:
        raise ValueError(f"min_recall must be in (0, 1), got {min_recall}")
    best: tuple[float, float, int, int] | None = None
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            p = float(s_curve(threshold, b, r))
            # feasible ones first (ordered by false-positive area), then the most recall
            key = (0.0, _false_positive(threshold, b, r)) if p >= min_recall else (1.0, -p)
            if best is None or key < best[:2]:
                best = (*key, b, r)
    assert best is not None
    return best[2], best[3]


def banding_summary(threshold: float, b: int, r: int) -> dict[str, object]:
    """The chosen banding's S-curve for the report: P(candidate) at the threshold and on a J grid."""
    grid = [round(x, 2) for x in np.arange(0.3, 1.0001, 0.05)]
    return {"bands": b, "rows": r, "threshold": threshold,
            "p_at_threshold": round(float(s_curve(threshold, b, r)), 4),
            "p_at_threshold_plus_0.02": round(float(s_curve(min(threshold + 0.02, 1.0), b, r)), 4),
            "false_positive_area": round(_false_positive(threshold, b, r), 4),
            "s_curve": [{"j": j, "p": round(float(s_curve(j, b, r)), 4)} for j in grid]}


def band_keys(sigs: np.ndarray, b: int, r: int) -> np.ndarray:
    """(n_docs, b) uint64: band i is the fold of columns [i*r, (i+1)*r), as MinHashLSH's bands."""
    sigs = np.asarray(sigs)
    if sigs.ndim != 2:
        raise ValueError(f"signatures must be 2-D (n_docs, num_perm), got shape {sigs.shape}")
    if b < 1 or r < 1 or b * r > sigs.shape[1]:
        raise ValueError(f"bands*rows = {b}*{r} must be >= 1 and <= num_perm = {sigs.shape[1]}")
    n = sigs.shape[0]
    bands = sigs[:, :b * r].reshape(n, b, r)
    out = np.empty((n, b), dtype=np.uint64)
    k, shift, s33 = np.uint64(_K), np.uint64(_SHIFT), np.uint64(33)
    step = 1 << 15
    for c0 in range(0, n, step):
        blk = bands[c0:c0 + step]
        h = np.full(blk.shape[:2], _H0, dtype=np.uint64)
        for j in range(r):
            h ^= blk[:, :, j]
            h *= k
            h ^= h >> shift
        for m in (np.uint64(_FM1), np.uint64(_FM2)):
            h ^= h >> s33
            h *= m
        h ^= h >> s33
        out[c0:c0 + step] = h
    return out


def _runs(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start offsets and lengths of runs of equal values of length >= 2."""
    n = sorted_keys.size
    brk = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
    starts = np.concatenate(([0], brk))
    sizes = np.diff(np.concatenate((starts, [n])))
    keep = sizes >= 2
    return starts[keep], sizes[keep]


def _band_pairs(col: np.ndarray, max_clique: int) -> np.ndarray:
    """Pair codes i * n + j (i < j) of one band: cliques for small buckets, stars for big ones."""
    n = col.size
    order = np.argsort(col, kind="stable")  # stable: members of a run are in ascending doc order
    starts, sizes = _runs(col[order])
    parts: list[np.ndarray] = []
    small = sizes <= max_clique
    for s in np.unique(sizes[small]):  # few distinct sizes: one vectorized block per size
        st = starts[sizes == s]
        members = order[st[:, None] + np.arange(s)]  # (g, s), each row ascending
        iu, ju = np.triu_indices(int(s), 1)
        parts.append((members[:, iu].astype(np.uint64) * np.uint64(n) + members[:, ju].astype(np.uint64)).ravel())
    big_st, big_sz = starts[~small], sizes[~small]
    if big_st.size:
        tails = big_sz - 1
        centre = np.repeat(order[big_st], tails)
        # sorted positions start+1 .. start+size-1 of every big run, without a Python loop
        before = np.cumsum(tails) - tails
        pos = np.repeat(big_st + 1 - before, tails) + np.arange(int(tails.sum()))
        parts.append(centre.astype(np.uint64) * np.uint64(n) + order[pos].astype(np.uint64))
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)


def candidate_pairs(keys: np.ndarray, max_clique: int = DEFAULT_MAX_CLIQUE) -> np.ndarray:
    """(m, 2) int64 document-index pairs, i < j, sorted and unique, sharing at least one band key.

    Buckets of more than `max_clique` documents become stars around their lowest index (see the
    module docstring): component-preserving, O(k) pairs instead of O(k**2).
    """
    keys = np.asarray(keys)
    if keys.ndim != 2:
        raise ValueError(f"band keys must be 2-D (n_docs, b), got shape {keys.shape}")
    if max_clique < 2:
        raise ValueError(f"max_clique must be >= 2, got {max_clique}")
    n = keys.shape[0]
    codes = [band_pair_codes(np.ascontiguousarray(keys[:, i]), max_clique) for i in range(keys.shape[1])]
    return merge_pair_codes(codes, n)


def band_pair_codes(col: np.ndarray, max_clique: int = DEFAULT_MAX_CLIQUE) -> np.ndarray:
    """One band's candidate pairs as codes ``i * n + j`` (n = len(col)): the unit of work of a
    per-band task when the bands are processed apart (the Ray executor's bucket phase)."""
    return _band_pairs(col, max_clique)


def merge_pair_codes(codes: list[np.ndarray], n: int) -> np.ndarray:
    """Union of the bands' pair codes -> (m, 2) int64 pairs, i < j, sorted, unique."""
    allc = np.concatenate(codes) if codes else np.empty(0, dtype=np.uint64)
    if allc.size == 0:
        return np.empty((0, 2), dtype=np.int64)
    allc.sort()
    allc = allc[np.concatenate(([True], allc[1:] != allc[:-1]))]  # np.unique is slow in numpy 2.4
    nn = np.uint64(n)
    return np.stack(((allc // nn).astype(np.int64), (allc % nn).astype(np.int64)), axis=1)
