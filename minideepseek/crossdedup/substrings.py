"""Exact-substring dedup with a suffix array (Lee et al. 2021, seed 003 §四.6): spans of at least
``min_tokens`` tokens that occur at least twice are removed from every occurrence but the first (in
the run's order: the input order of ``mixed_raw``).

Tokens: ``\\w+`` runs and single non-space symbols (a code-friendly word tokenizer; whitespace is
not a token, so re-indented or re-wrapped copies still match), mapped to uint32 ids. Every
document's tokens are followed by a separator id of its own, so no match crosses documents.

Suffix array: ``pydivsufsort`` (PyPI, pinned in requirements.txt; libdivsufsort for integer
alphabets) and its Kasai LCP when installed; otherwise a numpy construction: prefix doubling
(Manber-Myers) stopped at depth ``min_tokens`` -- ranks of the length-1, 2, 4, ... prefixes, each
round an ``np.unique`` over (rank[i], rank[i + h]) pairs, and the length-L rank from the two
overlapping power-of-two prefixes -- which orders the suffixes exactly as the full suffix array
does up to depth L, all the ">= L tokens repeated" query needs. Both give the same classes of
positions whose next L tokens are equal; the first position of each class is kept, every other one
marks [p, p + L) as removed, and overlapping marks merge into the maximal repeated spans.

Memory: per token 4 (id) + 8 (char offsets) bytes, plus the suffix array and LCP (4 + 4 bytes with
pydivsufsort; ~40 bytes transient with numpy). ``max_tokens`` bounds one array: larger inputs are cut
into chunks of whole documents, and repeats across two chunks are not found (as in Lee et al.'s
sharded runs).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..mapped import take_texts
from .textstore import read_at

_TOKEN = re.compile(r"\w+|[^\w\s]")


def have_pydivsufsort() -> bool:
    try:
        import pydivsufsort  # noqa: F401
    except ImportError:
        return False
    return True


def _classes_pydivsufsort(tokens: np.ndarray, L: int) -> tuple[np.ndarray, np.ndarray]:
    """(positions, class id) of every position whose next L tokens occur elsewhere too."""
    from pydivsufsort import divsufsort, kasai

    sa = divsufsort(tokens).astype(np.int64)
    lcp = kasai(tokens, sa).astype(np.int64)  # lcp[i] = LCP(sa[i], sa[i + 1])
    link = lcp[:-1] >= L if len(lcp) > 1 else np.zeros(0, dtype=bool)
    # members: sa[i] and sa[i + 1] for every linked i; classes are maximal linked runs
    member = np.zeros(len(sa), dtype=bool)
    member[:-1] |= link
    member[1:] |= link
    starts = np.ones(len(sa), dtype=bool)
    starts[1:] = ~link
    cls = np.cumsum(starts) - 1
    return sa[member], cls[member]


def _classes_numpy(tokens: np.ndarray, L: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(tokens)
    _, rank = np.unique(tokens, return_inverse=True)
    rank = rank.astype(np.int64)
    ranks = {1: rank}
    h = 1
    while 2 * h <= L:
        r = ranks[h]
        nxt = np.full(n, -1, dtype=np.int64)
        nxt[:n - h] = r[h:]
        _, ranks[2 * h] = np.unique(r * (n + 1) + (nxt + 1), return_inverse=True)
        h *= 2
    r = ranks[h]
    nxt = np.full(n, -1, dtype=np.int64)
    if L - h > 0:
        nxt[:n - (L - h)] = r[L - h:]
    else:
        nxt = r
    valid = np.arange(n) <= n - L  # a window must fit
    key = r * (n + 1) + (nxt + 1)
    pos = np.flatnonzero(valid)
    key = key[pos]
    order = np.lexsort((pos, key))
    k_sorted, p_sorted = key[order], pos[order]
    brk = np.ones(len(k_sorted), dtype=bool)
    brk[1:] = k_sorted[1:] != k_sorted[:-1]
    cls = np.cumsum(brk) - 1
    sizes = np.bincount(cls)
    member = sizes[cls] >= 2
    return p_sorted[member], cls[member]


@dataclass
class SubstringResult:
    cut: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # doc -> char intervals to remove
    tokens_in: int = 0
    tokens_removed: int = 0
    spans: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)
    engine: str = ""
    chunks: int = 0


def find_repeats(docs: Iterable[tuple[int, str]], L: int, engine: str = "auto", max_tokens: int = 20_000_000,
                 n_examples: int = 10, ids: Sequence[str] | Mapping[int, str] | None = None,
                 cross_doc_only: bool = False) -> SubstringResult:
    """Char intervals to cut from each document (index, text), documents in run order; ``docs`` is read
    once, so a generator keeps only the current chunk's texts in memory. In one process; a pool runs
    the same chunks with ``count_tokens`` + ``plan_chunks`` + ``chunk_repeats`` + ``merge`` (granular.py)."""
    res = SubstringResult(engine=resolve_engine(engine))
    chunk: list[tuple[int, str, np.ndarray]] = []
    total = 0
    vocab: dict[str, int] = {}  # token string -> id: ids only need to agree inside one chunk
    for doc, text in docs:
        words = _TOKEN.findall(text)
        if chunk and total + len(words) + 1 > max_tokens:  # plan_chunks's rule
            _run_chunk(chunk, L, res.engine, res, n_examples, ids, cross_doc_only)
            chunk, total, vocab = [], 0, {}  # a vocabulary per chunk: memory does not grow with the run
        chunk.append((doc, text, _ids(words, vocab)))
        total += len(words) + 1
    if chunk:
        _run_chunk(chunk, L, res.engine, res, n_examples, ids, cross_doc_only)
    return res


def resolve_engine(engine: str) -> str:
    return ("pydivsufsort" if have_pydivsufsort() else "numpy") if engine == "auto" else engine


def _ids(words: list[str], vocab: dict[str, int]) -> np.ndarray:
    """The words' ids in ``vocab`` (extended): 8 bytes per token; char offsets are found again only for
    the documents that get cut (findall + a dict is ~3x faster than per-token span tuples, measured)."""
    return np.fromiter(map(lambda w: vocab.setdefault(w, len(vocab)), words), dtype=np.int64, count=len(words))


# ---- the same work for a process pool: chunks are independent (a repeat across two chunks is not
# looked for), so after one cheap pass that counts every document's tokens -- the chunk boundaries
# depend on the counts only -- each chunk is a task, and the results are merged in chunk order into
# what find_repeats returns (tested: same cuts, counters and examples)

@dataclass(frozen=True)
class TextRefs:
    """Where a task's workers read the documents' current texts themselves (only these refs travel):
    a row of the stage's input dataset, or a cleaned copy in the step's ``TextStore`` file."""
    docs: tuple[int, ...]  # document indexes (rows of ``shards``), in run order
    at: tuple[tuple[int, int], ...]  # per document: (offset, bytes) in ``store``, or (-1, 0): its row
    shards: tuple[str, ...]
    store: str = ""


def read_refs(r: TextRefs) -> list[str]:
    rows = [d for d, (off, _) in zip(r.docs, r.at) if off < 0]
    raw = iter(take_texts((list(r.shards), np.array(rows, dtype=np.int64)))) if rows else iter(())
    out: list[str] = []
    fd = os.open(r.store, os.O_RDONLY) if r.store and len(rows) < len(r.docs) else None
    try:
        for off, n in r.at:
            out.append(next(raw) if off < 0 else read_at(fd, off, n))
    finally:
        if fd is not None:
            os.close(fd)
    return out


def count_tokens(r: TextRefs) -> list[int]:
    """Pass 1: each document's number of tokens (what the chunk boundaries depend on)."""
    return [len(_TOKEN.findall(t)) for t in read_refs(r)]


