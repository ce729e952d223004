"""Gopher's document rules (Rae et al. 2021, "Scaling Language Models", appendix A.1.1, table A1).

Two filters, as in datatrove (``GopherQualityFilter``, ``GopherRepetitionFilter``), whose defaults
are the published thresholds:

* ``gopher_quality``: length, mean word length, ``#``/ellipsis per word, bullet and ellipsis
  lines, share of words with a letter, English stop words. The mean-word-length and stop-word
  rules measure English; for mostly-CJK text they are skipped (``skip_for_cjk``), see
  :mod:`minideepseek.filters.text_rules`.
* ``gopher_repetition``: duplicated lines/paragraphs (count and characters), the character share
  of the most frequent 2/3/4-gram and of all duplicated 5..10-grams. Language-independent with
  the CJK-aware :func:`~minideepseek.filters.words.words` (an n-gram of Chinese characters is a
  phrase).

Every filter measures everything first and then applies the rules in datatrove's order, so the
signals are complete even for a dropped document and the reason names the first rule that failed.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..config import ConfigError, require
from .base import DocContext, FilterResult, register
from .words import CJK_RE, MOSTLY_CJK, cjk_ratio, is_symbol_word, nonblank_lines, paragraphs, strip_punct, words

STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")
BULLETS = ("•", "-", "*", "‣", "◦", "·")  # datatrove checks "•" and "-"; "*" and "·" are the
# Markdown and Chinese-list equivalents.
ELLIPSES = ("...", "…")
_HAS_LETTER_RE = re.compile(r"[^\W\d_]")  # str.isalpha() for any character of the word


# (text, its words) of the last document measured: gopher_quality and gopher_repetition run one after the
# other on the same text object (a web chain's order), and splitting it is a tenth of their time. One
# tuple, replaced whole, so a thread never pairs one text with another's words; the list is not modified.
_last_words: tuple[str | None, list[str]] = (None, [])


def _doc_words(text: str) -> list[str]:
    global _last_words  # noqa: PLW0603 - a one-entry cache, per process
    last = _last_words
    if last[0] is text:
        return last[1]
    ws = words(text)
    _last_words = (text, ws)
    return ws


def _r(x: float) -> float:
    """Signals are stored rounded; rules compare the unrounded value."""
    return round(x, 4)


def _ratio(field: str, value: float | None, name: str) -> None:
    require(
        value is None or 0.0 <= value <= 1.0,
        f"{name}.{field} = {value!r} must be a fraction between 0 and 1, or null to disable the rule",
    )


# --------------------------------------------------------------------------------------------
# gopher_quality


@dataclass(frozen=True)
class GopherQualityConfig:
    """Thresholds of the Gopher quality rules; ``None`` disables a rule."""

    min_doc_words: int | None = 50
    max_doc_words: int | None = 100_000
    min_avg_word_length: float | None = 3
    max_avg_word_length: float | None = 10
    max_symbol_word_ratio: float | None = 0.1  # '#' per word, and '...'/'…' per word
    max_bullet_lines_ratio: float | None = 0.9
    max_ellipsis_lines_ratio: float | None = 0.3
    # datatrove's name, kept for familiarity; it is the MINIMUM share of words that contain at
    # least one alphabetic character (Gopher: "80% of words in a document contain at least one").
    max_non_alpha_words_ratio: float | None = 0.8
    min_stop_words: int | None = 2  # distinct stop words that must appear
    stop_words: tuple[str, ...] = STOP_WORDS
    skip_for_cjk: bool = True  # skip the two English-only rules when the text is mostly CJK

    def __post_init__(self) -> None:
        name = "gopher_quality"
        for f in ("min_doc_words", "max_doc_words", "min_stop_words"):
            v = getattr(self, f)
            require(v is None or v >= 0, f"{name}.{f} = {v!r} must be >= 0, or null to disable the rule")
        for f in ("min_avg_word_length", "max_avg_word_length"):
            v = getattr(self, f)
            require(v is None or v > 0, f"{name}.{f} = {v!r} must be > 0, or null to disable the rule")
        for lo, hi in (("min_doc_words", "max_doc_words"), ("min_avg_word_length", "max_avg_word_length")):
            a, b = getattr(self, lo), getattr(self, hi)
            require(a is None or b is None or a <= b, f"{name}.{lo} = {a} is above {name}.{hi} = {b}; swap them")
        for f in ("max_symbol_word_ratio", "max_bullet_lines_ratio", "max_ellipsis_lines_ratio",
                  "max_non_alpha_words_ratio"):
            _ratio(f, getattr(self, f), name)
        object.__setattr__(self, "stop_words", tuple(w.lower() for w in self.stop_words))
        require(
            self.min_stop_words is None or self.min_stop_words <= len(set(self.stop_words)),
            f"{name}.min_stop_words = {self.min_stop_words} exceeds the {len(set(self.stop_words))} distinct "
            f"stop_words; lower it or list more stop_words",
        )


@register
class GopherQuality:
    """Gopher quality rules: drops pages that are too short/long, not prose, or not English-like."""

    name: ClassVar[str] = "gopher_quality"
    Config: ClassVar[type] = GopherQualityConfig

    def __init__(self, cfg: GopherQualityConfig) -> None:
        self.cfg = cfg
        self._stop = frozenset(cfg.stop_words)

    def __call__(self, text: str, ctx: DocContext) -> FilterResult:
        s = self.measure(text)
        reason = self._judge(s)
        return FilterResult(keep=not reason, reason=reason,
                            signals={k: _r(v) if isinstance(v, float) else v for k, v in s.items()})

    def measure(self, text: str) -> dict[str, float | int | bool]:
        """All values the rules look at (unrounded), keyed by their signal names."""
        ws = _doc_words(text)
        n = max(len(ws), 1)
        n_content = n_alpha = len_sum = len_n = 0
        present: set[str] = set()
        for w, k in Counter(ws).items():  # each distinct word is inspected once (Zipf: ~4x fewer)
            n_alpha += k * bool(_HAS_LETTER_RE.search(w))
            if is_symbol_word(w):  # datatrove's "non-symbol words" are the content words
                continue
            n_content += k
            bare = strip_punct(w)
            if bare.lower() in self._stop:
                present.add(bare.lower())
            # Mean word length is a property of space-separated words; a CJK character is one
            # "word" of length 1 and would drag a mixed zh/en page under 3 (measured: 67 of 127
            # Debian handbook zh chapters, none when CJK characters are left out of the mean).
            if not CJK_RE.match(w):
                len_sum += k * (len(bare) or len(w))
                len_n += k
        lines = nonblank_lines(text)
        n_lines = max(len(lines), 1)
        return {
            "gopher_words": n_content,
            "gopher_avg_word_length": len_sum / len_n if len_n else 0.0,
            "gopher_hash_word_ratio": text.count("#") / n,
            "gopher_ellipsis_word_ratio": sum(text.count(e) for e in ELLIPSES) / n,
            "gopher_bullet_lines_ratio": sum(line.startswith(BULLETS) for line in lines) / n_lines,
            "gopher_ellipsis_lines_ratio": sum(line.endswith(ELLIPSES) for line in lines) / n_lines,
            "gopher_alpha_words_ratio": n_alpha / n,
            "gopher_stop_words": len(present),
            "gopher_cjk_ratio": (cjk := cjk_ratio(text)),
            "gopher_cjk_skipped": self.cfg.skip_for_cjk and cjk > MOSTLY_CJK,
        }

    def _judge(self, s: dict[str, float | int | bool]) -> str:
        c = self.cfg
        english = not s["gopher_cjk_skipped"]
        checks = (
            (c.min_doc_words is not None and s["gopher_words"] < c.min_doc_words, "gopher_short_doc"),
            (c.max_doc_words is not None and s["gopher_words"] > c.max_doc_words, "gopher_long_doc"),
            (english and c.min_avg_word_length is not None
             and s["gopher_avg_word_length"] < c.min_avg_word_length, "gopher_below_avg_word_length"),
            (english and c.max_avg_word_length is not None
             and s["gopher_avg_word_length"] > c.max_avg_word_length, "gopher_above_avg_word_length"),
            (c.max_symbol_word_ratio is not None
             and max(s["gopher_hash_word_ratio"], s["gopher_ellipsis_word_ratio"]) > c.max_symbol_word_ratio,
             "gopher_symbol_word_ratio"),
            (c.max_bullet_lines_ratio is not None
             and s["gopher_bullet_lines_ratio"] > c.max_bullet_lines_ratio, "gopher_bullet_lines"),
            (c.max_ellipsis_lines_ratio is not None
             and s["gopher_ellipsis_lines_ratio"] > c.max_ellipsis_lines_ratio, "gopher_ellipsis_lines"),
            (c.max_non_alpha_words_ratio is not None
             and s["gopher_alpha_words_ratio"] < c.max_non_alpha_words_ratio, "gopher_non_alpha_words"),
            (english and c.min_stop_words is not None
             and s["gopher_stop_words"] < c.min_stop_words, "gopher_stop_words"),
        )
        return next((reason for failed, reason in checks if failed), "")


# --------------------------------------------------------------------------------------------
# gopher_repetition

NGramThresholds = tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class GopherRepetitionConfig:
    """Thresholds of the Gopher repetition rules (table A1); ``None`` / ``[]`` disables a rule.

    ``top_n_grams`` and ``dup_n_grams`` are lists of ``[n, max_char_fraction]`` pairs in YAML."""

    dup_line_frac: float | None = 0.3
    dup_para_frac: float | None = 0.3
    dup_line_char_frac: float | None = 0.2
    dup_para_char_frac: float | None = 0.2
    top_n_grams: NGramThresholds | None = ((2, 0.2), (3, 0.18), (4, 0.16))
    dup_n_grams: NGramThresholds | None = ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))
    # "all": every occurrence of a repeated n-gram counts (Gopher paper, Dolma, RedPajama-v2);
    # "repeats": only the second and later ones (datatrove). Measured on the 497 Python-docs HTML
    # pages: 190 over the 5-gram threshold with "all", 39 with "repeats".
    dup_ngram_count: str = "all"

    def __post_init__(self) -> None:
        name = "gopher_repetition"
        if self.dup_ngram_count not in ("all", "repeats"):
            raise ConfigError(f"{name}.dup_ngram_count={self.dup_ngram_count!r}: choose 'all' (Gopher paper) "
                              f"or 'repeats' (datatrove)")
        for f in ("dup_line_frac", "dup_para_frac", "dup_line_char_frac", "dup_para_char_frac"):
            _ratio(f, getattr(self, f), name)
        for f in ("top_n_grams", "dup_n_grams"):
            object.__setattr__(self, f, _ngram_thresholds(getattr(self, f), f"{name}.{f}"))


def _ngram_thresholds(value: object, where: str) -> NGramThresholds:
    """Validate and normalise ``[[n, threshold], ...]`` (lists from YAML) to a tuple of tuples."""
    if value is None:
        return ()
    example = f"e.g. {where.split('.')[-1]}: [[5, 0.15], [6, 0.14]], or [] to disable"
    require(isinstance(value, (list, tuple)), f"{where} = {value!r} must be a list of [n, threshold] pairs; {example}")
    out = []
    for item in value:  # type: ignore[union-attr]
        ok = isinstance(item, (list, tuple)) and len(item) == 2
        n, thr = item if ok else (None, None)
        ok = ok and isinstance(n, int) and not isinstance(n, bool) and n >= 1
        ok = ok and isinstance(thr, (int, float)) and not isinstance(thr, bool) and 0 < thr <= 1
        require(ok, f"{where}: item {item!r} must be [n, threshold] with integer n >= 1 and 0 < threshold <= 1; "
                    f"{example}")
        out.append((int(n), float(thr)))  # type: ignore[arg-type]
    ns = [n for n, _ in out]
    require(len(ns) == len(set(ns)), f"{where} lists n = {sorted(n for n in ns if ns.count(n) > 1)} twice; keep one")
    return tuple(out)


def _duplicates(items: list[str]) -> tuple[int, int]:
    """(items equal to an earlier item, their characters): the first occurrence is not a duplicate."""
    seen: set[str] = set()
    n_dup = chars = 0
    for it in items:
        if it in seen:
            n_dup += 1
            chars += len(it)
        else:
            seen.add(it)
    return n_dup, chars


def word_ids(ws: list[str]) -> tuple[np.ndarray, list[str]]:
    """Each word's dense id and the distinct words in id (first-seen) order: equal words, equal ids."""
    index: dict[str, int] = dict.fromkeys(ws)  # type: ignore[arg-type]
    for i, w in enumerate(index):
        index[w] = i
    return np.fromiter(map(index.__getitem__, ws), dtype=np.int64, count=len(ws)), list(index)


