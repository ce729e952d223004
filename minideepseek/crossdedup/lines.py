"""Line-level boilerplate removal in seeded buckets (Llama 3, seed 003 §四.6).

Every document is put in one of ``ceil(n / bucket_docs)`` buckets by a seeded hash of its id (so the
buckets mix sources and are the same for the same seed). Pass 1 counts, per bucket, in how many
documents each normalized line occurs (a line counts once per document: a table that repeats
``----`` inside one page is not boilerplate across pages). Pass 2 removes from every document the
lines whose count in its bucket exceeds ``max_repeats``. Bucketing is what keeps a globally common
short line ("Thank you.") from being flagged only because the pool is huge: the threshold is a
share of a bucket (k / N), not a global count.

Line normalization (CCNet's): NFKC, casefold, digits -> 0, whitespace collapsed; blank lines and
lines shorter than ``min_line_chars`` are never counted or removed. ``code_aware`` (default) also
leaves alone the lines of code inside prose documents (:func:`is_code_line`: no letter at all, such as
``}`` or ``[0]``, or a ``>>>`` / ``...`` prompt or a code fence), which a docs corpus repeats
because they are code, not because they are template.

Memory: pass 1 keeps one (bucket, 64-bit hash) pair per distinct line per document (16 bytes);
at scale a bucket at a time would be counted (not needed at the demo's size).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

import numpy as np
import xxhash

_DIGITS = re.compile(r"\d")
_LETTER = re.compile(r"[^\W\d_]")
# code-aware: lines inside documents that are code, not prose -- REPL/doctest prompts, fences
_CODE_LINE = re.compile(r"^(>>>|\.\.\.|```|\$ |in \[0*\]:)")


def is_code_line(norm: str) -> bool:
    """A normalized line that is code or markup structure, never boilerplate: no letter at all
    (``}``, ``@``, ``[0]``, ``0.0``, a rule of dashes) or a REPL/doctest prompt or a code fence."""
    return _LETTER.search(norm) is None or _CODE_LINE.match(norm) is not None


def normalize_line(line: str) -> str:
    return " ".join(_DIGITS.sub("0", unicodedata.normalize("NFKC", line).casefold()).split())


def line_hash(norm: str) -> int:
    return xxhash.xxh3_64_intdigest(norm.encode("utf-8", "surrogatepass"))


def bucket_of(doc_id: str, seed: int, n_buckets: int) -> int:
    return xxhash.xxh3_64_intdigest(f"{seed}:{doc_id}".encode("utf-8", "surrogatepass")) % n_buckets


def counts(norm: str, min_chars: int, code_aware: bool) -> bool:
    """Whether a normalized line is counted (and can be removed) at all."""
    return len(norm) >= min_chars and not (code_aware and is_code_line(norm))


def doc_line_hashes(text: str, min_chars: int, code_aware: bool) -> list[int]:
    """A document's distinct counted line hashes, sorted (pass 1's per-document work)."""
    out = set()
    for line in text.split("\n"):
        n = normalize_line(line)
        if counts(n, min_chars, code_aware):
            out.add(line_hash(n))
    return sorted(out)


def strip_lines(text: str, boiler: set[int] | None, min_chars: int, code_aware: bool) -> tuple[str, list[str]]:
    """``text`` without the lines whose hash is in ``boiler`` (its bucket's boilerplate), and the removed
    lines (normalized) -- pass 2's per-document work."""
    if not boiler:
        return text, []
    kept, gone = [], []
    for line in text.split("\n"):
        n = normalize_line(line)
        if counts(n, min_chars, code_aware) and line_hash(n) in boiler:
            gone.append(n)
        else:
            kept.append(line)
    return ("\n".join(kept), gone) if gone else (text, [])


class LineCounter:
    """Pass 1: per bucket, how many documents contain each normalized line."""

    def __init__(self, n_docs: int, bucket_docs: int, max_repeats: int, min_line_chars: int, seed: int,
                 code_aware: bool = False) -> None:
        self.code_aware = code_aware
        self.n_buckets = max(1, -(-n_docs // bucket_docs))
        self.k = max_repeats
        self.min_chars = min_line_chars
        self.seed = seed
        self._buckets: list[np.ndarray] = []
        self._hashes: list[np.ndarray] = []
        self.boiler: dict[int, set[int]] = {}
        self.bucket_sizes: Counter = Counter()

    def doc_hashes(self, text: str) -> list[int]:
        return doc_line_hashes(text, self.min_chars, self.code_aware)

    def add(self, doc_id: str, text: str) -> None:
        self.add_hashes(doc_id, self.doc_hashes(text))

    def add_hashes(self, doc_id: str, hs: list[int] | np.ndarray) -> None:
        """Count one document's ``doc_line_hashes`` (computed here or by a pool worker)."""
        b = self.bucket(doc_id)
        self.bucket_sizes[b] += 1
        self._buckets.append(np.full(len(hs), b, dtype=np.int64))
        self._hashes.append(np.asarray(hs, dtype=np.uint64))

    def bucket(self, doc_id: str) -> int:
        return bucket_of(doc_id, self.seed, self.n_buckets)

    def finish(self) -> None:
        """Lines over the threshold, per bucket."""
        if not self._hashes:
            return
        bk, hs = np.concatenate(self._buckets), np.concatenate(self._hashes)
        self._buckets, self._hashes = [], []
        order = np.lexsort((hs, bk))
        bk, hs = bk[order], hs[order]
        brk = np.flatnonzero((bk[1:] != bk[:-1]) | (hs[1:] != hs[:-1])) + 1
        starts = np.concatenate(([0], brk)).astype(np.int64)
        counts = np.diff(np.concatenate((starts, [len(hs)])))
        over = starts[counts > self.k]
        for b, h in zip(bk[over].tolist(), hs[over].tolist()):
            self.boiler.setdefault(int(b), set()).add(int(h))

    def strip(self, doc_id: str, text: str) -> tuple[str, list[str]]:
        """The text without its bucket's boilerplate lines, and the removed lines (normalized)."""
        return strip_lines(text, self.boiler.get(self.bucket(doc_id)), self.min_chars, self.code_aware)
