"""Config of stage 2's finer-grained dedup steps (seed 003 §四.6-7), run before exact + MinHash:

``dedup.urls`` (exact, normalized URL / origin), ``dedup.lines`` (boilerplate lines counted in seeded
buckets), ``dedup.paragraphs`` (repeated paragraphs after their first occurrence, Bloom filter),
``dedup.substrings`` (Lee et al. 2021 exact-substring dedup with a suffix array), and
``dedup.against`` / ``dedup.save_index`` (near dedup against an earlier run's index).

Defaults follow the field's practice as the seed sums it up: URL and exact dedup everywhere (no
controversy); line-level dedup in buckets, and paragraph dedup, on prose (code is skipped: a line
``}`` or a repeated ``return None`` block is not boilerplate); substring dedup only where it pays
(code and licence-heavy text: sources of domain ``code`` by default). Every step selects its sources
by name (``sources``, empty = by domain) and by the recipe domain (``domains`` / ``skip_domains``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from ..config import require

# A Sphinx site publishes each page's reST source beside the rendered page: <root>/_sources/<page>.rst.txt
# (older Sphinx: <page>.txt) is the same origin as <root>/<page>.html. Rules are (regex, replacement)
# applied in order to the normalized URL.
SPHINX_SOURCES_RULE = (r"/_sources/(.+?)(?:\.rst)?\.txt$", r"/\1.html")


def step_sources(step: object, recipe: dict[str, str]) -> set[str]:
    """Which sources a step applies to: the named ones if ``step.sources`` is set, else every source
    whose recipe domain is in ``step.domains`` (empty: all domains) and not in ``step.skip_domains``."""
    named: tuple[str, ...] = step.sources
    if named:
        unknown = sorted(set(named) - set(recipe))
        require(not unknown, f"dedup: step sources {unknown} are not sources of the recipe {sorted(recipe)}")
        return set(named)
    doms, skip = step.domains, step.skip_domains
    return {s for s, d in recipe.items() if (not doms or d in doms) and d not in skip}


@dataclass(frozen=True)
class UrlDedupConfig:
    enabled: bool = True
    sources: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    skip_domains: tuple[str, ...] = ()
    # the fragment names a record inside one file in the demo (fortunes#5024): keep it by default
    drop_fragment: bool = False
    # http://x/p and https://x/p are one page (the same site served over both; a crawl keeps both copies)
    same_scheme: bool = True
    origin_rules: tuple[tuple[str, str], ...] = (SPHINX_SOURCES_RULE,)
    examples: int = 10

    def __post_init__(self) -> None:
        for pat, _ in self.origin_rules:
            try:
                re.compile(pat)
            except re.error as exc:
                require(False, f"dedup.urls.origin_rules: {pat!r} is not a valid regex ({exc})")


@dataclass(frozen=True)
class LineDedupConfig:
    enabled: bool = True
    sources: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    skip_domains: tuple[str, ...] = ("code",)  # a line `}` or `return x` is not boilerplate
    # Llama 3: 30M-document buckets, k = 6 (a line in > 2e-7 of documents). The demo has ~2.5K documents:
    # 500-document buckets and k = 6 flag lines in > 1.2% of a bucket's documents; smaller buckets would
    # make k meaningless, one bucket would flag globally common short lines (see README "Stage 2")
    bucket_docs: int = 500
    max_repeats: int = 6  # a line in more than this many documents of its bucket is removed everywhere
    min_line_chars: int = 1  # normalized lines shorter than this are never counted (blank lines never are)
    code_aware: bool = True  # never count lines of code inside prose: `}`, `[0]`, `>>> ...`, fences (lines.py)
    # a document shorter than this after removal is dropped; 10, not stage 1's 20: a proverb is 10 CJK characters
    min_doc_chars: int = 10
    top_lines: int = 20

    def __post_init__(self) -> None:
        require(self.bucket_docs >= 1, "dedup.lines.bucket_docs must be >= 1 (documents per bucket)")
        require(self.max_repeats >= 1, "dedup.lines.max_repeats must be >= 1 (Llama 3: 6)")
        require(self.min_line_chars >= 1 and self.min_doc_chars >= 0, "dedup.lines.min_line_chars >= 1, min_doc_chars >= 0")


@dataclass(frozen=True)
class ParagraphDedupConfig:
    enabled: bool = True
    sources: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    skip_domains: tuple[str, ...] = ("code",)
    # dolma's paragraphs are newline-separated; shorter ones ("Examples", "Thank you.") are never removed
    min_chars: int = 40
    false_positive_rate: float = 1e-9  # of the Bloom filter (sized from the count of paragraphs)
    exact: bool = False  # an exact hash set instead (no false positives; 16 bytes per distinct paragraph)
    min_doc_chars: int = 10

    def __post_init__(self) -> None:
        require(0.0 < self.false_positive_rate < 0.1, "dedup.paragraphs.false_positive_rate must be in (0, 0.1), e.g. 1e-9")
        require(self.min_chars >= 1, "dedup.paragraphs.min_chars must be >= 1")


@dataclass(frozen=True)
class SubstringDedupConfig:
    EXEC_ONLY: ClassVar[tuple[str, ...]] = ("engine",)  # both engines find the same spans (tested)

    enabled: bool = True
    sources: tuple[str, ...] = ()
    domains: tuple[str, ...] = ("code",)  # the seed: substring dedup only for code and licence-like text
    skip_domains: tuple[str, ...] = ()
    min_tokens: int = 50  # Lee et al. 2021: spans of >= 50 tokens that occur >= 2 times
    # memory bound: the token array and its suffix array (4 + 4 bytes per token, + LCP 4) are built over
    # at most this many tokens at a time; repeats across two such chunks are not seen
    max_tokens: int = 20_000_000
    engine: str = "auto"  # "pydivsufsort" (PyPI, pinned), "numpy" (prefix doubling), "auto": the first available
    # only spans whose first occurrence is in another document: a file that repeats a 50-token block of its
    # own (overloads, similar methods) keeps it, since cutting code inside one file breaks it; licence
    # headers and quoted docstrings are repeats across documents. false: Lee et al.'s rule (any repeat).
    cross_doc_only: bool = True
    min_doc_chars: int = 10
    examples: int = 10

    def __post_init__(self) -> None:
        require(self.min_tokens >= 2, "dedup.substrings.min_tokens must be >= 2 (Lee et al.: 50)")
        require(self.max_tokens >= 1000, "dedup.substrings.max_tokens must be >= 1000")
        require(self.engine in ("auto", "pydivsufsort", "numpy"),
                f"dedup.substrings.engine={self.engine!r}: use auto, pydivsufsort or numpy")