@dataclass(frozen=True)
class Repeats:
    """The occurrences of the n-grams that occur more than once, for one n: ``starts`` (word positions,
    ascending) and ``group`` (equal n-grams, equal labels). A label's first start is its n-gram's
    first occurrence."""

    starts: np.ndarray
    group: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)


def repeated_ngrams(ids: np.ndarray, ns: set[int]) -> dict[int, Repeats]:
    """For each n in ``ns``: where the n-grams of the word ids ``ids`` that occur more than once start.

    An n-gram can only repeat where its (n-1)-gram prefix repeats, so each length only looks at the
    start positions that repeated at the length before: ordinary prose has few, so the nine n-gram
    rules cost little more than one pass over the words. An n-gram's label is exact (the rank of the
    pair (its prefix's label, its last word's id)), never a hash: no two n-grams can collide."""
    empty = Repeats(np.zeros(0, np.int64), np.zeros(0, np.int64))
    out: dict[int, Repeats] = dict.fromkeys(ns, empty)
    n_words = len(ids)
    if not n_words or not ns:
        return out
    base = int(ids.max()) + 1  # ids < base: (label, id) -> label * base + id is one-to-one
    starts = np.flatnonzero(np.bincount(ids)[ids] > 1)
    label = ids[starts]
    if 1 in ns:
        out[1] = Repeats(starts, label)
    for n in range(2, max(ns) + 1):
        starts_ok = starts <= n_words - n
        starts, label = starts[starts_ok], label[starts_ok]
        if not len(starts):
            break
        key = label * base + ids[starts + n - 1]  # label < n_words, so key < n_words * base: exact in int64
        _, label, counts = np.unique(key, return_inverse=True, return_counts=True)
        repeated = counts[label] > 1
        starts, label = starts[repeated], label[repeated]
        if n in ns:
            out[n] = Repeats(starts, label)
    return out


