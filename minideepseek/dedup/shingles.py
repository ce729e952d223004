"""Shingling for near-duplicate detection: text normalization, units, and the 32-bit base hash of
every distinct shingle of a document.

Definitions (the stage, the tests and the bench all go through these, so they agree):

- Normalization (:func:`normalize_text`): NFKC, then ``str.lower()``, then every run of Unicode
  whitespace collapsed to one space and the ends stripped. Full-width forms, ligatures, case and
  layout then do not hide a duplicate.
- Units: ``"char"`` -- the code points of the normalized text (spaces included), so a char 5-gram is
  ``norm[i:i+5]``: the seed's shingles, and right for Chinese, which has no spaces. ``"word"`` --
  whitespace-separated tokens, except that every CJK character (Han, kana, bopomofo, CJK symbols
  and punctuation) is a word of its own, so word 5-grams also work on Chinese/Japanese. Hangul is
  space-delimited and stays in ordinary words. A word shingle's string is its words joined by one
  space.
- A document with fewer than ``n`` units yields exactly one shingle, the whole (normalized) text, so
  a short document still has a signature; an empty one yields none (all-max signature, the same as
  an empty ``datasketch.MinHash``; the stage rejects blank documents before this).

Base hashes (the value datasketch's ``hashfunc`` would return for ``shingle.encode("utf-8")``):

- ``"sha1"`` (default): ``datasketch.hashfunc.sha1_hash32``, datasketch 2.0's default for its default
  ``affine32`` scheme, so signatures are identical to the seed's
  ``MinHash(num_perm=128)`` + ``update(shingle.encode())`` code. One hashlib call per *distinct*
  shingle (~0.45 us) is the remaining cost: ~3.8 MB/s per core on the demo mix, ~40x the seed's
  0.09 MB/s (whose ``update()`` costs ~9 us per char 5-gram).
- ``"mix64"``: a numpy-vectorized hash (no Python call per shingle), ~22 MB/s per core, ~6.5x the
  sha1 path and ~180x the seed (bench/bench_minhash.py, 2-core box, idle). It is a
  fold over the shingle's unit values (code points, or ``xxh3_64`` of each word) with a
  multiply/xor-shift step and murmur3's fmix64, keeping the top 32 bits. :func:`mix64_hash32` is the
  same function for one shingle's bytes; ``datasketch.MinHash(hashfunc=datasketch_hashfunc(kind,
  "mix64"))`` fed the same shingles produces our signatures exactly (tested). Distinct shingles
  collide with probability ~2**-32 per pair, the same as sha1_hash32.

Usage::

    from minideepseek.dedup import shingle_hashes, shingles
    shingles("Hello  World", "char", 5)          # ['hello', 'ello ', 'llo w', 'lo wo', 'o wor', ' worl', 'world']
    shingle_hashes("你好，世界", "word", 5)        # sorted distinct uint32 base hashes
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Literal

import numpy as np
import xxhash

ShingleKind = Literal["char", "word"]
BaseHash = Literal["sha1", "mix64"]
DEFAULT_BASE_HASH: BaseHash = "sha1"
KINDS: tuple[str, ...] = ("char", "word")
BASE_HASHES: tuple[str, ...] = ("sha1", "mix64")

# Characters that are one word each in "word" mode: CJK radicals/Kangxi, CJK symbols and punctuation
# (。「」 ...), hiragana, katakana, bopomofo, CJK strokes/extensions, Han (BMP, compatibility and the
# supplementary planes). NFKC has already folded full-width ASCII (，！) to ASCII by then.
_CJK = "\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u31a0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff" \
       "\U00020000-\U0003134f"
_WORD_RE = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")

# Lone surrogates (possible in a Python str from JSON escapes) must not crash a stage; datasketch's
# default `shingle.encode("utf-8")` would raise on them, so for such text there is no baseline anyway.
_ERRORS = "surrogatepass"

_MASK64 = (1 << 64) - 1
_H0 = 0x243F6A8885A308D3  # fold start (pi digits); any fixed value works
_K = 0x9E3779B97F4A7C15  # odd 64-bit golden-ratio multiplier: the step is a bijection of the state
_SHIFT = 29
_FM1, _FM2 = 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53  # murmur3 fmix64
_CHUNK = 1 << 16  # window hashing in L2-sized chunks: 3x faster than whole-batch arrays (measured)


def normalize_text(text: str) -> str:
    """NFKC + lowercase + collapse whitespace: the text every shingle is cut from."""
    # is_normalized is a quick check (~15x cheaper than normalize on text that is already NFKC, the
    # common case); the result is the same either way
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    return " ".join(text.lower().split())


def words(norm: str) -> list[str]:
    """Word units of *normalized* text: whitespace tokens, each CJK character its own word."""
    return _WORD_RE.findall(norm)


def shingles(text: str, kind: ShingleKind = "char", n: int = 5) -> list[str]:
    """Every shingle of `text` in order, with repeats: exactly what the seed's code feeds ``update()``.

    Slow (a Python string per position); for tests, the bench baseline and debugging.
    """
    _check(kind, n)
    norm = normalize_text(text)
    if kind == "char":
        if len(norm) <= n:
            return [norm] if norm else []
        return [norm[i:i + n] for i in range(len(norm) - n + 1)]
    ws = words(norm)
    if len(ws) <= n:
        return [" ".join(ws)] if ws else []
    return [" ".join(ws[i:i + n]) for i in range(len(ws) - n + 1)]


# --------------------------------------------------------------------------------------------------
# the mix64 base hash: one scalar reference, one vectorized implementation; tests hold them equal


def _fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * _FM1) & _MASK64
    h ^= h >> 33
    h = (h * _FM2) & _MASK64
    return h ^ (h >> 33)


def _fold_scalar(units: Iterable[int]) -> int:
    h = _H0
    for u in units:
        h = ((h ^ u) * _K) & _MASK64
        h ^= h >> _SHIFT
    return _fmix64(h) >> 32


def _word_unit(word: str) -> int:
    return xxhash.xxh3_64_intdigest(word.encode("utf-8", _ERRORS))


def mix64_hash32(shingle: bytes, kind: ShingleKind = "char") -> int:
    """The mix64 base hash of one shingle given as UTF-8 bytes (a datasketch ``hashfunc``).

    char: fold over the code points; word: fold over ``xxh3_64`` of each space-separated word.
    """
    s = shingle.decode("utf-8", _ERRORS)
    if kind == "char":
        return _fold_scalar(map(ord, s))
    return _fold_scalar(map(_word_unit, s.split(" ")))


def datasketch_hashfunc(kind: ShingleKind = "char", base_hash: BaseHash = DEFAULT_BASE_HASH) -> Callable[[bytes], int]:
    """The ``hashfunc`` that makes ``datasketch.MinHash`` produce our signatures (picklable)."""
    if base_hash == "sha1":
        from datasketch.hashfunc import sha1_hash32

        return sha1_hash32
    if base_hash == "mix64":
        return partial(mix64_hash32, kind=kind)
    raise ValueError(f"base_hash must be one of {BASE_HASHES}, got {base_hash!r}")


def _window_hashes(units: np.ndarray, n: int) -> np.ndarray:
    """mix64 of every window of `n` consecutive uint64 units -> uint32, len(units) - n + 1 values."""
    w = len(units) - n + 1
    out = np.empty(max(w, 0), dtype=np.uint32)
    k, shift = np.uint64(_K), np.uint64(_SHIFT)
    s33, s32, fm1, fm2 = np.uint64(33), np.uint64(32), np.uint64(_FM1), np.uint64(_FM2)
    h = np.empty(min(_CHUNK, max(w, 0)), dtype=np.uint64)
    t = np.empty_like(h)
    for c0 in range(0, w, _CHUNK):
        c1 = min(w, c0 + _CHUNK)
        hc, tc = h[:c1 - c0], t[:c1 - c0]
        hc.fill(_H0)
        for j in range(n):
            np.bitwise_xor(hc, units[c0 + j:c1 + j], out=hc)
            np.multiply(hc, k, out=hc)
            np.right_shift(hc, shift, out=tc)
            np.bitwise_xor(hc, tc, out=hc)
        for m in (fm1, fm2):
            np.right_shift(hc, s33, out=tc)
            np.bitwise_xor(hc, tc, out=hc)
            np.multiply(hc, m, out=hc)
        np.right_shift(hc, s33, out=tc)
        np.bitwise_xor(hc, tc, out=hc)
        np.right_shift(hc, s32, out=hc)
        out[c0:c1] = hc
    return out


def _sorted_distinct(h: np.ndarray) -> np.ndarray:
    # sort + mask, not np.unique: numpy 2.4's np.unique is 5-7x slower than np.sort here (measured
    # 100-175 vs 15-45 ns/element on 1K-50K uint64)
    s = np.sort(h)
    if s.size > 1:
        s = s[np.concatenate(([True], s[1:] != s[:-1]))]
    return s


# --------------------------------------------------------------------------------------------------
# batch entry points


def _check(kind: str, n: int, base_hash: str = DEFAULT_BASE_HASH) -> None:
    if kind not in KINDS:
        raise ValueError(f"shingle kind must be one of {KINDS}, got {kind!r}")
    if n < 1:
        raise ValueError(f"shingle size n must be >= 1, got {n}")
    if base_hash not in BASE_HASHES:
        raise ValueError(f"base_hash must be one of {BASE_HASHES}, got {base_hash!r}")


def _sha1_distinct(units: Sequence[str] | str, n: int, joiner: str) -> np.ndarray:
    """sha1_hash32 of every distinct shingle; `units` is the normalized text (char) or its words."""
    size = len(units)
    if size == 0:
        return np.empty(0, dtype=np.uint32)
    sha1 = hashlib.sha1
    if not joiner and size > n:
        text = units if isinstance(units, str) else "".join(units)
        raw = text.encode("utf-8", _ERRORS)
        if len(raw) == size:  # ASCII: byte slices are the UTF-8 shingles; no encode per shingle (-20%)
            digests = b"".join([sha1(g).digest() for g in {raw[i:i + n] for i in range(size - n + 1)}])
        else:
            grams = {text[i:i + n] for i in range(size - n + 1)}
            digests = b"".join([sha1(g.encode("utf-8", _ERRORS)).digest() for g in grams])
    else:
        if size <= n:
            grams = {joiner.join(units)}
        else:
            grams = {joiner.join(units[i:i + n]) for i in range(size - n + 1)}
        digests = b"".join([sha1(g.encode("utf-8", _ERRORS)).digest() for g in grams])
    # sha1_hash32 = struct.unpack("<I", digest[:4]): the first little-endian word of each 20-byte digest
    return np.frombuffer(digests, dtype="<u4").reshape(-1, 5)[:, 0].astype(np.uint32)


def _mix64_flat(norms: list[str], kind: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The mix64 base hash of every shingle of every document, repeats included, in one flat uint32
    array (document after document) and the count per document: what a MinHash needs (min ignores
    repeats), without a per-document sort."""
    if kind == "char":
        lens = np.fromiter(map(len, norms), dtype=np.int64, count=len(norms))
        joined = "".join(norms).encode("utf-32-le", _ERRORS)
        # widened once: xor-ing uint32 slices into the uint64 state made every fold step a mixed-type
        # ufunc call (numpy's buffered cast path), most of the window hashing's time
        units = np.frombuffer(joined, dtype="<u4").astype(np.uint64)
    else:
        per_doc = [words(s) for s in norms]
        lens = np.fromiter(map(len, per_doc), dtype=np.int64, count=len(per_doc))
        flat = [w for ws in per_doc for w in ws]
        # hash each distinct word once (Zipf: far fewer distinct words than tokens)
        table = {w: _word_unit(w) for w in dict.fromkeys(flat)}
        units = np.fromiter(map(table.__getitem__, flat), dtype=np.uint64, count=len(flat))
    win = _window_hashes(units, n)
    ends = np.cumsum(lens)
    counts = np.where(lens >= n, lens - n + 1, np.minimum(lens, 1))
    if (lens >= n).all():
        # a window is valid when it ends inside its document: drop the n - 1 that straddle each
        # boundary (positions end-n+1 .. end-1), found from the ends alone, not a per-window array
        valid = np.ones(len(win), dtype=bool)
        straddle = (ends[:-1, None] - np.arange(n - 1, 0, -1)[None, :]).ravel()
        valid[straddle[straddle < len(win)]] = False
        return win[valid], counts
    parts = []  # some documents shorter than n: one whole-document shingle each, in document order
    for size, end in zip(lens.tolist(), ends.tolist()):
        off = end - size
        if size >= n:
            parts.append(win[off:end - n + 1])
        elif size:
            parts.append(np.array([_fold_scalar(units[off:end].tolist())], dtype=np.uint32))
    return (np.concatenate(parts) if parts else np.empty(0, dtype=np.uint32)), counts


