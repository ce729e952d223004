"""Format-aware text extraction for stage 1: raw source text in, clean plain text out.

    from minideepseek.extract import extract_text, ExtractConfig
    text = extract_text(raw, "html", ExtractConfig(html_extractor="resiliparse"))

Every format gets the same cleanup (CRLF/CR -> LF, ANSI/VT100 escapes and their
ESC-less residues removed, C0 controls except tab/newline dropped, trailing blanks
stripped, 3+ blank lines collapsed to 2); then ``html``, ``wikitext`` and ``roff`` are
parsed into prose, while ``text``, ``code``, ``tex`` and ``markdown`` are kept otherwise
byte-for-byte (code indentation and LaTeX must survive). No NFKC here: the normalization
and hashing step owns that. An empty string means nothing was left; the caller rejects it.

HTML default, measured with ``bench/bench_html_extract.py`` on the Debian docs of the demo
corpus (same pages, one process, end to end through ``extract_text``):
BENCH_NUMBERS_PLACEHOLDER
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from minideepseek.extract._clean import clean_common, post_clean, pre_clean

FORMATS: tuple[str, ...] = ("text", "code", "html", "wikitext", "roff", "tex", "markdown")
HTML_EXTRACTORS: tuple[str, ...] = ("resiliparse", "trafilatura")


@dataclass(frozen=True)
class ExtractConfig:
    """Knobs of the extraction step; frozen so a resolved config can be hashed.

    html_extractor: main-content extractor for ``html`` (see the module docstring for
        the measurement behind the default).
    keep_math: keep math as LaTeX (``\\(..\\)`` / ``\\[..\\]``) in ``html`` and
        ``wikitext``; False drops math elements instead (plain-prose corpora).
    """

    html_extractor: str = "resiliparse"
    keep_math: bool = True

    def __post_init__(self) -> None:
        if self.html_extractor not in HTML_EXTRACTORS:
            raise ValueError(
                f"ExtractConfig.html_extractor={self.html_extractor!r} is not supported; "
                f"set it to one of {HTML_EXTRACTORS} (default 'resiliparse')"
            )
        if not isinstance(self.keep_math, bool):
            raise ValueError(
                f"ExtractConfig.keep_math must be true or false, got {self.keep_math!r}"
            )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ExtractConfig:
        """Build from a config mapping; unknown keys are errors that list the valid ones."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown extract config key(s) {unknown}; valid: {sorted(known)}")
        return cls(**dict(d))


def _html(text: str, cfg: ExtractConfig) -> str:
    from minideepseek.extract._html import extract_html  # resiliparse only when needed

    return extract_html(text, cfg)


def _wikitext(text: str, cfg: ExtractConfig) -> str:
    from minideepseek.extract._wikitext import extract_wikitext

    return extract_wikitext(text, cfg)


def _roff(text: str, cfg: ExtractConfig) -> str:
    from minideepseek.extract._roff import extract_roff

    return extract_roff(text, cfg)


_PARSERS: dict[str, Callable[[str, ExtractConfig], str]] = {
    "html": _html,
    "wikitext": _wikitext,
    "roff": _roff,
}

_DEFAULT_CFG = ExtractConfig()


def extract_text(raw: str, fmt: str, cfg: ExtractConfig = _DEFAULT_CFG) -> str:
    """Clean text of one document of format ``fmt``; ``""`` when nothing is left.

    Pure function of its arguments (no global state), so a process pool or a Ray
    executor can call it on batches.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; valid formats: {', '.join(FORMATS)}")
    if not isinstance(raw, str):
        raise TypeError(f"extract_text wants str, got {type(raw).__name__}; decode bytes first")
    # Residue heuristics (`[0m` without ESC) would touch string literals in code.
    residues = fmt != "code"
    parser = _PARSERS.get(fmt)
    if parser is None:
        return clean_common(raw, residues=residues)
    # Residues are looked for in the extracted text only: in markup, `[0m` could sit next
    # to anything (`&#27;[0m`), and the parser may join or split it.
    text = parser(pre_clean(raw, residues=False), cfg)
    # Parsers can decode entities (`&#27;`) back into controls: clean again.
    return post_clean(pre_clean(text, residues=residues))


__all__ = ["FORMATS", "HTML_EXTRACTORS", "ExtractConfig", "extract_text"]
