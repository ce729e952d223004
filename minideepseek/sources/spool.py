"""A finite source's records on disk instead of in memory, read back in any order.

A finite source (local files, the demo corpus) samples by an exact seeded permutation of all its
records, so it must know every record before it yields the first. Holding them as Python objects
cost memory proportional to the corpus (tens of GB at 1B tokens). A ``RecordSpool`` writes each
record once, pickled, to an uncompressed file and keeps only an ``int64`` array of where each one
ends (8 bytes per record); ``iter_order(permutation)`` reads them back one by one with ``os.pread``
(the page cache holds the file, not this process: reading does not grow its RSS, which an ``mmap``
would). A record read back is equal to the one written (pickle round-trips ``str`` with lone
surrogates, ``bytes``, ``None`` and dicts in key order), so the sample, and every artifact built
from it, is byte-identical to the in-memory path.

Where the file lives: the stage passes its own staging directory (``<artifact>.tmp-<pid>/_spool``),
so a failed stage removes it with the rest of its tmp dir and a killed one leaves it to the next
run's ``remove_dead_tmp``; the stage removes it before it commits. Used outside a stage (tests,
benches) a spool makes a private ``tempfile`` directory, removed by ``close()``, by garbage
collection or at interpreter exit (not after SIGKILL: the OS's tmp cleaning has it then).
Disk: about the records' raw size (uncompressed text), for the duration of stage 1.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
import weakref
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

import numpy as np

T = TypeVar("T")

PROTOCOL = 5


def _remove(path: Path, own_dir: Path | None, fds: list[int]) -> None:
    while fds:
        os.close(fds.pop())
    path.unlink(missing_ok=True)
    if own_dir is not None:
        shutil.rmtree(own_dir, ignore_errors=True)


class SpoolError(RuntimeError):
    """Writing the spool failed (disk full): a problem of this machine, not of the source being read."""


class RecordSpool(Sequence[T], Generic[T]):
    """Append-only while writing, then a read-only sequence of the records in append order.

    >>> sp = RecordSpool(None, "web"); sp.append(doc); ...; sp.seal()
    >>> len(sp), sp[0], list(sp.iter_order(permutation)); sp.close()
    """

    def __init__(self, directory: Path | None, stem: str) -> None:
        own_dir = None
        if directory is None:
            own_dir = directory = Path(tempfile.mkdtemp(prefix="minideepseek-spool-"))
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=directory, prefix=f"{stem}.", suffix=".spool")
        self.path = Path(name)
        self._out: Any = os.fdopen(fd, "wb", buffering=1 << 16)
        self._ends = array("q")  # end offset of record i; record i starts where i-1 ends
        self._pos = 0
        self._fd: int | None = None
        self._fds: list[int] = []  # the open read fd, closed by _cleanup too (close() or garbage collection)
        self._offsets: np.ndarray | None = None
        self._cleanup = weakref.finalize(self, _remove, self.path, own_dir, self._fds)

    # ---- writing ---------------------------------------------------------------------------------

    def append(self, record: T) -> None:
        if self._out is None:
            raise RuntimeError(f"spool {self.path}: sealed or closed; append before seal()")
        data = pickle.dumps(record, protocol=PROTOCOL)
        try:
            self._out.write(data)
        except OSError as exc:  # not the source's OSError (an unreadable input file): disk full, quota
            raise SpoolError(f"cannot write the record spool {self.path} ({exc.strerror or exc}); stage 1 needs "
                             f"about the sources' raw size free there") from exc
        self._pos += len(data)
        self._ends.append(self._pos)

    def extend(self, records: Iterable[T]) -> None:
        for r in records:
            self.append(r)

    def seal(self) -> RecordSpool[T]:
        """End writing; the records become readable."""
        if self._out is not None:
            self._out.close()
            self._out = None
            self._offsets = np.concatenate([np.zeros(1, np.int64), np.frombuffer(self._ends, np.int64)])
            self._ends = array("q")
            self._fd = os.open(self.path, os.O_RDONLY)
            self._fds.append(self._fd)
        return self

    # ---- reading ---------------------------------------------------------------------------------

    def _check_readable(self) -> None:
        if self._fd is None or self._offsets is None:
            raise RuntimeError(f"spool {self.path}: " + ("not sealed; call seal() first" if self._out is not None
                                                          else "closed"))

    def _read(self, i: int) -> T:
        assert self._fd is not None and self._offsets is not None
        start, end = int(self._offsets[i]), int(self._offsets[i + 1])
        data = os.pread(self._fd, end - start, start)
        if len(data) != end - start:
            raise OSError(f"spool {self.path}: short read of record {i} ({len(data)} of {end - start} bytes)")
        return pickle.loads(data)  # noqa: S301 - our own file, written by append() in this process

    def __len__(self) -> int:
        if self._offsets is not None:
            return len(self._offsets) - 1
        return len(self._ends)

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...

    def __getitem__(self, i: int | slice) -> T | list[T]:
        self._check_readable()
        if isinstance(i, slice):
            return [self._read(k) for k in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"spool index {i} out of range ({n} records)")
        return self._read(i % n)

    def __iter__(self) -> Iterator[T]:
        self._check_readable()
        for i in range(len(self)):
            yield self._read(i)

    def iter_order(self, order: Iterable[int]) -> Iterator[T]:
        """The records at ``order``'s indices, in that order (a permutation: one epoch's sampling order)."""
        self._check_readable()
        for i in order:
            yield self._read(int(i))

    @property
    def nbytes(self) -> int:
        """Bytes on disk."""
        return self._pos

    def close(self) -> None:
        """Remove the file (and a private directory); the spool cannot be read afterwards."""
        if self._out is not None:
            self._out.close()
            self._out = None
        self._fd = None  # closed by _cleanup
        self._offsets = None
        self._cleanup()

    @property
    def closed(self) -> bool:
        return not self._cleanup.alive
