"""Stage 2's one document table and one text reader, shared by every step.

``mixed_raw`` is read once for its per-document columns (:func:`read_docs`: everything but the text) and
every step -- URL, exact, near, against, lines/paragraphs/substrings, decontamination, the canaries and
the writers -- works on that :class:`Docs` by row index instead of reading the columns again. Texts are
read by row through :class:`Texts` (a memory map of the dataset's shards, :mod:`..mapped`): in this
process with ``texts[i]`` / ``texts.take(rows)``, in a pool or Ray worker with ``mapped.take_texts(texts.task(rows))``
(the worker maps the shared files itself; only row numbers travel). The granular steps write a cleaned
copy of ``mixed_raw``; the steps after them get a second ``Texts`` over that copy, same rows, same order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..arrow_io import iter_dataset_rows, read_columns, shard_paths
from ..mapped import MappedArrow
from ..records import base_id, is_copy, trace_component

COLUMNS = ["id", "source", "url", "n_chars", "n_tokens", "hash", "audit_trace"]


def keep_key(priority: dict[str, int], source: str, n_chars: int, doc_id: str) -> tuple:
    """Keep order: source priority, then the longest text, then the smallest id."""
    return (priority.get(source, len(priority)), -n_chars, doc_id)


@dataclass
class Docs:
    """Stage 2's per-document table (columns of ``mixed_raw``, no text) and what was removed, and why.

    ``n_chars``, ``n_tokens`` and ``hashes`` follow the texts: the cleaning steps replace them with the
    cleaned texts' values; ``n_chars0`` keeps the lengths as sampled (the funnel's and canaries' sizes)."""

    ids: list[str]
    srcs: list[str]
    urls: list[str | None]
    n_chars: list[int]
    n_tokens: list[int]
    hashes: list[str]
    components: list[str]  # stage 1's component (or format) of each document: finer than the source
    copies: np.ndarray  # upsampled copies (``#e<k>``): never deduplicated, they follow their original
    index_of: dict[str, int]
    priority: dict[str, int]  # source -> rank in dedup.source_priority (lower is kept)
    n_chars0: tuple[int, ...] = ()
    orig: dict[int, int | None] = field(default_factory=dict)  # copy -> its original's index (None: not sampled)
    removed: dict[int, dict[str, Any]] = field(default_factory=dict)  # doc index -> why

    @property
    def n(self) -> int:
        return len(self.ids)

    def keep_key(self, i: int) -> tuple:
        return keep_key(self.priority, self.srcs[i], self.n_chars[i], self.ids[i])

    def remove(self, i: int, reason: str, kept: int, jaccard: float) -> None:
        self.removed[i] = {"reason": reason, "kept": self.ids[kept], "kept_source": self.srcs[kept], "jaccard": jaccard}

    def live(self) -> list[int]:
        """The documents a step reads on their own: not removed, not an upsampled copy."""
        return [i for i in range(self.n) if not self.copies[i] and i not in self.removed]


def read_docs(src_dir: Path, order: Sequence[str] = ()) -> Docs:
    """The table of the dataset ``src_dir`` (one pass over its shards); ``order``: source priority."""
    meta = read_columns(src_dir, COLUMNS)
    ids = meta["id"]
    index_of = {doc_id: i for i, doc_id in enumerate(ids)}
    copies = np.array([is_copy(i) for i in ids], dtype=bool)
    return Docs(ids, meta["source"], meta["url"], meta["n_chars"], meta["n_tokens"], meta["hash"],
                [trace_component(t) for t in meta["audit_trace"]], copies, index_of,
                {name: i for i, name in enumerate(order)}, tuple(meta["n_chars"]),
                {i: index_of.get(base_id(ids[i])) for i in np.flatnonzero(copies).tolist()})


class Texts:
    """The ``text`` column of one saved dataset, by row (any order): stage 2's only way to its texts."""

    def __init__(self, ds_dir: Path) -> None:
        self.dir = ds_dir
        # absolute: a Ray worker's working directory is not the driver's
        self.shards: tuple[str, ...] = tuple(str(p.resolve()) for p in shard_paths(ds_dir))
        self._map: MappedArrow | None = None  # this process's map, opened on first use

    def _mapped(self) -> MappedArrow:
        if self._map is None:
            self._map = MappedArrow([Path(s) for s in self.shards], "stream", columns=["text"])
        return self._map

    def __len__(self) -> int:
        return self._mapped().num_rows

    def __getitem__(self, i: int) -> str:
        m = self._mapped()
        c = int(np.searchsorted(m.starts, i, side="right")) - 1
        return m.batches[c].column(0)[int(i) - int(m.starts[c])].as_py()

    def take(self, rows: Sequence[int] | np.ndarray) -> list[str]:
        """Texts of ``rows`` in that order, gathered in bulk (one ``take`` per record batch)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return []
        m = self._mapped()
        out = m.take(rows).column("text").to_pylist()  # a copy: the mapped pages can go
        m.release()  # bulk reads sweep the dataset: keep them out of the RSS (mapped.py)
        return out

    def task(self, rows: np.ndarray) -> tuple[list[str], np.ndarray]:
        """A worker's share: :func:`take_texts` of it reads the texts of ``rows`` in the worker."""
        return list(self.shards), rows

    def rows(self) -> Iterator[dict[str, Any]]:
        """Whole rows in input order (the writers: every column, the text included)."""
        return iter_dataset_rows(self.dir)

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None

