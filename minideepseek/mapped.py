"""Random row access into Arrow IPC files through a memory map whose resident pages we can drop.

Both shuffles read rows in a random order: documents from the upstream dataset (shuffled before
packing) and blocks from the pack-order temp file (shuffled after packing). ``pa.memory_map`` would
do, but every page it touches stays mapped into this process and counts in its RSS until the map is
closed, so the peak RSS of a run would grow with the data (the file-backed pages are reclaimable
page cache, yet ``ru_maxrss`` counts them). We map the files with Python's ``mmap`` instead, hand the
buffer to pyarrow zero-copy, and call ``madvise(MADV_DONTNEED)`` after each gather: the pages leave
our RSS (they stay in the page cache, so re-reading them costs no disk I/O) and memory stays bounded
by what one gather holds. Callers release after every gather: on a page fault the kernel maps the
~64 KiB around it (fault-around), so a random gather of 16 KiB blocks maps 4x what it reads, and
32 gathers between releases kept 130 MB of a 147 MB temp file in RSS (measured). ``madvise`` over
the whole map is cheap (page-table walk of the resident part).
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa


class MappedArrow:
    """Rows of one or more Arrow IPC files (``stream`` = save_to_disk shards, ``file`` = our temp file),
    addressed by a global row index across all their record batches."""

    def __init__(self, paths: Sequence[Path], fmt: Literal["stream", "file"],
                 columns: list[str] | None = None) -> None:
        self._maps: list[mmap.mmap] = []
        self.batches: list[pa.RecordBatch] = []
        for path in paths:
            with open(path, "rb") as fh:
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            self._maps.append(mm)
            buf = pa.py_buffer(mm)
            if fmt == "stream":
                batches = list(pa.ipc.open_stream(buf))
            else:
                reader = pa.ipc.open_file(buf)
                batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
            self.batches += [b.select(columns) if columns else b for b in batches if b.num_rows]
        self.starts = np.cumsum([0] + [b.num_rows for b in self.batches], dtype=np.int64)
        self.schema = self.batches[0].schema if self.batches else None

    @property
    def num_rows(self) -> int:
        return int(self.starts[-1])

    def take(self, idx: np.ndarray) -> pa.Table:
        """Copy rows ``idx`` (any order) into one new single-chunk table, in that order.

        One ``take`` per source record batch, then one reorder: ``Table.take`` over the whole mapped
        table could concatenate its chunks first, i.e. copy the file into memory."""
        idx = np.asarray(idx, dtype=np.int64)
        if len(idx) == 0:
            raise ValueError("take() needs at least one row")
        chunk = np.searchsorted(self.starts, idx, side="right") - 1
        order = np.argsort(chunk, kind="stable")
        cuts = np.flatnonzero(np.diff(chunk[order])) + 1
        parts = []
        for group in np.split(order, cuts):
            c = int(chunk[group[0]])
            parts.append(self.batches[c].take(pa.array(idx[group] - self.starts[c])))
        table = pa.Table.from_batches(parts)  # rows in `order`
        inv = np.empty_like(order)
        inv[order] = np.arange(len(order))
        return table.take(pa.array(inv)).combine_chunks()

    def release(self) -> None:
        """Drop the mapped pages from this process's RSS (they are re-read from the page cache)."""
        for mm in self._maps:
            mm.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        self.batches = []
        for mm in self._maps:
            try:
                mm.close()
            except BufferError:  # a caller still holds a zero-copy slice; the GC unmaps it later
                pass
        self._maps = []


def take_texts(args: tuple[list[str], np.ndarray]) -> list[str]:
    """Task body: the ``text`` of rows ``idx`` (any order) of the dataset whose shards are listed.
    Runs in a pool or Ray worker, which maps the (shared) files itself: only the texts travel."""
    shards, idx = args
    if len(idx) == 0:
        return []
    docs = MappedArrow([Path(x) for x in shards], "stream", columns=["text"])
    try:
        return docs.take(np.asarray(idx)).column("text").to_pylist()
    finally:
        docs.close()
