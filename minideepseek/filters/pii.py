"""PII redaction with Dolma's placeholders: a modifier that rewrites spans, never whole documents.

    filters:
      - {type: pii}                                   # email, ip, phone
      - {type: pii, kinds: [email], max_pii_per_doc: 50}

Each match is replaced by ``|||EMAIL_ADDRESS|||``, ``|||IP_ADDRESS|||`` or ``|||PHONE_NUMBER|||``
and counted (``counts={"EMAIL_ADDRESS": n, ...}``). Only the matched span changes: the text
around it, code fences, indentation and the quotes of a string literal holding an email stay
byte-identical (the output is assembled from the untouched slices of the input). With
``max_pii_per_doc`` set, a document with more redactions than that is dropped (``pii_too_many``):
Llama 3 dropped PII-dense pages and domains instead of redacting them.

Decisions (the field differs on each; these favour keeping technical text intact). On the demo
corpus (11,246 docs) the rules below redact 1,634 emails (authors of docs and source files,
mailing lists), 125 IPs (DNS-zone and log examples) and 36 phones (publisher contacts in
Chinese man pages, fictional numbers in the Python docs); residual false positives in samples:
an AIX level string ``5300-07-00-0000`` and a netmask ``2001:db00::0``. Before the
section-number rule, 355 of 471 public-looking IPv4 hits were numbered headings such as
``11.1.3.6.``; before the context rules, most phone hits were table rows, ranges and page
numbers. ~7 MB/s, one process.

* Emails: ``local@domain.tld`` with a 2+ letter TLD, not inside a longer token (ASCII
  boundaries: CJK text puts no space around an address). Kept: the RFC 2606/6761 reserved
  names (``example.com/.net/.org``, ``*.example``, ``*.test``, ``*.invalid``, ``*.localhost``)
  and role accounts (``git@``, ``noreply@``): they name no one, and documentation uses them
  ("git@github.com:org/repo.git"). Counted in the ``pii_emails_kept`` signal.
* IPv4: Dolma redacts every valid dotted quad. We redact only publicly routable addresses
  (``ipaddress`` ``is_global``, not multicast): private (10/8, 172.16/12, 192.168/16),
  loopback, link-local, documentation (192.0.2/24, 198.51.100/24, 203.0.113/24) and reserved
  ranges identify no host on the internet and fill tutorials ("listen 127.0.0.1:8080").
  Not an address either: a quad whose four numbers are all below 64 -- section and version
  numbers ("11.1.3.6. 应用限制", "RFC 8446, Section 4.4.2.1", "1.2.3.4") were most of the raw
  hits in the demo's docs, while only (64/256)^4 = 0.4% of random addresses look like that
  (8.8.8.8 and 1.1.1.1, public resolvers, are kept this way too); a quad after
  ``v``/``version``/``release``, or followed by ``-suffix``, ``.digit`` or ``.name``
  (``1.2.3.4-beta``, ``1.2.3.4.5``, ``1.0.0.127.in-addr.arpa``).
* IPv6: full and ``::``-compressed forms with at least three hextets, validated by
  ``ipaddress``, inside 2000::/3 (global unicast, where all public addresses live) and
  ``is_global``; 2001:db8::/32 (documentation) is kept. No IPv4-embedded forms.
* Phones: optional ``+country``, optional ``(area)``, then digit groups joined by one separator
  character (space, ``-``, ``.``); 7 to 15 digits (E.164's maximum); never glued to letters,
  ``/``, ``:`` or a further number (``1024 2048 4096 8192`` in a table is none of them).
  Accepted: ``+country`` followed by separated groups (a one-digit area code allowed:
  ``+33 1 23 45 67 89``); ``(area) 123-4567`` unless the parens hold a year (``(1974)
  703-704`` is a reference); 3+ groups joined by ``-`` (``555-123-4567``, ``1-800-555-0199``);
  ``.`` only in the shapes 3-3-4 and 2-2-2-2-2. Only with a phone word ("tel", "phone", "fax",
  "call", "电话", ... as whole words within 40 characters before): groups joined by spaces
  (``020 7946 0958``, ``612 345 678`` -- a bare ``10 100 1000`` is a table row), two groups
  (``555-1234`` -- bare, ``9991-10000`` is a range and ``854-1987`` a standard), and ``+`` with
  no separators (``+2147483647`` is INT_MAX). Rejected: a group of one digit (ISBNs
  ``0-201-52983-1``, versions), mixed separators (``123.45 678.90``), calendar dates and
  date-time stamps (``2024-01-15``, ``15.01.2024``, ``2004-11-29-19:50:15``, ``32767-12-31``),
  and anything within 12 characters after ``ISBN``/``ISSN``/``DOI``/``arXiv``.
"""

