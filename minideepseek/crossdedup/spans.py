"""Paragraph dedup (dolma's ``paragraph`` dedup): a paragraph (a newline-separated line, as in dolma)
already seen earlier in the run's order -- the input order of ``mixed_raw`` -- is removed; its first
occurrence stays. Paragraphs shorter than ``min_chars`` (normalized) are never removed, so headings
and short replies are not stripped from every document but the first.

Seen paragraphs go into a Bloom filter (:class:`BloomFilter`) sized for the stated false-positive
rate: m = -n ln p / (ln 2)^2 bits and k = (m / n) ln 2 hash functions for n paragraphs (counted
before it is built), i.e. ~43 bits = 5.4 bytes per paragraph at p = 1e-9, against 16+ bytes for an
exact 128-bit hash set (``exact: true``). A false positive removes a paragraph that was never seen:
expected count <= p x (paragraphs queried), reported. Positions are double hashing (Kirsch and
Mitzenmacher) over the two 64-bit halves of xxh3_128, so the filter is deterministic.
"""

from __future__ import annotations

import math
import unicodedata

import numpy as np
import xxhash


def normalize_paragraph(p: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", p).casefold().split())


def _h128(norm: str) -> int:
    return xxhash.xxh3_128_intdigest(norm.encode("utf-8", "surrogatepass"))


def eligible_paragraphs(text: str, min_chars: int) -> int:
    return sum(1 for p in text.split("\n") if len(normalize_paragraph(p)) >= min_chars)


def paragraph_hashes(text: str, min_chars: int) -> tuple[list[int], list[int]]:
    """The line numbers and 128-bit hashes of ``text``'s paragraphs long enough to be deduplicated:
    the per-document, order-free half of ``ParagraphDedup.strip``."""
    idx, hs = [], []
    for j, p in enumerate(text.split("\n")):
        n = normalize_paragraph(p)
        if len(n) >= min_chars:
            idx.append(j)
            hs.append(_h128(n))
    return idx, hs


class BloomFilter:
    def __init__(self, n_items: int, fp_rate: float) -> None:
        n = max(1, n_items)
        self.m = max(64, int(math.ceil(-n * math.log(fp_rate) / math.log(2) ** 2)))
        self.k = max(1, int(round(self.m / n * math.log(2))))
        self.bits = np.zeros((self.m + 7) // 8, dtype=np.uint8)
        self.n_capacity = n
        self.fp_rate = fp_rate

    def _positions(self, hashes: list[int]) -> np.ndarray:
        h = np.array(hashes, dtype=object)
        lo = np.array([x & 0xFFFFFFFFFFFFFFFF for x in h], dtype=np.uint64)
        hi = np.array([(x >> 64) | 1 for x in h], dtype=np.uint64)  # odd step: k distinct positions
        i = np.arange(self.k, dtype=np.uint64)
        with np.errstate(over="ignore"):
            return (lo[:, None] + i[None, :] * hi[:, None]) % np.uint64(self.m)

    def check_and_add(self, hashes: list[int]) -> np.ndarray:
        """For each hash in order: was it (probably) in the filter before? Then add it. One vectorized
        lookup for the batch; a repeat inside the batch counts as seen from its second occurrence."""
        if not hashes:
            return np.zeros(0, dtype=bool)
        pos = self._positions(hashes)
        byte, bit = pos >> np.uint64(3), (np.uint8(1) << (pos & np.uint64(7)).astype(np.uint8))
        seen = np.all(self.bits[byte] & bit, axis=1)
        first: set[int] = set()
        for r, h in enumerate(hashes):
            if h in first:
                seen[r] = True
            first.add(h)
        np.bitwise_or.at(self.bits, byte.ravel(), bit.ravel())
        return seen

    def contains(self, h: int) -> bool:
        pos = self._positions([h])
        byte, bit = pos >> np.uint64(3), (np.uint8(1) << (pos & np.uint64(7)).astype(np.uint8))
        return bool(np.all(self.bits[byte] & bit))

    def expected_fp_rate(self, n_added: int) -> float:
        return (1.0 - math.exp(-self.k * n_added / self.m)) ** self.k


class ParagraphDedup:
    def __init__(self, n_paragraphs: int, min_chars: int, fp_rate: float, exact: bool) -> None:
        self.min_chars = min_chars
        self.exact = exact
        self.seen: set[int] = set()
        self.bloom = None if exact else BloomFilter(n_paragraphs, fp_rate)
        self.queried = 0
        self.added = 0

    def eligible(self, text: str) -> int:
        return eligible_paragraphs(text, self.min_chars)

    def strip(self, text: str) -> tuple[str, list[str]]:
        return self.apply(text, *paragraph_hashes(text, self.min_chars))

    def apply(self, text: str, idx: list[int], hs: list[int]) -> tuple[str, list[str]]:
        """Remove from ``text`` its paragraphs (lines ``idx``, hashes ``hs`` from ``paragraph_hashes``)
        seen earlier in the run, then remember them: the order-dependent half of ``strip``."""
        if not hs:
            return text, []
        self.queried += len(hs)
        if self.exact:
            seen = []
            for h in hs:
                seen.append(h in self.seen)
                self.seen.add(h)
        else:
            assert self.bloom is not None
            seen = self.bloom.check_and_add(hs).tolist()
        self.added += sum(1 for s in seen if not s)
        drop = {j for j, s in zip(idx, seen) if s}
        if not drop:
            return text, []
        paras = text.split("\n")
        return "\n".join(p for j, p in enumerate(paras) if j not in drop), [paras[j] for j in sorted(drop)]

    def was_seen(self, norm: str) -> bool:
        """Whether a normalized paragraph was seen (a repeat of it would be removed); read only: the
        recall certificate asks without adding, so no real document's paragraphs change."""
        h = _h128(norm)
        if self.exact:
            return h in self.seen
        assert self.bloom is not None
        return self.bloom.contains(h)

    def stats(self) -> dict:
        out = {"paragraphs_queried": self.queried, "distinct_added": self.added,
               "structure": "exact 128-bit hash set" if self.exact else "Bloom filter"}
        if self.bloom is not None:
            fp = self.bloom.expected_fp_rate(self.added)
            out.update({"bloom_bits": self.bloom.m, "bloom_hashes": self.bloom.k, "bloom_bytes": int(self.bloom.bits.nbytes),
                        "target_fp_rate": self.bloom.fp_rate, "fp_rate_at_fill": fp,
                        "expected_false_removals_upper": round(fp * self.queried, 6)})
        return out
