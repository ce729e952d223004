"""C4's rules (Raffel et al. 2020, section 2.2), as the reference code applies them.

A *modifier*: it removes lines and returns the rest, and drops whole pages for a few reasons. The
order and the per-line checks follow the code that built C4 (TFDS ``c4_utils.clean_page``, which
datatrove's ``C4QualityFilter`` mirrors), so the page-level checks ("lorem ipsum", ``{``) look at
lines that survived the per-line rules, as they did when C4 was made, not at the raw page:

per line (blank lines are layout and neither counted nor "removed"):
  1. a word longer than ``max_word_length`` (1000)        -> line removed (``too_long_word``)
  2. Wikipedia citation marks ``[1]``, ``[edit]``, ``[citation needed]`` are cut out
  3. no terminal punctuation ``. ! ? "`` (or CJK ``。！？”」』``), or ends in ``...``
     -> line removed (``no_terminal_punct``); FineWeb runs C4 with ``filter_no_terminal_punct:
     false`` because its own ``line_punct_ratio`` rule replaces this much harsher one
  4. fewer than ``min_words_per_line`` (3) words          -> line removed (``too_few_words``)
  5. contains "lorem ipsum"                                -> page dropped (``c4_lorem_ipsum``)
  6. contains "javascript"                                 -> line removed (``javascript``)
  7. contains ``{``                                        -> page dropped (``c4_curly_bracket``)
  8. contains a cookie/terms-of-use phrase                 -> line removed (``policy``)
per page, on the kept lines:
  9. fewer than ``min_num_sentences`` (5) sentences       -> page dropped (``c4_too_few_sentences``)
  10. (off by default) a word of ``bad_words_file``       -> page dropped (``c4_bad_words``)

Words are counted with the CJK-aware splitter, and punctuation-only tokens ("|", "»") are not
words, so "Home | About" has two. Sentences are counted with the rule-based splitter of
:func:`minideepseek.filters.words.sentences` (C4 used nltk's punkt, which we do not ship).

The bad-words rule is off by default: a page-level word-list match removes medical, sex-education
and LGBTQ+ pages and text in African-American and Hispanic English dialects far more often than
it removes offensive text (Dodge et al. 2021, "Documenting Large Webtext Corpora"). No list is
shipped; give one with ``bad_words_file`` (one word or phrase per line) if you turn it on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ..config import ConfigError, require
from .base import DocContext, FilterResult, register
from .words import CJK_RE, is_symbol_word, sentences, words

END_MARKS = (".", "!", "?", '"', "。", "！", "？", "”", "」", "』")
ELLIPSIS = "..."
CITATION_RE = re.compile(r"\[\d*\]|\[edit\]|\[citation needed\]", re.IGNORECASE)
POLICY_PHRASES = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")
LINE_REASONS = ("too_long_word", "no_terminal_punct", "too_few_words", "javascript", "policy")


@dataclass(frozen=True)
class C4Config:
    """C4's switches and thresholds; ``None`` disables a numeric rule."""

    filter_no_terminal_punct: bool = True  # FineWeb: false
    min_words_per_line: int | None = 3
    max_word_length: int | None = 1000
    min_num_sentences: int | None = 5
    remove_citations: bool = True
    filter_lorem_ipsum: bool = True
    filter_javascript: bool = True
    filter_curly_bracket: bool = True
    filter_policy: bool = True
    filter_bad_words: bool = False  # biased, see the module docstring
    bad_words_file: str | None = None

    def __post_init__(self) -> None:
        for f in ("min_words_per_line", "max_word_length", "min_num_sentences"):
            v = getattr(self, f)
            require(v is None or v >= 1, f"c4.{f} = {v!r} must be >= 1, or null to disable the rule")
        require(
            not self.filter_bad_words or bool(self.bad_words_file),
            "c4.filter_bad_words: true needs c4.bad_words_file: PATH (a text file, one word per line); "
            "set it, or set filter_bad_words: false",
        )