from __future__ import annotations

import bisect
import ipaddress
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from ..config import require
from .base import DocContext, FilterResult, register

KINDS = ("email", "ip", "phone")
PLACEHOLDERS = {"email": "|||EMAIL_ADDRESS|||", "ip": "|||IP_ADDRESS|||", "phone": "|||PHONE_NUMBER|||"}
COUNT_KEYS = {"email": "EMAIL_ADDRESS", "ip": "IP_ADDRESS", "phone": "PHONE_NUMBER"}

# Boundaries use ASCII classes, not \w: CJK text puts no space around an address
# ("邮箱john@x.com", "电话1-800-998-9938。"), and CJK characters are \w.
# The lookbehind makes every start inside a run of address characters fail at once, so the
# scan stays linear on long tokens (base64, minified code) that contain no "@".
EMAIL_RE = re.compile(
    r"(?<![A-Za-z0-9_.%+-])(?P<local>[A-Za-z0-9][A-Za-z0-9._%+-]{0,63})@"
    r"(?P<domain>(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24})(?![A-Za-z0-9_-])"
)
# Role accounts that name no person ("git@github.com:org/repo.git" is in every README).
ROLE_LOCALS = frozenset({"git", "noreply", "no-reply", "donotreply", "do-not-reply"})
_RESERVED_EMAIL_DOMAIN = re.compile(r"(?:^|\.)(?:example\.(?:com|net|org)|example|test|invalid|localhost)$", re.IGNORECASE)

# Speed (the same matches): a pattern that opens with a lookbehind is tried at every position of the
# text; a leading lookahead naming the characters a match can start with ("(?=\d)") lets the regex
# engine skip to those first (~2-3.5x faster on the scale corpus's text). EMAIL_RE and IPV6_RE are
# only tried just before their "@" / ":" (_finditer_before).
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
IPV4_RE = re.compile(rf"(?=\d)(?<![A-Za-z0-9_.\-])(?:{_OCTET}\.){{3}}{_OCTET}(?![A-Za-z0-9_\-]|\.[A-Za-z0-9])")
# Any dotted quad of 1-3 digit groups, valid or not: claimed so the phone rule never reads one.
_DOTTED_QUAD = re.compile(r"(?=\d)(?<![A-Za-z0-9_.])\d{1,3}(?:\.\d{1,3}){3}(?![A-Za-z0-9_]|\.[A-Za-z0-9])")
IPV6_RE = re.compile(
    r"(?<![A-Za-z0-9_:.])(?:[0-9A-Fa-f]{1,4}:){1,7}(?::|(?::[0-9A-Fa-f]{1,4}){1,7}|[0-9A-Fa-f]{1,4})(?![A-Za-z0-9_:.])"
)
_VERSION_BEFORE = re.compile(r"(?:\bv|\bversion[\s:=]*|\brelease[\s:=]*|\bver\.?\s*)$", re.IGNORECASE)
SECTION_LIKE_MAX_OCTET = 64  # all four numbers below this: a section/version number, not a host

PHONE_RE = re.compile(
    r"(?=[+(\d])(?<![A-Za-z0-9_+.\-/])(?<!\d[ .\-])"
    r"(?:\+\d{7,15}"  # +8613812345678
    r"|(?:\+\d{1,3}[ .\-]?)?(?:\(\d{1,5}\)[ .\-]?)?\d{1,8}(?:[ .\-]\d{1,8}){1,6})"
    r"(?![A-Za-z0-9_\-/:])(?![ .\-]\d)"
)
_SEP = re.compile(r"[ .\-]")
_COUNTRY = re.compile(r"\+\d{1,3}[ .\-]?")
_NUMBER_CONTEXT = re.compile(r"(?:isbn|issn|doi|arxiv)[\s:\-~]*(?:1[03][\s:\-~]*)?$", re.IGNORECASE)
_PHONE_CONTEXT = re.compile(  # whole words ("Purcell" is no "cell"); CJK words have no \b to use
    r"\b(?:tel|telephone|phone|phones|fax|call|mobile|cell|contact|hotline|whatsapp|sms|telefon|tél|teléfono|тел)\b"
    r"|电话|手机|传真|联系|電話",
    re.IGNORECASE,
)
PHONE_CONTEXT_CHARS = 40  # how far before a number a "tel"/"电话" word counts
_YEAR = re.compile(r"1[5-9]\d\d|20\d\d")


