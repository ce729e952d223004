"""Shared text units for the rule-based filters: CJK-aware words, lines, paragraphs, sentences.

The published rules (Gopher, C4, FineWeb) count *words*, and their reference code splits on
whitespace or with an English tokenizer. Chinese and Japanese put no spaces between words, so a
whitespace split turns a whole Chinese paragraph into one "word" of 200 characters and every
word-based rule misfires. :func:`words` therefore counts each CJK ideograph, kana or hangul
syllable as one word (a character is the smallest unit that carries meaning, and what the
repetition rules need for n-grams), and splits everything else on whitespace. Punctuation stays
attached to a Latin word (``"word,"``), as in a whitespace split; punctuation between CJK
characters (``，。「」``) becomes its own token, which :func:`is_symbol_word` lets rules ignore.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# Ideographs (CJK Unified + extensions A-F + compatibility), the ideographic iteration/zero marks
# 々〆〇, hiragana, katakana (full- and half-width), hangul syllables and jamo.
_CJK_CLASS = (
    "\u3005-\u3007"
    "\u3040-\u30ff"
    "\u31f0-\u31ff"
    "\u3400-\u4dbf"
    "\u4e00-\u9fff"
    "\uf900-\ufaff"
    "\uff66-\uff9f"
    "\u1100-\u11ff"
    "\u3130-\u318f"
    "\uac00-\ud7af"
    "\U00020000-\U0003134f"
)
CJK_RE = re.compile(f"[{_CJK_CLASS}]")
_WORD_RE = re.compile(f"[{_CJK_CLASS}]|[^\\s{_CJK_CLASS}]+")
_EDGE_PUNCT_RE = re.compile(r"^[\W_]+|[\W_]+$")

#: A document is "mostly CJK" above this share of CJK characters among its non-space characters.
MOSTLY_CJK = 0.5


def words(text: str) -> list[str]:
    """Split ``text`` into words: one per CJK character, whitespace-separated runs otherwise.

    >>> words("GPT-4 模型, ok")
    ['GPT-4', '模', '型', ',', 'ok']
    """
    return _WORD_RE.findall(text)


def cjk_ratio(text: str) -> float:
    """Share of the non-space characters of ``text`` that are CJK (0.0 for empty text).

    Counted without a list of one-character matches (this runs on every document of two filters):
    ``str.split()`` and the regex ``\\s`` use the same whitespace test (``str.isspace``), and the
    CJK characters are what removing them takes off the length."""
    non_space = sum(map(len, text.split()))
    return (len(text) - len(CJK_RE.sub("", text))) / non_space if non_space else 0.0


def is_mostly_cjk(text: str) -> bool:
    """True when more than half of the non-space characters are CJK (see :data:`MOSTLY_CJK`)."""
    return cjk_ratio(text) > MOSTLY_CJK


@lru_cache(maxsize=1 << 16)  # called per word by the Gopher/C4 rules: ~2M times on the demo
def is_symbol_word(word: str) -> bool:
    """True for a token made only of punctuation and symbols (``|``, ``--``, ``，``, ``»``)."""
    return all(unicodedata.category(ch)[0] in "PS" for ch in word)


def strip_punct(word: str) -> str:
    """``word`` without leading/trailing punctuation, so ``"(the,"`` measures as ``the``."""
    if word[:1].isalnum() and word[-1:].isalnum():  # regex \w is isalnum() or "_": nothing to strip
        return word
    return _EDGE_PUNCT_RE.sub("", word)


def nonblank_lines(text: str) -> list[str]:
    """The lines of ``text``, stripped, blank ones left out.

    Blank lines are layout, not content: counting them would make a rule such as "share of lines
    that end with punctuation" depend on how many empty lines separate the paragraphs."""
    return [s for s in (line.strip() for line in text.split("\n")) if s]


_PARA_SPLIT_RE = re.compile(r"\n[ \t\r\f\v]*\n\s*")


def paragraphs(text: str) -> list[str]:
    """Paragraphs: blocks separated by one or more blank (or whitespace-only) lines."""
    return [p.strip() for p in _PARA_SPLIT_RE.split(text.strip()) if p.strip()]


# Sentence splitting (no nltk): a sentence ends at a run of . ! ? (plus closing quotes/brackets)
# followed by whitespace or the end of the line, or at a CJK full stop 。！？ wherever it is (CJK
# text has no space after it). "Dr. Smith" or "e.g. this" would split after the abbreviation, so
# a segment that ends in one of a few common abbreviations or a single capital initial ("J. R. R.")
# is joined with the next. Unknown abbreviations over-count, which only makes C4's "at least five
# sentences" rule slightly more lenient than nltk's punkt.
_SENT_END_RE = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s|$)|[。！？]+[”’」』）]*")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e cf fig no vol ca approx dept inc ltd co jan feb "
    "mar apr jun jul aug sep sept oct nov dec".split()
)
_HAS_WORD_RE = re.compile(r"\w")


def sentences(text: str) -> list[str]:
    """Split ``text`` into sentences with the rule-based splitter described above."""
    out: list[str] = []
    pending = ""
    start = 0
    for m in _SENT_END_RE.finditer(text):
        piece = pending + text[start : m.end()]
        start = m.end()
        if m.group().startswith(".") and _ends_in_abbreviation(piece[: -len(m.group())]):
            pending = piece
            continue
        pending = ""
        if _HAS_WORD_RE.search(piece):
            out.append(piece.strip())
    tail = pending + text[start:]
    if _HAS_WORD_RE.search(tail):
        out.append(tail.strip())
    return out


def _ends_in_abbreviation(segment: str) -> bool:
    last = segment.rsplit(None, 1)[-1] if segment.strip() else ""
    last = last.lstrip("(\"'“‘[").lower()
    return last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())
