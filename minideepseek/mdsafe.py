"""Text from documents and files, made safe to print in a Markdown report or a terminal line.

A report quotes what the data holds: snippets of dropped documents, file names, URLs, who/why of a
deletion request. Any of it may be hostile or personal. ``snippet_md`` PII-redacts a snippet with the
pii filter's own rules (e-mail, public IP, phone -> Dolma's placeholders), so a committed report never
republishes an address the pipeline itself would have redacted; ``md_text``/``md_code`` escape what
Markdown would interpret (tables, links, HTML, headings, emphasis) and every control character, so a
crafted record cannot break a table, inject a link or an HTML tag, or send escape sequences to a terminal.
"""

from __future__ import annotations

import re

from .filters.pii import PiiRedactor

_REDACTOR = PiiRedactor()
# What Markdown (GFM) would read as syntax inside a line: code spans, emphasis, links/images ([ and ] are
# enough: "(" only means something after "]"), HTML tags and entities, table cells, strikethrough, headings
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&#])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _escape_controls(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                        text)


def redact(text: str) -> str:
    """``text`` with e-mail addresses, public IPs and phone numbers replaced by the pii filter's placeholders."""
    spans, _ = _REDACTOR.find(text)
    out, pos = [], 0
    for a, b, kind in spans:
        out.append(text[pos:a])
        out.append(f"[{kind} redacted]")
        pos = b
    out.append(text[pos:])
    return "".join(out)


def md_text(text: str, limit: int | None = None) -> str:
    """One line of inert Markdown: whitespace collapsed, controls escaped, every markup character
    backslash-escaped (so ``|`` cannot end a table cell, ``<`` cannot open a tag, ``[x](y)`` is no link)."""
    one = " ".join(_escape_controls(str(text)).split())
    if limit is not None:
        one = one[:limit]
    return _MD_SPECIAL.sub(r"\\\1", one)


def md_code(text: str, limit: int | None = None) -> str:
    """``text`` as an inline code span that nothing inside can close (the fence is one backtick longer
    than the longest run of backticks in it); controls escaped, ``|`` escaped for tables (GFM reads ``\\|`` as a
    pipe inside a cell's code span)."""
    one = " ".join(_escape_controls(str(text)).split())
    if limit is not None:
        one = one[:limit]
    fence = "`" * (max((len(r) for r in re.findall(r"`+", one)), default=0) + 1)
    pad = " " if one.startswith("`") or one.endswith("`") else ""
    return f"{fence}{pad}{one.replace('|', chr(92) + '|')}{pad}{fence}"  # GFM: a \\| inside a code span too


def snippet_md(text: str, limit: int = 200) -> str:
    """A document snippet for a report: PII-redacted first (on the whole snippet), then inert Markdown."""
    return md_text(redact(" ".join(str(text).split())[:limit]))
