"""The one interface every source kind implements.

A source yields ``RawDoc`` records in *sampling order* for a given epoch: finite sources (local
files, the demo corpus) enumerate every record and apply an exact seeded permutation; streaming
sources (the Hugging Face hub) use a seeded shuffle buffer, because taking the first N rows of a
stream samples only its head (often one crawl dump or one repository).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Protocol

import numpy as np

from ..records import RawDoc
from ..stage import InputRef


class Source(Protocol):
    name: str

    def iter_raw(self, epoch: int) -> Iterator[RawDoc]:
        """Records of one pass over the source, in this epoch's seeded order."""
        ...

    def input_ref(self) -> InputRef:
        """Path + fingerprint of what this source reads, for the manifest and staleness checks."""
        ...


def rng_for(seed: int, *keys: str | int) -> np.random.Generator:
    """A generator seeded by (seed, keys...) that does not depend on Python's hash randomization."""
    ints = [seed]
    for k in keys:
        ints.append(int.from_bytes(hashlib.sha256(str(k).encode()).digest()[:8], "little"))
    return np.random.default_rng(np.random.SeedSequence(ints))


def permuted(n: int, seed: int, name: str, epoch: int) -> np.ndarray:
    return rng_for(seed, "source", name, epoch).permutation(n)