def _is_global_ip(s: str) -> bool:
    """Publicly routable IPv4 (not private, loopback, documentation, reserved, multicast)."""
    try:
        ip = ipaddress.IPv4Address(s)
    except ValueError:
        return False
    return ip.is_global and not ip.is_multicast


_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")


def _is_public_ipv6(s: str) -> bool:
    """Global unicast (2000::/3, where every public address lives) and not a special range:
    Python 3.11's ``is_global`` alone accepts any unlisted range, e.g. ``abc::def``."""
    try:
        ip = ipaddress.IPv6Address(s)
    except ValueError:
        return False
    return ip in _GLOBAL_UNICAST and ip.is_global


def _md(m: int, d: int) -> bool:
    return 1 <= m <= 12 and 1 <= d <= 31


def _is_date(groups: list[str]) -> bool:
    """The first three groups read as Y-M-D, D-M-Y or M-D-Y (also date-time stamps)."""
    if len(groups) < 3:
        return False
    g = groups[:3]
    a, b, c = (int(x) for x in g)
    if len(g[0]) == 4 and len(g[1]) <= 2 and len(g[2]) <= 2:
        return _md(b, c)
    if len(groups) == 3 and len(g[2]) in (2, 4) and len(g[0]) <= 2 and len(g[1]) <= 2:
        return _md(b, a) or _md(a, b)
    if len(groups) == 3 and len(g[1]) == 2 and len(g[2]) == 2:
        return _md(b, c)  # "32767-12-31": any year, then month and day
    return False


def is_phone(candidate: str, context: bool) -> bool:
    """The shape tests of the module docstring, on one regex candidate; ``context``: a phone
    word ("tel", "call", "电话", ...) shortly before it."""
    digits = sum(ch.isdigit() for ch in candidate)
    if not 7 <= digits <= 15:
        return False
    if candidate.startswith("+"):
        m = _COUNTRY.match(candidate)
        if m is None or not _SEP.search(candidate[1:]):
            return context  # "+8613812345678", but also "+2147483647" (INT_MAX)
        groups = [g for g in _SEP.split(candidate[m.end():].replace("(", "").replace(")", "")) if g]
        # "+33 1 23 45 67 89": Paris's one-digit area code may follow the country code.
        return all(len(g) >= 2 or i == 0 for i, g in enumerate(groups))
    if candidate.startswith("("):
        area, _, rest = candidate[1:].partition(")")
        if _YEAR.fullmatch(area):
            return False  # "(1974) 703-704": a year and pages in a reference
        groups = [g for g in _SEP.split(rest) if g]
        return sum(len(g) for g in groups) >= 5 and all(len(g) >= 2 for g in groups)
    seps = set(_SEP.findall(candidate))
    if len(seps) != 1:
        return False  # "123.45 678.90": decimals in a table, not one phone
    sep = seps.pop()
    groups = _SEP.split(candidate)
    if groups[0] == "1" and len(groups) == 4:
        groups = groups[1:]  # "1-800-555-0199": North American trunk prefix
    if any(len(g) < 2 for g in groups) or _is_date(groups):
        return False  # ISBNs, versions, dates
    shape = [len(g) for g in groups]
    if sep == ".":
        return shape in ([3, 3, 4], [2, 2, 2, 2, 2])  # 555.123.4567, 01.23.45.67.89
    if sep == " " or len(groups) == 2:
        # "10 100 1000" (a table row), "9991-10000" (a range), "854-1987" (a standard)
        return context
    return True


@dataclass(frozen=True)
class PiiConfig:
    kinds: tuple[str, ...] = KINDS
    max_pii_per_doc: int | None = None  # drop (pii_too_many) above this many redactions; None: never drop

    def __post_init__(self) -> None:
        require(len(self.kinds) > 0, f"pii.kinds is empty; list some of {list(KINDS)}, or remove the pii filter")
        for k in self.kinds:
            require(k in KINDS, f"pii.kinds: {k!r} is not a kind; choose from {list(KINDS)}")
        require(
            self.max_pii_per_doc is None or self.max_pii_per_doc >= 0,
            f"pii.max_pii_per_doc = {self.max_pii_per_doc!r} must be >= 0, or null to never drop",
        )


def _finditer_before(rx: re.Pattern[str], text: str, anchor: str, reach: int) -> Iterator[re.Match[str]]:
    """``rx.finditer(text)`` for a pattern whose every match holds ``anchor`` 1 to ``reach`` characters
    after its start and not before (an email's "@" after its 1-64 character local part, an IPv6
    address's first ":" after 1-4 hex digits): only the positions just before each anchor are tried,
    in order, each with ``rx.match`` (which sees the text before it, as the lookbehinds need), so the
    matches are finditer's, and a text is not scanned position by position by a lookbehind pattern."""
    pos, prev = 0, -1
    a = text.find(anchor)
    while a != -1:
        for p in range(max(pos, a - reach, prev + 1), a):
            m = rx.match(text, p)
            if m:
                yield m
                pos = m.end()
                break
        prev = a
        a = text.find(anchor, a + 1)