def _mix64_distinct_flat(norms: list[str], kind: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per document its distinct mix64 base hashes, sorted, as one flat array and the count per
    document: each document's slice sorted in place (uint32 sorts are fast; one sort of the whole
    batch by (document, hash) keys was slower, measured), then one mask for the whole batch."""
    flat, counts = _mix64_flat(norms, kind, n)
    ends = np.cumsum(counts)
    for c, e in zip(counts.tolist(), ends.tolist()):
        if c > 1:
            flat[e - c:e].sort()
    if len(flat) < 2:
        return flat, counts
    keep = np.empty(len(flat), dtype=bool)
    keep[0] = True
    np.not_equal(flat[1:], flat[:-1], out=keep[1:])
    keep[(ends - counts)[counts > 0]] = True  # a document's first hash is new even if equal to the last one's
    pos = np.flatnonzero(keep)
    distinct = np.diff(np.searchsorted(pos, np.concatenate(([0], ends))))
    return flat[pos], distinct.astype(np.int64)


def _mix64_batch(norms: list[str], kind: str, n: int) -> list[np.ndarray]:
    flat, counts = _mix64_distinct_flat(norms, kind, n)
    # copies, not views: a cached per-document set must not keep the whole batch's array alive
    return [a.copy() for a in np.split(flat, np.cumsum(counts)[:-1])]


def batch_shingle_hashes(texts: Sequence[str], kind: ShingleKind = "char", n: int = 5,
                         base_hash: BaseHash = DEFAULT_BASE_HASH) -> list[np.ndarray]:
    """Per document, the uint32 base hashes of its distinct shingles (mix64: sorted; sha1: set order).

    The mix64 path hashes the whole batch in a few vectorized calls, so per-document numpy overhead
    stays small even for short documents.
    """
    _check(kind, n, base_hash)
    norms = [normalize_text(t) for t in texts]
    if base_hash == "mix64":
        return _mix64_batch(norms, kind, n)
    if kind == "char":
        return [_sha1_distinct(s, n, "") for s in norms]
    return [_sha1_distinct(words(s), n, " ") for s in norms]


def batch_distinct_flat(texts: Sequence[str], kind: ShingleKind = "char", n: int = 5,
                        base_hash: BaseHash = DEFAULT_BASE_HASH) -> tuple[np.ndarray, np.ndarray]:
    """:func:`batch_shingle_hashes` as one flat uint32 array (document after document) and the count
    per document: what ``minhash.signatures_flat`` takes, without a list of per-document arrays."""
    _check(kind, n, base_hash)
    if base_hash == "mix64":
        return _mix64_distinct_flat([normalize_text(t) for t in texts], kind, n)
    per_doc = batch_shingle_hashes(texts, kind, n, base_hash)
    counts = np.fromiter(map(len, per_doc), dtype=np.int64, count=len(per_doc))
    flat = np.concatenate(per_doc) if counts.sum() else np.empty(0, dtype=np.uint32)
    return flat.astype(np.uint32, copy=False), counts


def shingle_hashes(text: str, kind: ShingleKind = "char", n: int = 5,
                   base_hash: BaseHash = DEFAULT_BASE_HASH) -> np.ndarray:
    """Sorted, distinct uint32 base hashes of the shingles of `text` (a set, for exact Jaccard).

    Each value is what ``datasketch_hashfunc(kind, base_hash)`` returns for ``shingle.encode()``.
    """
    return _sorted_distinct(batch_shingle_hashes([text], kind, n, base_hash)[0])
