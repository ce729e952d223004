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
from typing import Any, TypedDict

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

# Fixed reject reasons (README "Stage 1", DESIGN.md "Stage contract"). Record-level reasons of the
# ingestion policy come first; the last group is decided after extraction/cleanup.
REJECT_REASONS = (
    "invalid_utf8",          # the line (or file) is not valid UTF-8
    "invalid_json",          # the line is not parseable JSON
    "not_an_object",         # valid JSON, but not an object ([1, 2], "s", null, 42)
    "missing_text",          # the object has no text field at all
    "non_string_text",       # the text field is null / a number / a list / an object / a bool
    "blank_text",            # the text is empty or only whitespace (incl. U+3000, U+00A0, U+2028)
    "lone_surrogate",        # a string holds an unpaired UTF-16 surrogate (\ud800, \ude00\ud83d)
    "binary_control_chars",  # any U+0000, or > 1% control characters in the text as read
    "truncated_record",      # the last, partial line of a cut-off compressed stream
    "too_long",              # longer than sampler.max_chars (or a line too long to hold such a text)
    "bad_record",            # any other exception while converting or validating the record (named in detail)
    # WARC records (sources/warc.py)
    "bad_length",            # its Content-Length does not end where the next record starts (reading resumes after it)
    "bad_chunked",           # Transfer-Encoding: chunked, but the body is not chunked
    "bad_content_encoding",  # corrupt gzip/deflate/br body, or an unknown Content-Encoding ("binary" below:
                             # also a body declared HTML that is an image, an archive or NUL bytes)
    # after extraction / cleanup
    "empty", "too_short", "binary", "extract_failed",
)


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
    file: str = ""  # origin file (relative to the source root) for file-based sources
    line: int | None = None  # 1-based line number in that file (JSONL)
    offset: int | None = None  # byte offset of the line's start in the (decompressed) file
    checked: bool = False  # validate_text already ran at ingestion (do not pay for it twice)
    own_id: bool = False  # source_id is the record's own id (the source's id_field): kept in the document id


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
    file: str = ""
    line: int | None = None  # 1-based
    offset: int | None = None  # bytes
    # stage 1 with sampler.signals: the document's signal-store row (sampling/signals.py); not in rejects.jsonl
    store: dict[str, Any] | None = None

    def to_json(self) -> str:
        # A reject may carry the very characters it was rejected for (lone surrogates): escape them, so
        # writing rejects.jsonl never fails on the record it reports.
        return json.dumps({k: _safe(v) for k, v in self.__dict__.items() if k != "store"}, ensure_ascii=False)


def _safe(v: Any) -> Any:
    return v.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(v, str) else v


def normalize_for_hash(text: str) -> str:
    """NFKC, casefold, collapse whitespace: two texts that differ only in these hash the same."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def text_hash(text: str) -> str:
    return hashlib.sha256(normalize_for_hash(text).encode("utf-8")).hexdigest()


def doc_id(source: str, source_id: str) -> str:
    """Stable id: the recipe source name plus a short hash of the source's own key."""
    return f"{source}/{hashlib.sha1(source_id.encode('utf-8')).hexdigest()[:16]}"


MAX_OWN_ID_CHARS = 200
_OWN_ID = re.compile(r"[^\x00-\x1f\x7f-\x9f]+")  # no control characters (they would break logs and reports)


def own_doc_id(source: str, source_id: str) -> str:
    """``<source>/<the record's own id>`` when that id can be kept verbatim: the user's ids survive into every
    artifact (and ``withdraw.py --id`` takes them). An id that cannot (empty, over ``MAX_OWN_ID_CHARS``,
    control characters, or holding the upsampling mark ``#e``) falls back to ``doc_id``'s hash."""
    sid = source_id.strip()
    if sid and len(sid) <= MAX_OWN_ID_CHARS and _OWN_ID.fullmatch(sid) and COPY_MARK not in sid:
        return f"{source}/{sid}"
    return doc_id(source, source_id)


def own_part(doc_id_: str) -> str:
    """The part of a document id after ``<source>/``: the record's own id (or its hash)."""
    return doc_id_.split("/", 1)[1] if "/" in doc_id_ else doc_id_


