"""Stage 1 config: the recipe (``sources``), extraction and sampling targets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from ..config import require
from ..extract import ExtractConfig
from ..runconfig import RunConfig
from ..sources.config import SourceConfig, check_recipe


@dataclass(frozen=True)
class SamplerConfig:
    EXEC_ONLY: ClassVar[tuple[str, ...]] = ("num_proc", "batch_size", "strict")
    # runs from before these settings keep their hash
    HASH_OMIT_DEFAULT: ClassVar[tuple[str, ...]] = ("signals", "signals_headroom")

    # The target, in one of two units. "all": as much as the sources hold at the recipe's weights (every
    # source read to the end, up to max_epochs passes, then the mix scaled to its scarcest source, as
    # `shrink` does): the natural target for a folder of your own documents.
    target_docs: int | Literal["all"] | None = None  # the seed's unit
    target_tokens: int | Literal["all"] | None = None  # the field's unit (sources weighed by tokens)
    # A source that runs out after max_epochs: "renormalize" gives its deficit to the others (the total
    # is met, the shares are not), "shrink" scales the whole mix down to it (shares met, total not),
    # "error" stops stage 1 with exit 2. Either way the stage report and the summary name the source.
    shortfall: Literal["renormalize", "shrink", "error"] = "renormalize"
    # Exit 3 (after writing the artifact and its reports) when the recipe was missed: a source outside
    # the share tolerance or the total short of the target. run_pipeline.sh --strict sets it.
    strict: bool = False
    # A source with no document after ingestion (every record rejected, every file broken, filters drop
    # all): "error" stops the stage naming the reasons; "skip" runs without it and reports it.
    empty_source: Literal["error", "skip"] = "error"
    # The signal store (mixed_raw/signals/, Parquet): "none" (default: no store); "first_drop" records the
    # signals the chain measured up to its deciding rule; "full" runs every rule on every document read (no early exit) and
    # counts the tokens of dropped documents too, so `report.py whatif` can predict a
    # new threshold's kept set and recipe fill without re-running stage 1. Kept documents are the same.
    signals: Literal["none", "first_drop", "full"] = "none"
    # With "full", how far a finite source is read past its quota for the store: null (default) to the end of
    # its first pass; a number h >= 0 stops after h x the records the quota read (in whole batches), so a
    # corpus much larger than the target is not read whole: what-ifs that need more documents than were read
    # say so (rerun stage 1). At 1B tokens of the scale corpus this read was about a third of stage 1.
    signals_headroom: float | None = None
    token_counter: str = "deepseek"  # or a path to a tokenizer.json
    min_chars: int = 1
    max_chars: int = 2_000_000
    max_reject_fraction: float = 0.5  # error budget per source, checked after 200 records
    max_shard_bytes: int = 256 << 20
    demo_tiers: tuple[str, ...] = ("portable", "debian")
    batch_size: int = 256
    num_proc: int = 2  # extraction workers (HTML extraction dominates stage time)

    def __post_init__(self) -> None:
        require((self.target_docs is None) != (self.target_tokens is None),
                "sampler: set exactly one of target_docs (documents) or target_tokens (DeepSeek tokens)")
        for key in ("target_docs", "target_tokens"):
            v = getattr(self, key)
            require(v is None or v == "all" or v > 0, f"sampler.{key}={v} must be a positive integer or 'all'")
        require(0 <= self.min_chars <= self.max_chars, "sampler: need 0 <= min_chars <= max_chars")
        require(0.0 < self.max_reject_fraction <= 1.0, "sampler.max_reject_fraction must be in (0, 1]")
        require(self.batch_size >= 1 and self.num_proc >= 1, "sampler.batch_size and sampler.num_proc must be >= 1")
        require(self.empty_source in ("error", "skip"),
                f"sampler.empty_source={self.empty_source!r}: choose 'error' (default) or 'skip'")
        if self.signals_headroom is not None:
            require(self.signals == "full",
                    f"sampler.signals_headroom={self.signals_headroom} bounds the signal store's read past the quota, "
                    "which only sampler.signals: full does; set signals: full or remove signals_headroom")
            require(isinstance(self.signals_headroom, (int, float)) and not isinstance(self.signals_headroom, bool)
                    and 0 <= self.signals_headroom < float("inf"),
                    f"sampler.signals_headroom={self.signals_headroom!r} must be a number >= 0 (0.5: read up to half "
                    "as many records again as the quota read) or null (the whole first pass)")
        bad = [t for t in self.demo_tiers if t not in ("portable", "debian")]
        require(not bad, f"sampler.demo_tiers: unknown tier(s) {bad}; use portable and/or debian")

    @property
    def unit(self) -> str:
        return "docs" if self.target_docs is not None else "tokens"

    @property
    def take_all(self) -> bool:
        return "all" in (self.target_docs, self.target_tokens)

    @property
    def target(self) -> int | None:
        """The target in ``unit``; None for "all"."""
        if self.take_all:
            return None
        return int(self.target_docs if self.target_docs is not None else self.target_tokens)  # type: ignore[arg-type]


@dataclass(frozen=True)
class DemoCorpusConfig:
    """``demo_corpus``: how far the demo corpus's downloads are trusted (demo_corpus/pins.py). A hash
    mismatch is always an error; ``strict`` also makes a Debian version drift or a package missing
    from ``expected_hashes.json`` an error (default: a warning in the manifest and the run summary)."""

    strict: bool = False


@dataclass(frozen=True)
class MixSamplerConfig:
    """Everything stage 1 reads; its hash decides whether ``mixed_raw`` is up to date."""

    # demo_corpus.strict decides whether a run may proceed, never what it produces
    EXEC_ONLY: ClassVar[tuple[str, ...]] = ("demo_corpus",)

    sources: tuple[SourceConfig, ...]
    sampler: SamplerConfig
    run: RunConfig = field(default_factory=RunConfig)
    extract: ExtractConfig = field(default_factory=ExtractConfig)
    demo_corpus: DemoCorpusConfig = field(default_factory=DemoCorpusConfig)

    def __post_init__(self) -> None:
        check_recipe(self.sources)