def _covered_chars(lengths: np.ndarray, starts: np.ndarray, n: int) -> int:
    """Characters of the words covered by n-grams starting at ``starts``, each word counted once."""
    size = len(lengths) + 1
    depth = np.cumsum(np.bincount(starts, minlength=size) - np.bincount(starts + n, minlength=size))[:-1]
    return int(lengths[depth > 0].sum())


def top_ngram_char_frac(rep: Repeats, lengths: np.ndarray, total: int, n: int) -> float:
    """Share of word characters covered by the occurrences of the most frequent n-gram.

    ``rep`` holds the repeated n-grams only (see :func:`repeated_ngrams`), so the value is zero
    when no n-gram occurs twice: a single occurrence is not a repetition (datatrove would report
    the first 2-gram of a 3-word text as covering 2/3 of it). Ties go to the earliest n-gram."""
    if not len(rep) or not total:
        return 0.0
    labels, first, counts = np.unique(rep.group, return_index=True, return_counts=True)
    best = labels[np.lexsort((first, -counts))[0]]  # most occurrences, then earliest first occurrence
    return _covered_chars(lengths, rep.starts[rep.group == best], n) / total


def dup_ngram_char_frac(rep: Repeats, lengths: np.ndarray, total: int, n: int, count: str = "all") -> float:
    """Share of word characters inside any n-gram that occurs more than once (all occurrences,
    the first one included, each word counted once): the Gopher paper's definition, also what
    Dolma and RedPajama-v2 compute. datatrove counts only the second and later occurrences."""
    if not len(rep) or not total:
        return 0.0
    starts = rep.starts
    if count == "repeats":  # datatrove: the first occurrence is not a duplicate
        _, first = np.unique(rep.group, return_index=True)
        later = np.ones(len(starts), bool)
        later[first] = False
        starts = starts[later]
    return _covered_chars(lengths, starts, n) / total