class Document(TypedDict):
    """One row of ``mixed_raw``/``mixed_dedup`` (``DOC_FEATURES``): what stages 1-2 pass along."""

    id: str  # doc_id(); an upsampled copy is copy_id(id, k)
    source: str  # recipe source name
    text: str
    url: str
    license: str
    lang: str
    lang_score: float
    n_chars: int
    n_tokens: int  # DeepSeek-V3 tokens (the recipe's unit)
    hash: str  # text_hash(text): exact-duplicate key
    quality_signals: str  # JSON object: per-filter measured values
    stage: str
    audit_trace: list[str]  # first entry "source:<source>:<component or format>", then one per step


# Stage 1 upsamples a source on purpose by taking its documents again in epoch k >= 2 as ``<id>#e<k>``.
COPY_MARK = "#e"


def copy_id(doc_id: str, epoch: int) -> str:
    """Id of epoch ``epoch``'s upsampled copy of ``doc_id``."""
    return f"{doc_id}{COPY_MARK}{epoch}"


def is_copy(doc_id: str) -> bool:
    return COPY_MARK in doc_id


def copy_epoch(doc_id: str) -> int:
    """The sampling epoch of a document: k for a copy ``<id>#e<k>``, 1 for an original."""
    return int(doc_id.rsplit(COPY_MARK, 1)[1]) if COPY_MARK in doc_id else 1


def base_id(doc_id: str) -> str:
    """The original of an upsampled copy (stage 1 names epoch k's copy ``<id>#e<k>``)."""
    return doc_id.rsplit(COPY_MARK, 1)[0] if COPY_MARK in doc_id else doc_id


def trace_component(audit_trace: list[str]) -> str:
    """The corpus component (or format) stage 1 recorded in a row's first audit entry, "" if none."""
    first = audit_trace[0] if audit_trace else ""
    return first.split(":", 2)[-1] if first.startswith("source:") else ""


_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
# Control characters of the ingestion policy: Unicode Cc (C0, DEL, C1 U+0080-U+009F) except TAB, LF, CR.
# An ESC that opens a well-formed ANSI/VT100 sequence (colour codes in fortune files, terminal logs) is
# terminal markup that the cleanup removes, not binary: it is not counted. Binary bytes decoded as
# Latin-1 (an embedded PNG) are dense in C0/C1 characters and fail the 1% rule.
_POLICY_CONTROL = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]{0,256}(?:\x07|\x1b\\))|"
                             r"([\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f])")
_ANY_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # every character either branch can start with
_SURROGATE = re.compile(r"[\ud800-\udfff]")
MAX_CONTROL_RATIO = 0.01


def count_control_chars(text: str) -> int:
    """Control characters the ingestion policy counts (see ``_POLICY_CONTROL``)."""
    if not _ANY_CONTROL.search(text):  # the common case, found by a plain character-class scan
        return 0
    return sum(1 for m in _POLICY_CONTROL.finditer(text) if m.group(1) is not None)


def validate_text(text: Any, field_name: str = "text") -> tuple[str, str] | None:
    """The ingestion policy for a record's text *as read*, before any cleanup: (reason, detail) for a
    reject, None for a text that may go on to extraction and the filters."""
    if not isinstance(text, str):
        kind = "null" if text is None else "bool" if isinstance(text, bool) else type(text).__name__
        return "non_string_text", f"field {field_name!r} is {kind}, not a string"
    if not text.strip():
        return "blank_text", f"field {field_name!r} is empty or whitespace only ({len(text):,} chars)"
    m = _SURROGATE.search(text)
    if m is not None:
        return "lone_surrogate", f"unpaired surrogate U+{ord(m.group()):04X} at char {m.start():,}"
    nul = text.find("\x00")
    if nul >= 0:
        return "binary_control_chars", f"NUL (U+0000) at char {nul:,}"
    bad = count_control_chars(text)
    if bad and bad / len(text) > MAX_CONTROL_RATIO:
        return "binary_control_chars", f"{bad:,} control chars of {len(text):,} (> {MAX_CONTROL_RATIO:.0%})"
    return None


def lone_surrogate_field(row: dict[str, Any], fields: tuple[str | None, ...]) -> str | None:
    """The first of ``fields`` (id, url, license) whose string value holds a lone surrogate: such a value
    would crash hashing or the Arrow writer, so the record is rejected instead."""
    for f in fields:
        v = row.get(f) if f else None
        if isinstance(v, str) and _SURROGATE.search(v):
            return f
    return None


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
        return _safe(text[:n])
    if raw is not None:
        return repr(raw[:n])
    return ""
