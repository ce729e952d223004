"""Seeded random generators: every random choice of the pipeline draws from one of these.

A generator is named by (seed, keys...), hashed with sha256, so it does not depend on Python's hash
randomization or on the order in which other generators were created: the same config and seed give
the same samples, shuffles and splits in every process, on every machine.
"""

from __future__ import annotations

import hashlib

import numpy as np


def rng_for(seed: int, *keys: str | int) -> np.random.Generator:
    """A generator seeded by (seed, keys...) that does not depend on Python's hash randomization."""
    ints = [seed]
    for k in keys:
        ints.append(int.from_bytes(hashlib.sha256(str(k).encode()).digest()[:8], "little"))
    return np.random.default_rng(np.random.SeedSequence(ints))


def permuted(n: int, seed: int, name: str, epoch: int) -> np.ndarray:
    """A source's record order in one epoch."""
    return rng_for(seed, "source", name, epoch).permutation(n)