Span = tuple[int, int, str]  # start, end, kind ("" = claimed but kept)


@register
class PiiRedactor:
    """Replace emails, public IPs and phone numbers with Dolma's placeholders."""

    name: ClassVar[str] = "pii"
    Config: ClassVar[type] = PiiConfig

    def __init__(self, cfg: PiiConfig | None = None) -> None:
        self.cfg = cfg or PiiConfig()
        self.kinds = frozenset(self.cfg.kinds)

    def find(self, text: str) -> tuple[list[Span], int]:
        """Non-overlapping spans to redact, in order, and how many reserved emails were kept.

        Emails claim their span first (so the digits of ``5551234567@x.org`` are no phone), then
        IPs and dotted quads (so ``192.168.100.200`` is no phone either), then phones. Kept
        matches also claim their span.
        """
        claimed: list[Span] = []  # sorted, non-overlapping
        starts: list[int] = []
        kept_reserved = 0

        def free(a: int, b: int) -> bool:
            i = bisect.bisect_right(starts, a)
            if i and claimed[i - 1][1] > a:
                return False
            return i == len(starts) or claimed[i][0] >= b

        def claim(a: int, b: int, kind: str) -> None:
            i = bisect.bisect_right(starts, a)
            starts.insert(i, a)
            claimed.insert(i, (a, b, kind))

        if "@" in text:
            for m in _finditer_before(EMAIL_RE, text, "@", 64):
                keep = bool(_RESERVED_EMAIL_DOMAIN.search(m.group("domain"))) or m.group("local").lower() in ROLE_LOCALS
                kept_reserved += keep
                claim(m.start(), m.end(), "" if keep or "email" not in self.kinds else "email")
        if "." in text:
            for m in IPV4_RE.finditer(text):
                if not free(m.start(), m.end()):
                    continue
                before = text[max(0, m.start() - 12): m.start()]
                redact = (
                    "ip" in self.kinds
                    and _is_global_ip(m.group(0))
                    and not _VERSION_BEFORE.search(before)
                    and max(int(x) for x in m.group(0).split(".")) >= SECTION_LIKE_MAX_OCTET
                )
                claim(m.start(), m.end(), "ip" if redact else "")
            for m in _DOTTED_QUAD.finditer(text):
                if free(m.start(), m.end()):
                    claim(m.start(), m.end(), "")
        if ":" in text and "ip" in self.kinds:
            for m in _finditer_before(IPV6_RE, text, ":", 4):
                hextets = [h for h in m.group(0).split(":") if h]
                if len(hextets) >= 3 and free(m.start(), m.end()) and _is_public_ipv6(m.group(0)):
                    claim(m.start(), m.end(), "ip")
        if "phone" in self.kinds:
            for m in PHONE_RE.finditer(text):
                if not free(m.start(), m.end()):
                    continue
                if _NUMBER_CONTEXT.search(text[max(0, m.start() - 12): m.start()]):
                    continue
                context = bool(_PHONE_CONTEXT.search(text, max(0, m.start() - PHONE_CONTEXT_CHARS), m.start()))
                if not is_phone(m.group(0), context):
                    continue
                claim(m.start(), m.end(), "phone")
        spans = [s for s in claimed if s[2]]
        return spans, kept_reserved

    def __call__(self, text: str, ctx: DocContext) -> FilterResult:
        spans, kept_reserved = self.find(text)
        counts = {COUNT_KEYS[k]: 0 for k in KINDS if k in self.kinds}
        pieces: list[str] = []
        pos = 0
        for start, end, kind in spans:
            pieces.append(text[pos:start])
            pieces.append(PLACEHOLDERS[kind])
            counts[COUNT_KEYS[kind]] += 1
            pos = end
        total = len(spans)
        signals: dict[str, Any] = {"pii_redacted": total}
        if kept_reserved:
            signals["pii_emails_kept"] = kept_reserved
        if self.cfg.max_pii_per_doc is not None and total > self.cfg.max_pii_per_doc:
            return FilterResult(keep=False, reason="pii_too_many", signals=signals, counts=counts)
        if not spans:
            return FilterResult(keep=True, signals=signals, counts=counts)
        pieces.append(text[pos:])
        return FilterResult(keep=True, signals=signals, text="".join(pieces), counts=counts)
