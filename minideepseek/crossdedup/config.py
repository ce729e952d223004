"""Stage 2 config: exact + MinHash-LSH near dedup across sources, and decontamination."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from ..config import require
from ..runconfig import RunConfig
from .decontam import DecontamConfig
from .granular_config import LineDedupConfig, ParagraphDedupConfig, SubstringDedupConfig, UrlDedupConfig


@dataclass(frozen=True)
class DedupConfig:
    EXEC_ONLY: ClassVar[tuple[str, ...]] = ("num_proc", "batch_size")

    exact: bool = True
    near: bool = True
    shingle: Literal["char", "word"] = "char"  # char 5-grams: the seed (and right for Chinese); word: FineWeb
    ngram: int = 5
    num_perm: int = 128
    threshold: float = 0.8  # verified Jaccard a near duplicate must reach; also picks bands x rows
    # banding when bands/rows are not given: "recall" = P(candidate | J = threshold) >= min_recall with
    # the fewest candidates below it (16 x 6 for 0.8/128); "datasketch" = MinHashLSH's optimum (9 x 13)
    banding: Literal["recall", "datasketch"] = "recall"
    min_recall: float = 0.99
    bands: int | None = None  # explicit banding, e.g. 14 x 8 (FineWeb): bands * rows <= num_perm
    rows: int | None = None
    # "greedy": visit documents in keep order, keep each unless it has a verified edge to a kept one
    # (every removal has a kept partner >= threshold); "transitive": union-find clusters, one kept each
    cluster: Literal["greedy", "transitive"] = "greedy"
    residual_sample: int = 2000  # kept pairs from looser-banding buckets checked for missed near dups
    seed: int = 1  # permutation seed; datasketch's default, so sketches compare with the seed's code
    # "mix64": a vectorized base hash, ~5x faster, identical to datasketch given
    # minideepseek.dedup.datasketch_hashfunc("mix64"); "sha1": signatures identical to the seed's
    # datasketch MinHash(). With exact verification the hash only changes which pairs are candidates.
    base_hash: Literal["sha1", "mix64"] = "mix64"
    verify: Literal["exact", "estimated"] = "exact"  # candidate pairs must reach `threshold` Jaccard
    # candidates whose signature estimate is below threshold - margin are rejected without reading
    # their texts: 0.15 is > 4 standard errors of a 128-permutation estimate near 0.8 (a pair at
    # J >= 0.8 is lost this way with probability ~1e-5); the recall banding's extra candidates at
    # J 0.3-0.6 then cost a vector compare, not an exact Jaccard. 1.0 verifies every candidate.
    prefilter_margin: float = 0.15
    source_priority: tuple[str, ...] = ()  # keep policy, first wins; default: the recipe's source order
    max_cluster_size: int = 1000  # guard: clusters larger than this are named in the report
    giant_cluster: Literal["warn", "error"] = "warn"
    sample_pairs: int = 20
    scurve_docs: int = 150  # real documents edited at several Jaccard levels to measure the S-curve
    num_proc: int = 2
    batch_size: int = 256
    # the finer granularities (granular.py): URL/origin, boilerplate lines, paragraphs, exact substrings
    urls: UrlDedupConfig = field(default_factory=UrlDedupConfig)
    lines: LineDedupConfig = field(default_factory=LineDedupConfig)
    paragraphs: ParagraphDedupConfig = field(default_factory=ParagraphDedupConfig)
    substrings: SubstringDedupConfig = field(default_factory=SubstringDedupConfig)
    against: tuple[str, ...] = ()  # earlier runs (run dir, mixed_dedup dir or index dir) to dedup against
    save_index: bool = True  # mixed_dedup/dedup_index: band keys, signatures, exact hashes of the kept docs

    def __post_init__(self) -> None:
        require(self.ngram >= 1, f"dedup.ngram={self.ngram} must be >= 1 (5 is the field default)")
        require(self.num_perm >= 16, f"dedup.num_perm={self.num_perm}: use at least 16 (128 default)")
        require(0.0 < self.threshold < 1.0, f"dedup.threshold={self.threshold} must be in (0, 1)")
        require(0.0 < self.min_recall < 1.0, f"dedup.min_recall={self.min_recall} must be in (0, 1), e.g. 0.99")
        require(0.0 <= self.prefilter_margin <= 1.0, f"dedup.prefilter_margin={self.prefilter_margin} must be "
                f"in [0, 1] (1.0 verifies every candidate exactly)")
        require(self.residual_sample >= 0, "dedup.residual_sample must be >= 0 (0 turns the sample check off)")
        require((self.bands is None) == (self.rows is None), "dedup: set both bands and rows, or neither")
        if self.bands is not None and self.rows is not None:
            require(self.bands >= 1 and self.rows >= 1, "dedup.bands and dedup.rows must be >= 1")
            require(self.bands * self.rows <= self.num_perm,
                    f"dedup: bands*rows = {self.bands * self.rows} > num_perm = {self.num_perm}; "
                    f"raise num_perm or lower bands/rows")
        require(self.max_cluster_size >= 2, "dedup.max_cluster_size must be >= 2")
        require(self.num_proc >= 1 and self.batch_size >= 1, "dedup.num_proc and dedup.batch_size must be >= 1")


@dataclass(frozen=True)
class DedupStageConfig:
    run: RunConfig = field(default_factory=RunConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)
    decontam: DecontamConfig = field(default_factory=DecontamConfig)
