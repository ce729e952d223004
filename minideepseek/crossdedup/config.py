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
class CanaryConfig:
    """Seeded canaries (certificate.py): variants of the run's own documents and of the benchmarks, probed
    against every step's index after the stage's own pass, never written: ``mixed_dedup`` is
    byte-identical with and without them, so this section is not part of the stage's config hash."""

    enabled: bool = False  # the demo turns it on with `canaries: {enabled: true}` (docs/stages.md)
    seed: int = 0  # mixed with run.seed: a different seed draws other documents and other edits
    fail: Literal["error", "warn"] = "error"  # error: a failed certificate stops the pipeline (exit 3)
    near_docs: int = 12  # originals of near-duplicate variants; each gives one variant per Jaccard bin
    # exact-Jaccard bins of the variants, as offsets from dedup.threshold: >= 0 must be caught, < 0 must survive
    near_bins: tuple[float, ...] = (0.005, 0.02, 0.05, 0.1, 0.15, -0.03, -0.1)
    exact_docs: int = 12  # each gives a verbatim copy and a whitespace/case-only copy
    url_docs: int = 12  # each gives URL variants the normalizer must fold (tracking query, www., case, /)
    paragraph_docs: int = 12  # a paragraph of one document repeated, re-cased, inside another
    line_sets: int = 3  # boilerplate lines planted in max_repeats+1 documents of a bucket (and in max_repeats)
    substring_docs: int = 8  # code spans of min_tokens+10 tokens quoted in another document (and of min_tokens-10)
    benchmark_items: int = 8  # items per benchmark, each embedded with every perturbation
    withdrawal_docs: int = 12  # deletion-request probes: by id, hash, URL and a re-cased text fragment
    min_near_recall: float = 0.95  # near-dup recall at J >= threshold
    min_decontam_recall: float = 0.95
    min_recall: float = 0.95  # exact, url, lines, paragraphs, substrings
    max_false_removals: int = 0  # of the controls (below the threshold) any step may remove

    def __post_init__(self) -> None:
        for name in ("near_docs", "exact_docs", "url_docs", "paragraph_docs", "line_sets", "substring_docs",
                     "benchmark_items", "withdrawal_docs", "max_false_removals"):
            require(getattr(self, name) >= 0, f"canaries.{name} must be >= 0")
        for name in ("min_near_recall", "min_decontam_recall", "min_recall"):
            require(0.0 <= getattr(self, name) <= 1.0, f"canaries.{name} must be in [0, 1], e.g. 0.95")
        require(all(-1.0 < b < 1.0 for b in self.near_bins), "canaries.near_bins are offsets from dedup.threshold "
                "in (-1, 1), e.g. [0.02, 0.1, -0.05]")


@dataclass(frozen=True)
class DedupStageConfig:
    # canaries change the reports, never the artifact (mixed_dedup is byte-identical): out of the config hash
    EXEC_ONLY: ClassVar[tuple[str, ...]] = ("canaries",)

    run: RunConfig = field(default_factory=RunConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)
    decontam: DecontamConfig = field(default_factory=DecontamConfig)
    canaries: CanaryConfig = field(default_factory=CanaryConfig)
