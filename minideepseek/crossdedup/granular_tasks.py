"""The line and paragraph steps' per-document work, as tasks for a process pool.

Stage 2's granular steps ran in one process: at the 100M scale size the stage kept 1.2 of 2 cores busy,
the line counting + paragraph pass alone 72 s of its 293 s. Normalizing and hashing every line does not
depend on any other document, so it runs in the pool on chunks of rows that each worker reads from the
memory-mapped dataset itself; what does depend on order -- the per-bucket line counts, the paragraph
Bloom filter (first occurrence wins) and every counter -- stays in the stage's process, which takes the
results in row order. The output is therefore the one of a single process (tested).

Pass 1 (``count_chunk``): per document its distinct counted line hashes and its number of paragraphs
long enough to deduplicate. Pass 2 (``clean_chunk``): per document the text without its bucket's
boilerplate lines (the buckets' line sets come from a file the stage writes after pass 1, read once
per worker) and the line numbers and hashes of that text's paragraphs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..mapped import take_texts
from .lines import bucket_of, doc_line_hashes, strip_lines
from .spans import eligible_paragraphs, paragraph_hashes

CHUNK_DOCS = 256  # documents per task
POOL_MIN_CHARS = 50_000_000  # below this the pool's start-up costs more than it saves (the demo: 38M)


@dataclass(frozen=True)
class Chunk:
    shards: tuple[str, ...]
    rows: np.ndarray  # row numbers in the dataset, ascending
    ids: tuple[str, ...]
    lines: tuple[bool, ...]  # per row: the line step applies to its source
    paras: tuple[bool, ...]  # per row: the paragraph step applies
    min_line_chars: int
    code_aware: bool
    para_min_chars: int
    seed: int = 0
    n_buckets: int = 1
    boiler_file: str = ""  # pass 2: the buckets' boilerplate line hashes (save_boiler)


def count_chunk(c: Chunk) -> list[tuple[np.ndarray | None, int]]:
    """Pass 1: (distinct line hashes or None, eligible paragraphs) per row of ``c``."""
    out: list[tuple[np.ndarray | None, int]] = []
    for text, do_lines, do_paras in zip(take_texts((list(c.shards), c.rows)), c.lines, c.paras):
        hs = np.asarray(doc_line_hashes(text, c.min_line_chars, c.code_aware), dtype=np.uint64) if do_lines else None
        out.append((hs, eligible_paragraphs(text, c.para_min_chars) if do_paras else 0))
    return out


def clean_chunk(c: Chunk, boiler: dict[int, set[int]] | None = None) -> list[tuple[str, list[str], list[int], list[int]]]:
    """Pass 2: (text after the line step, removed lines, paragraph line numbers, paragraph hashes) per
    row of ``c``; the paragraph lists are empty where the paragraph step does not apply. ``boiler``:
    the buckets' line sets when run in the stage's own process, else read from ``c.boiler_file``."""
    if boiler is None:
        boiler = load_boiler(c.boiler_file) if c.boiler_file else {}
    out: list[tuple[str, list[str], list[int], list[int]]] = []
    for text, doc_id, do_lines, do_paras in zip(take_texts((list(c.shards), c.rows)), c.ids, c.lines, c.paras):
        gone: list[str] = []
        if do_lines:
            text, gone = strip_lines(text, boiler.get(bucket_of(doc_id, c.seed, c.n_buckets)), c.min_line_chars,
                                     c.code_aware)
        idx, hs = paragraph_hashes(text, c.para_min_chars) if do_paras else ([], [])
        out.append((text, gone, idx, hs))
    return out


def save_boiler(path: str, boiler: dict[int, set[int]]) -> None:
    """The per-bucket boilerplate line hashes as two arrays (bucket, hash)."""
    pairs = sorted((b, h) for b, hs in boiler.items() for h in hs)
    np.savez(path, buckets=np.array([b for b, _ in pairs], dtype=np.int64),
             hashes=np.array([h for _, h in pairs], dtype=np.uint64))


@functools.lru_cache(maxsize=2)
def load_boiler(path: str) -> dict[int, set[int]]:
    """``save_boiler``'s dict again, once per worker process."""
    with np.load(path) as z:
        out: dict[int, set[int]] = {}
        for b, h in zip(z["buckets"].tolist(), z["hashes"].tolist()):
            out.setdefault(int(b), set()).add(int(h))
    return out
