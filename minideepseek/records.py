"""The document record of stages 1-2 (DESIGN.md "Document schema") and the checks every raw
record passes before it may become one.

A raw record (from any source) is ``RawDoc``; it either becomes a ``Document`` or a ``Reject``
with a reason. Rejects are counted and written to ``rejects.jsonl`` with their origin, so nothing
is dropped silently.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import datasets

SCHEMA_VERSION = 1

DOC_FEATURES = datasets.Features({
    "id": datasets.Value("string"),
    "source": datasets.Value("string"),
    "text": datasets.Value("string"),
    "url": datasets.Value("string"),
    "license": datasets.Value("string"),
    "lang": datasets.Value("string"),
    "lang_score": datasets.Value("float32"),
    "n_chars": datasets.Value("int64"),
    "n_tokens": datasets.Value("int64"),
    "hash": datasets.Value("string"),
    "quality_signals": datasets.Value("string"),  # JSON object: per-filter measured values
    "stage": datasets.Value("string"),
    "audit_trace": datasets.List(datasets.Value("string")),
})

REJECT_REASONS = ("invalid_utf8", "binary", "empty", "too_short", "too_long", "missing_text", "malformed",
                  "extract_failed")


@dataclass
class RawDoc:
    """What a source yields: raw content plus where it came from. ``text`` is None when the record
    had no usable text field; ``raw_bytes`` carries undecodable content so it can be rejected."""

    source_id: str  # the source's own id or a stable key (path, row index)
    text: str | None
    fmt: str = "text"  # extraction format, see minideepseek.extract.FORMATS
    url: str = ""
    license: str = ""
    lang: str = ""
    raw_bytes: bytes | None = None
    error: str | None = None  # set by the source when the row itself was malformed
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reject:
    """A record that did not become a document. ``kind`` is "invalid" (bad input: counted against
    the error budget) or "filtered" (a quality/safety filter dropped it: ``filter`` names it)."""

    source: str
    source_id: str
    url: str
    reason: str
    detail: str
    snippet: str
    kind: str = "invalid"
    filter: str = ""
    id: str = ""

    def to_json(self) -> str:
        return json.dumps(self.__dict__, ensure_ascii=False)


def normalize_for_hash(text: str) -> str:
    """NFKC, casefold, collapse whitespace: two texts that differ only in these hash the same."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def text_hash(text: str) -> str:
    return hashlib.sha256(normalize_for_hash(text).encode("utf-8")).hexdigest()


def doc_id(source: str, source_id: str) -> str:
    """Stable id: the recipe source name plus a short hash of the source's own key."""
    return f"{source}/{hashlib.sha1(source_id.encode('utf-8')).hexdigest()[:16]}"


def base_id(doc_id: str) -> str:
    """The original of an upsampled copy (stage 1 names epoch k's copy ``<id>#e<k>``)."""
    return doc_id.rsplit("#e", 1)[0] if "#e" in doc_id else doc_id


_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def check_text(text: str, min_chars: int, max_chars: int, max_control_ratio: float = 0.01) -> tuple[str | None, str]:
    """Return (reason, detail) for a bad text, (None, "") for a good one.

    "binary" is decided on the share of C0 control characters (other than \\t \\n \\r \\f \\v) and
    U+FFFD replacement characters: text that decoded but is mostly bytes of a binary file."""
    n = len(text)
    if n == 0 or not text.strip():
        return "empty", "no non-whitespace characters"
    if n > max_chars:
        return "too_long", f"{n:,} chars > max_chars={max_chars:,}"
    bad = len(_CONTROL.findall(text)) + text.count("\ufffd")
    if bad / n > max_control_ratio:
        return "binary", f"{bad:,} control/replacement chars of {n:,}"
    if len(text.strip()) < min_chars:
        return "too_short", f"{len(text.strip())} chars < min_chars={min_chars}"
    return None, ""


def snippet(text: str | None, raw: bytes | None = None, n: int = 200) -> str:
    if text is not None:
        return text[:n]
    if raw is not None:
        return repr(raw[:n])
    return ""
