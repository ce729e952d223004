"""The cleaned texts of stage 2's granular steps, on disk instead of in memory.

Lines, paragraphs and substrings rewrite most documents of a run (22K of 32K at the 100M scale
size); holding every rewritten text as a Python ``str`` made stage 2's memory grow with the corpus
(its RSS slope in the scale bench). A ``TextStore`` is a mapping document index -> text backed by
one append-only file in the stage's work directory: ``store[i] = text`` appends the UTF-8 bytes
(``surrogatepass``: any Python str round-trips) and remembers (offset, bytes, characters); reading
is an ``os.pread``, served by the page cache, not counted in the process's RSS. Rewriting a document
again appends a new copy (the file holds at most each document's rewrites: about the run's text size).
The work directory is inside the stage's tmp dir, so a failed or killed stage leaves nothing behind.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

_ENC = ("utf-8", "surrogatepass")


def read_at(fd: int, off: int, n: int) -> str:
    """The text stored at [off, off + n) of an open store file."""
    parts, got = [], 0
    while got < n:
        b = os.pread(fd, n - got, off + got)
        if not b:
            raise OSError(f"short read of a text store: {n} bytes at {off}")
        parts.append(b)
        got += len(b)
    return b"".join(parts).decode(*_ENC)


class TextStore:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "texts.store"
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self._at: dict[int, tuple[int, int, int]] = {}  # index -> (offset, bytes, characters)
        self._end = 0

    def __setitem__(self, i: int, text: str) -> None:
        assert self._fd is not None, "closed"
        data = memoryview(text.encode(*_ENC))
        off = self._end
        while data:  # a regular file takes it whole; loop anyway for a short write
            n = os.pwrite(self._fd, data, self._end)
            data = data[n:]
            self._end += n
        self._at[i] = (off, self._end - off, len(text))

    def __getitem__(self, i: int) -> str:
        assert self._fd is not None, "closed"
        off, n, _ = self._at[i]
        return read_at(self._fd, off, n)

    def ref(self, i: int) -> tuple[int, int]:
        """(offset, bytes) of document i's current text in ``path``: what another process reads with
        ``read_at`` (appended copies are never overwritten while the store is open)."""
        off, n, _ = self._at[i]
        return off, n

    def get(self, i: int, default: str | None = None) -> str | None:
        return self[i] if i in self._at else default

    def __contains__(self, i: object) -> bool:
        return i in self._at

    def __len__(self) -> int:
        return len(self._at)

    def keys(self) -> Iterator[int]:
        return iter(self._at)

    def chars(self, i: int) -> int:
        """Characters of document i's current text, without reading it."""
        return self._at[i][2]

    def total_chars(self) -> int:
        return sum(c for _, _, c in self._at.values())

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.path.unlink(missing_ok=True)
