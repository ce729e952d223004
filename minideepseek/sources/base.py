"""The one interface every source kind implements.

A source yields ``RawDoc`` records in *sampling order* for a given epoch: finite sources (local
files, the demo corpus) enumerate every record and apply an exact seeded permutation, reading the
records back from a disk spool (``spool.RecordSpool``) so memory does not grow with the source;
streaming sources (the Hugging Face hub) use a seeded shuffle buffer, because taking the first N rows
of a stream samples only its head (often one crawl dump or one repository).

A finite source also has ``spool_dir`` (stage 1 sets it inside its tmp dir; None: a private tempdir)
and ``close()`` (removes the spool).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from ..artifact import InputRef
from ..records import RawDoc


class Source(Protocol):
    name: str

    def iter_raw(self, epoch: int) -> Iterator[RawDoc]:
        """Records of one pass over the source, in this epoch's seeded order."""
        ...

    def input_ref(self) -> InputRef:
        """Path + fingerprint of what this source reads, for the manifest and staleness checks."""
        ...
