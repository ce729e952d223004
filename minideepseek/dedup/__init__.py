"""Near-duplicate engine for the cross-source dedup stage: shingles -> MinHash signatures -> LSH
candidate pairs, vectorized with numpy and bit-compatible with datasketch 2.0.

- :mod:`.shingles`: normalization, char/word shingles, 32-bit base hashes ("sha1" = datasketch's
  default hashfunc; "mix64" = vectorized, equal to datasketch given ``datasketch_hashfunc``).
- :mod:`.minhash`: datasketch's affine32 permutations over a batch; ``signatures_for_texts`` is the
  pure batch function for a process pool; Jaccard helpers.
- :mod:`.lsh`: (b, r) for recall at the threshold (default) or datasketch's optimum, uint64 band
  keys, candidate pairs by sorting per band.

Throughput and memory: ``python bench/bench_minhash.py``.
"""

from .lsh import (
    DEFAULT_MAX_CLIQUE,
    band_keys,
    band_pair_codes,
    banding_summary,
    candidate_pairs,
    lsh_params,
    merge_pair_codes,
    recall_params,
    s_curve,
)
from .minhash import (
    MAX_HASH,
    estimated_jaccard,
    exact_jaccard,
    fmix32,
    permutations,
    signatures,
    signatures_for_texts,
)
from .shingles import (
    BASE_HASHES,
    DEFAULT_BASE_HASH,
    KINDS,
    BaseHash,
    ShingleKind,
    batch_shingle_hashes,
    datasketch_hashfunc,
    mix64_hash32,
    normalize_text,
    shingle_hashes,
    shingles,
    words,
)

__all__ = [
    "BASE_HASHES",
    "DEFAULT_BASE_HASH",
    "DEFAULT_MAX_CLIQUE",
    "KINDS",
    "MAX_HASH",
    "BaseHash",
    "ShingleKind",
    "band_keys",
    "band_pair_codes",
    "banding_summary",
    "batch_shingle_hashes",
    "candidate_pairs",
    "datasketch_hashfunc",
    "estimated_jaccard",
    "exact_jaccard",
    "fmix32",
    "lsh_params",
    "merge_pair_codes",
    "mix64_hash32",
    "normalize_text",
    "permutations",
    "recall_params",
    "s_curve",
    "shingle_hashes",
    "shingles",
    "signatures",
    "signatures_for_texts",
    "words",
]