def plan_chunks(counts: Sequence[int], max_tokens: int) -> list[tuple[int, int]]:
    """[start, end) positions of each chunk: whole documents, a document and its separator counting
    ``tokens + 1``, a chunk closed before the document that would take it past ``max_tokens``."""
    out, start, total = [], 0, 0
    for k, n in enumerate(counts):
        if k > start and total + n + 1 > max_tokens:
            out.append((start, k))
            start, total = k, 0
        total += n + 1
    if start < len(counts):
        out.append((start, len(counts)))
    return out


@dataclass(frozen=True)
class ChunkTask:
    refs: TextRefs
    L: int
    engine: str
    n_examples: int
    ids: tuple[str, ...]  # the chunk's documents' ids, in ``refs.docs`` order (for the examples)
    cross_doc_only: bool


def chunk_repeats(t: ChunkTask) -> SubstringResult:
    """Pass 2: one chunk's repeats, as ``find_repeats`` finds them in that chunk."""
    vocab: dict[str, int] = {}
    chunk = [(d, text, _ids(_TOKEN.findall(text), vocab)) for d, text in zip(t.refs.docs, read_refs(t.refs))]
    del vocab
    res = SubstringResult(engine=t.engine)
    _run_chunk(chunk, t.L, t.engine, res, t.n_examples, dict(zip(t.refs.docs, t.ids)), t.cross_doc_only)
    return res