def load_bad_words(path: str) -> re.Pattern[str]:
    """One regex for the list: whole-word match for spaced scripts, substring match for words
    that contain CJK characters (no spaces to anchor on), as C4's multilingual code does."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"c4.bad_words_file = {path!r} not found; give an existing file, one word per line")
    items = {w.strip().lower() for w in p.read_text(encoding="utf-8").splitlines()}
    items.discard("")
    require(bool(items), f"c4.bad_words_file = {path!r} lists no words; put one word per line in it")
    spaced = sorted(re.escape(w) for w in items if not CJK_RE.search(w))
    cjk = sorted(re.escape(w) for w in items if CJK_RE.search(w))
    parts = ([rf"(?:(?<=\W)|^)(?:{'|'.join(spaced)})(?=\W|$)"] if spaced else []) + (["|".join(cjk)] if cjk else [])
    return re.compile("|".join(f"(?:{p})" for p in parts))


@register
class C4:
    """C4 line and page rules; returns the kept lines joined by newlines."""

    name: ClassVar[str] = "c4"
    Config: ClassVar[type] = C4Config

    def __init__(self, cfg: C4Config) -> None:
        self.cfg = cfg
        self._bad = load_bad_words(cfg.bad_words_file) if cfg.filter_bad_words and cfg.bad_words_file else None

    def __call__(self, text: str, ctx: DocContext) -> FilterResult:
        removed = dict.fromkeys(LINE_REASONS, 0)
        kept: list[str] = []
        n_in = n_sent = 0
        page_reason = ""
        for raw in text.split("\n"):
            line = raw.strip()
            if not line:
                continue
            n_in += 1
            line, why = self._check_line(line)
            if why.startswith("c4_"):
                page_reason = why
                break
            if why:
                removed[why] += 1
                continue
            kept.append(line)
            n_sent += len(sentences(line))
        out = "\n".join(kept)
        if not page_reason:
            page_reason = self._check_page(out, n_sent)
        signals = {"c4_lines_in": n_in, "c4_lines_kept": len(kept), "c4_sentences": n_sent}
        counts = {"lines_removed": sum(removed.values())} | {f"lines_removed_{k}": v for k, v in removed.items()}
        if page_reason:
            return FilterResult(keep=False, reason=page_reason, signals=signals, counts=counts)
        return FilterResult(keep=True, signals=signals, text=out, counts=counts)

    def _check_line(self, line: str) -> tuple[str, str]:
        """(line after citation removal, why it goes): "" keeps it, ``c4_*`` drops the page."""
        c = self.cfg
        ws = words(line)
        if c.max_word_length is not None and max(map(len, ws), default=0) > c.max_word_length:
            return line, "too_long_word"
        if c.remove_citations:
            cut = CITATION_RE.sub("", line).strip()
            if cut != line:
                line, ws = cut, words(cut)
        if c.filter_no_terminal_punct and (not line.endswith(END_MARKS) or line.endswith(ELLIPSIS)):
            return line, "no_terminal_punct"
        if c.min_words_per_line is not None and len(ws) - sum(map(is_symbol_word, ws)) < c.min_words_per_line:
            return line, "too_few_words"
        lower = line.lower()
        if c.filter_lorem_ipsum and "lorem ipsum" in lower:
            return line, "c4_lorem_ipsum"
        if c.filter_javascript and "javascript" in lower:
            return line, "javascript"
        if c.filter_curly_bracket and "{" in line:
            return line, "c4_curly_bracket"
        if c.filter_policy and any(p in lower for p in POLICY_PHRASES):
            return line, "policy"
        return line, ""

    def _check_page(self, kept_text: str, n_sent: int) -> str:
        c = self.cfg
        if c.min_num_sentences is not None and n_sent < c.min_num_sentences:
            return "c4_too_few_sentences"
        if self._bad is not None and self._bad.search(kept_text.lower()):
            return "c4_bad_words"
        return ""
