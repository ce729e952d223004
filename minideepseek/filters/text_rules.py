"""Rule-based text quality filters: Gopher, C4 and FineWeb (layer 1 of quality filtering).

Importing this module registers four filters under their YAML ``type:`` names:

======================  ===============================================  =========================
``type:``               rules (first failing one is the drop reason)     module
======================  ===============================================  =========================
``gopher_quality``      length, mean word length, ``#``/ellipsis per     :mod:`.gopher`
                        word, bullet/ellipsis lines, words with a
                        letter, English stop words
``gopher_repetition``   duplicated lines/paragraphs, top 2/3/4-gram and  :mod:`.gopher`
                        duplicated 5..10-gram character fractions
``c4``                  modifier: drops lines (end mark, < 3 words,      :mod:`.c4`
                        javascript, cookie/terms lines, 1000-char
                        words), then pages (lorem ipsum, ``{``, < 5
                        sentences, optional bad-words list)
``fineweb``             lines ending in punctuation, short lines,        :mod:`.fineweb`
                        characters in duplicated lines
======================  ===============================================  =========================

Defaults are the published thresholds: Gopher table A1 (Rae et al. 2021) as datatrove ships
them, C4 section 2.2 (Raffel et al. 2020) plus the extra rules of its reference code (TFDS
``c4_utils``), FineWeb's blog/paper (Penedo et al. 2024). Any numeric threshold set to ``null``
turns that one rule off. They are cheap (microseconds to a millisecond per document), explainable,
and remove only the obvious junk; telling good prose from fluent nonsense is the model-based
layer's job.

CJK decision
------------
The rules count words, and were tuned on English. :func:`.words.words` is CJK-aware: every CJK
ideograph, kana or hangul syllable is one word; other text splits on whitespace.

* ``gopher_repetition`` and ``fineweb`` apply to any language unchanged: an n-gram of Chinese
  characters is a phrase, and the FineWeb rules only look at line shapes and characters (their
  line-end set includes ``。！？”」』``). n-grams are built from words that contain a letter or
  digit, so the ``，、。`` tokens between Chinese characters do not make "张嶷、马忠" a 5-gram.
* ``gopher_quality``: mean word length (3..10) and "at least two of the, be, to, of, and, that,
  have, with" are English-only. With ``skip_for_cjk: true`` (default) both are skipped when more
  than 50% of the non-space characters are CJK, recorded as ``gopher_cjk_skipped``; the length,
  ``#``/ellipsis, bullet, ellipsis-line and letter rules still apply (a CJK character is a letter).
  The mean word length is taken over the non-CJK words, so a mixed page is judged by its English
  words, not dragged under 3 by one-character "words".
* ``c4`` counts CJK characters as words (a Chinese line is not "one word"), accepts ``。！？”」』``
  as end marks and splits sentences after ``。！？``.

Measured (demo corpus ``v1-portable+debian``, defaults, one core):

* 三国演义, all 120 chapters (600k characters, 81-84% CJK): ``gopher_quality`` keeps 120 (CJK
  skip on all; share of words with a letter 0.84-0.86, the CJK punctuation tokens count against
  it as nltk's punctuation tokens do in datatrove's English), ``gopher_repetition`` keeps 120
  (highest duplicated 5-gram fraction 0.087; with punctuation tokens in the n-grams three chapters
  reached 0.150-0.156 and were dropped), ``c4`` keeps 120 (median 245 sentences), ``fineweb``
  keeps 119: chapter 22 quotes a proclamation hard-wrapped at ~24 characters a line (84% short
  lines), which this rule drops in any language.
* English Wikipedia, the 106 ``enwiki`` articles through ``extract_text(raw, "wikitext")``: 87
  pass all four. The rest are disambiguation pages and lists (``fineweb_line_punct_ratio`` 12,
  ``c4_too_few_sentences`` 8, ``gopher_bullet_lines`` 3, ``gopher_non_alpha_words`` 2,
  ``gopher_dup_5gram`` 1) and five articles with LaTeX (``\\(T_{mnk}\\)``) or C code that
  ``c4_curly_bracket`` drops: C4's known bias against math and code pages.
* Mixed zh/en technical text counts as English: of the 703 Chinese manpages (median 41% CJK) 363
  fail ``gopher_stop_words``; such sources want their own chain, as code does.
* Throughput on the English demo documents: ~2.8 MB/s for each Gopher filter, ~5 MB/s for
  ``c4``, ~75 MB/s for ``fineweb``.

Deviations from datatrove, on purpose (details in each module):

* Gopher n-gram fractions are over the characters of the words (the paper's "fraction of
  characters"), not ``len(text)``; a duplicated n-gram counts all its occurrences, the first one
  included, each word once (the paper, Dolma, RedPajama-v2; datatrove counts only the repeats and
  so drops less: on the 497 Python-docs HTML pages 190 exceed 0.15 for 5-grams against 39 with
  datatrove's count); the top n-gram covers its occurrences' words once and is zero when no
  n-gram repeats.
* Gopher line ratios are over non-blank lines; stop words are matched case-folded without edge
  punctuation; bullets also include ``*`` and ``·``.
* C4 does not count punctuation-only tokens as words ("Home | About" has two) and counts
  sentences with a rule-based splitter, not nltk punkt.
* FineWeb uses the blog's definitions and thresholds (``char_duplicates_ratio`` 0.1, not the code
  default 0.01) and leaves out datatrove's unpublished ``new_line_ratio`` rule.
"""

from __future__ import annotations

from . import c4, fineweb, gopher  # noqa: F401  (registration side effects)
from .c4 import C4, C4Config
from .fineweb import FineWebConfig, FineWebQuality
from .gopher import GopherQuality, GopherQualityConfig, GopherRepetition, GopherRepetitionConfig
from .words import cjk_ratio, is_mostly_cjk, words

__all__ = [
    "C4",
    "C4Config",
    "FineWebConfig",
    "FineWebQuality",
    "GopherQuality",
    "GopherQualityConfig",
    "GopherRepetition",
    "GopherRepetitionConfig",
    "cjk_ratio",
    "is_mostly_cjk",
    "words",
]