@register
class GopherRepetition:
    """Gopher repetition rules: drops SEO pages, templates and other text that repeats itself."""

    name: ClassVar[str] = "gopher_repetition"
    Config: ClassVar[type] = GopherRepetitionConfig

    def __init__(self, cfg: GopherRepetitionConfig) -> None:
        self.cfg = cfg

    def __call__(self, text: str, ctx: DocContext) -> FilterResult:
        s, rules = self.measure(text)
        reason = next((r for key, thr, r in rules if thr is not None and s[key] > thr), "")
        return FilterResult(keep=not reason, reason=reason, signals={k: _r(v) for k, v in s.items()})

    def measure(self, text: str) -> tuple[dict[str, float], list[tuple[str, float | None, str]]]:
        """The measured fractions and the (signal, threshold, reason) rules, in datatrove's order."""
        c = self.cfg
        total_chars = max(len(text), 1)
        paras = paragraphs(text)
        lines = nonblank_lines(text)
        para_dup, para_chars = _duplicates(paras)
        line_dup, line_chars = _duplicates(lines)
        s: dict[str, float] = {
            "gopher_dup_para_frac": para_dup / max(len(paras), 1),
            "gopher_dup_para_char_frac": para_chars / total_chars,
            "gopher_dup_line_frac": line_dup / max(len(lines), 1),
            "gopher_dup_line_char_frac": line_chars / total_chars,
        }
        rules: list[tuple[str, float | None, str]] = [
            ("gopher_dup_para_frac", c.dup_para_frac, "gopher_dup_para_frac"),
            ("gopher_dup_para_char_frac", c.dup_para_char_frac, "gopher_dup_para_char_frac"),
            ("gopher_dup_line_frac", c.dup_line_frac, "gopher_dup_line_frac"),
            ("gopher_dup_line_char_frac", c.dup_line_char_frac, "gopher_dup_line_char_frac"),
        ]
        # n-grams are over words with a letter or digit: the CJK splitter emits the punctuation
        # between characters as tokens, and with them a list such as "张嶷、马忠" repeated four
        # times is a duplicated 5-gram (measured: 3 of 120 三国演义 chapters over 0.15 with them,
        # none over 0.09 without). RedPajama-v2 strips punctuation before its n-gram signals too.
        all_ids, vocab = word_ids(_doc_words(text))
        symbol = np.fromiter(map(is_symbol_word, vocab), dtype=bool, count=len(vocab))
        ids = all_ids[~symbol[all_ids]] if len(vocab) else all_ids
        lengths = np.fromiter(map(len, vocab), dtype=np.int64, count=len(vocab))[ids]
        total_word_chars = int(lengths.sum())
        top, dup = c.top_n_grams or (), c.dup_n_grams or ()
        repeated = repeated_ngrams(ids, {n for n, _ in (*top, *dup)})
        for n, thr in top:
            key = f"gopher_top_{n}gram_char_frac"
            s[key] = top_ngram_char_frac(repeated[n], lengths, total_word_chars, n)
            rules.append((key, thr, f"gopher_top_{n}gram"))
        for n, thr in dup:
            key = f"gopher_dup_{n}gram_char_frac"
            s[key] = dup_ngram_char_frac(repeated[n], lengths, total_word_chars, n, c.dup_ngram_count)
            rules.append((key, thr, f"gopher_dup_{n}gram"))
        return s, rules
