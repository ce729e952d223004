"""Format-aware text extraction for stage 1: raw source text in, clean plain text out.

    from minideepseek.extract import extract_text, ExtractConfig
    text = extract_text(raw, "html", ExtractConfig(html_extractor="resiliparse"))

Every format gets the same cleanup (CRLF/CR -> LF, ANSI/VT100 escapes and their
ESC-less residues removed, C0 controls except tab/newline dropped, trailing blanks
stripped, 3+ blank lines collapsed to 2); then ``html``, ``wikitext`` and ``roff`` are
parsed into prose, while ``text``, ``code``, ``tex`` and ``markdown`` are kept otherwise
byte-for-byte (code indentation and LaTeX must survive). No NFKC here: the normalization
and hashing step owns that. An empty string means nothing was left; the caller rejects it.

Why resiliparse is the HTML default -- ``bench/bench_html_extract.py``, run on the Debian
doc pages of the demo corpus: python3.11-doc, python-scipy-doc, libreoffice-help-zh-cn
(400 pages each, seed 0) and all 309 of python-sympy-doc; 1,509 pages, 93.1 MB; both
extractors on the same pages, interleaved, one process, end to end through ``extract_text``:

    extractor    pages/s  MB/s   math kept            <pre> lines kept  pages w/ nav boilerplate
    resiliparse  192.7    11.89  7,307/7,392 (98.9%)  99.3%             0.9%
    trafilatura   17.4     1.07  7,299/7,392 (98.7%)  49.9%             31.1%

resiliparse is 11.1x faster (8.5x on sympy's math-heavy pages, 13.8x on python3.11-doc).
trafilatura flattens ``<pre>`` inside ``<dd>`` (API reference pages: 4.0% of scipy's code
lines kept, 36.4% of sympy's), keeps the "LibreOffice 7.4 帮助" header on 359 of 400 help
pages and Sphinx's "next | previous" bar on 72 of 400 scipy pages. Output size is similar
(12.3M vs 12.9M chars). Math survives equally because of our DOM pre-processing: without
it both keep 4.3% (sympy's LaTeX lives in ``<img alt>``: 2 of 7,077). On scipy's 672 pages
with ``class="math"``: 4,580/4,586 (99.9%) vs 4,570/4,586 (99.7%), 354.7 vs 41.6 pages/s.
trafilatura also needs ``lxml_html_clean`` with lxml >= 5.2 (justext imports it).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from minideepseek.extract._clean import clean_common, post_clean, pre_clean

FORMATS: tuple[str, ...] = ("text", "code", "html", "wikitext", "roff", "tex", "markdown")
HTML_EXTRACTORS: tuple[str, ...] = ("resiliparse", "trafilatura")


def _trafilatura_problem() -> str | None:
    """Why trafilatura cannot be imported, found cheaply (its own import takes ~1 s)."""
    if importlib.util.find_spec("trafilatura") is None:
        return "trafilatura is not installed"
    try:
        import lxml.html.clean  # noqa: F401  (justext needs it; lxml>=5.2 moved it out)
    except ImportError as exc:
        return str(exc).split("\n")[0]
    return None


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
        if self.html_extractor == "trafilatura" and (problem := _trafilatura_problem()):
            raise ValueError(
                f"ExtractConfig.html_extractor='trafilatura' is unusable here ({problem}); "
                "`pip install trafilatura lxml_html_clean`, or use html_extractor='resiliparse'"
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