def merge(res: SubstringResult, part: SubstringResult, n_examples: int) -> None:
    """Add the next chunk's result to ``res`` (the examples stop where find_repeats's would)."""
    res.cut.update(part.cut)  # a document is in one chunk
    res.tokens_in += part.tokens_in
    res.tokens_removed += part.tokens_removed
    res.spans += part.spans
    res.chunks += part.chunks
    res.examples.extend(part.examples[:max(0, 20 * n_examples - len(res.examples))])


def _run_chunk(chunk: list[tuple[int, str, np.ndarray]], L: int, engine: str, res: SubstringResult,
               n_examples: int, ids: Sequence[str] | Mapping[int, str] | None, cross_doc_only: bool) -> None:
    res.chunks += 1
    lens = np.array([len(t) + 1 for _, _, t in chunk], dtype=np.int64)
    starts = (np.cumsum(lens) - lens).tolist()
    toks = np.concatenate([np.append(t, -1) for _, _, t in chunk]) if chunk else np.zeros(0, dtype=np.int64)
    seps = np.flatnonzero(toks < 0)
    toks[seps] = int(toks.max(initial=0)) + 1 + np.arange(len(seps))  # a separator of its own per document
    res.tokens_in += int(len(toks) - len(seps))
    if len(toks) < L:
        return
    classes = _classes_pydivsufsort if engine == "pydivsufsort" else _classes_numpy
    pos, cls = classes(toks.astype(np.uint32 if toks.max() < 2**32 else np.uint64), L)
    if len(pos) == 0:
        return
    # keep the first position of each class; mark [p, p + L) for the others
    order = np.lexsort((pos, cls))
    pos, cls = pos[order], cls[order]
    first = np.ones(len(pos), dtype=bool)
    first[1:] = cls[1:] != cls[:-1]
    keep_of = pos[np.maximum.accumulate(np.where(first, np.arange(len(pos)), 0))]
    drop, src = pos[~first], keep_of[~first]
    doc_starts = np.array(starts, dtype=np.int64)
    if cross_doc_only:  # a repeat whose first occurrence is in the same document stays
        other = np.searchsorted(doc_starts, drop, side="right") != np.searchsorted(doc_starts, src, side="right")
        drop, src = drop[other], src[other]
    diff = np.zeros(len(toks) + 1, dtype=np.int64)
    np.add.at(diff, drop, 1)
    np.add.at(diff, drop + L, -1)
    covered = np.cumsum(diff[:-1]) > 0
    kept_at = dict(zip(drop.tolist(), src.tolist()))
    # maximal covered runs -> per document char intervals
    span_cache: dict[int, np.ndarray] = {}
    edges = np.flatnonzero(np.diff(np.concatenate(([0], covered.astype(np.int8), [0]))))
    for a, b in zip(edges[0::2].tolist(), edges[1::2].tolist()):
        k = int(np.searchsorted(doc_starts, a, side="right") - 1)
        doc, text, _ = chunk[k]
        if k not in span_cache:
            span_cache[k] = np.array([m.span() for m in _TOKEN.finditer(text)], dtype=np.int64).reshape(-1, 2)
        spans = span_cache[k]
        ta, tb = a - starts[k], b - starts[k]  # token range inside the document (never the separator)
        ca, cb = int(spans[ta][0]), int(spans[tb - 1][1])
        res.cut.setdefault(doc, []).append((ca, cb))
        res.spans += 1
        res.tokens_removed += b - a
        if len(res.examples) < 20 * n_examples:  # the caller picks n (e.g. cross-source ones first)
            q = kept_at.get(a)
            kk = int(np.searchsorted(doc_starts, q, side="right") - 1) if q is not None else None
            res.examples.append({"doc": ids[doc] if ids else doc, "tokens": b - a, "chars": cb - ca,
                                 "first_in": (ids[chunk[kk][0]] if ids else chunk[kk][0]) if kk is not None else None,
                                 "text": text[ca:cb][:240]})


def cut_text(text: str, intervals: list[tuple[int, int]]) -> str:
    out, last = [], 0
    for a, b in sorted(intervals):
        out.append(text[last:a])
        last = max(last, b)
    out.append(text[last:])
    return "".join(out)
