"""The demo corpus's Common Crawl-format copy: some of its OWN HTML pages written as real WARC files,
so ``configs/demo_warc.yaml`` exercises the ``warc`` source offline (no generated prose: every body is a
page of the demo corpus, re-encoded the way web servers send pages).

What the files hold, per page (a deterministic choice from the page's position, so the same corpus gives
byte-identical files):

* a ``request``/``response``/``metadata`` triplet like Common Crawl's, one gzip member per record,
  realistic HTTP headers (Server, Date, Last-Modified, ETag, Vary, Content-Length or chunked);
* bodies sent identity, ``Content-Encoding: gzip`` or ``br``, some ``Transfer-Encoding: chunked``;
* Chinese pages in GBK (charset in the HTTP header, or only in the ``<meta>`` tag, the way old Chinese
  sites declare it), some English pages in windows-1252 declared as ``iso-8859-1``; characters a legacy
  charset lacks become HTML character references, as a server's converter writes them;
* now and then what a crawl also holds: a ``301`` to the https address (skipped: ``status_3xx``) and a
  ``revisit`` record of a page fetched twice (skipped: ``revisit``);
* a WET file (``conversion`` records: the page's plain text, tags stripped as Common Crawl's WET does)
  for a few other pages.

Layout: ``<out>/en/CC-DEMO-en-0000{0,1}.warc.gz``, ``<out>/zh/CC-DEMO-zh-00000.warc.gz`` and
``<out>/{en,zh}/CC-DEMO-*-00000.warc.wet.gz``; built into a temp dir and renamed into place.
Run: ``.venv/bin/python -m minideepseek.demo_corpus warc --out data/demo_warc``.
"""

from __future__ import annotations

import gzip
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any

from ..sources.warc_writer import (
    Page,
    chunked,
    conversion,
    gzip_member,
    http_response,
    record_id,
    triplet,
    warc_record,
    warcinfo,
)

log = logging.getLogger(__name__)

# language -> components whose HTML pages are copied (web pages with navigation; MathJax in scipy's)
COMPONENTS = {"en": ("python_docs_html", "debian_handbook_en", "git_docs_html", "scipy_docs_math", "sympy_docs_math"),
              "zh": ("debian_handbook_zh", "debian_reference_zh", "libreoffice_help_zh")}
DATE = "2024-03-01T12:00:00Z"
HTTP_DATE = "Fri, 01 Mar 2024 12:00:00 GMT"
_CHARSET_DECL = re.compile(r"""(charset\s*=\s*["']?|encoding\s*=\s*["'])utf-8""", re.I)


def _pick(records: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """``n`` records spread evenly over the component (sorted by key: independent of build order)."""
    records = sorted(records, key=lambda r: r["doc_key"])
    if len(records) <= n:
        return records
    step = len(records) / n
    return [records[int(i * step)] for i in range(n)]


def _url(r: dict[str, Any]) -> str:
    url = r.get("url") or ""
    if url.startswith("deb://"):  # the corpus's package address: served as the package's web path
        return "https://" + url[len("deb://"):].replace("/usr/share/", "/", 1)
    return url


def _encode(html: str, lang: str, i: int) -> tuple[bytes, str]:
    """(body bytes, Content-Type) for page ``i``: legacy charsets for some pages, declared where old sites
    declare them."""
    if lang == "zh" and i % 3 != 2:
        legacy = _CHARSET_DECL.sub(lambda m: m.group(1) + ("gb2312" if i % 3 == 1 else "GBK"), html, count=2)
        body = legacy.encode("gbk", "xmlcharrefreplace")
        return body, "text/html; charset=GBK" if i % 3 == 0 else "text/html"  # i%3==1: only the meta tag says
    if lang == "en" and i % 5 == 3:
        legacy = _CHARSET_DECL.sub(lambda m: m.group(1) + "iso-8859-1", html, count=2)
        return legacy.encode("cp1252", "xmlcharrefreplace"), "text/html; charset=iso-8859-1"
    return html.encode("utf-8"), "text/html; charset=utf-8"


def _response(body: bytes, ctype: str, i: int, br: bool = True) -> bytes:
    headers = [("Date", HTTP_DATE), ("Server", "Apache/2.4.57 (Debian)"),
               ("Last-Modified", "Tue, 02 Jan 2024 08:00:00 GMT"), ("ETag", f'"{len(body):x}-{i:x}"'),
               ("Accept-Ranges", "bytes"), ("Vary", "Accept-Encoding"), ("Content-Type", ctype)]
    if i % 4 == 0 and br:
        import brotli

        body = brotli.compress(body, quality=5)
        headers.append(("Content-Encoding", "br"))
    elif i % 4 == 1:
        body = gzip.compress(body, compresslevel=6, mtime=0)
        headers.append(("Content-Encoding", "gzip"))
    if i % 3 == 1:
        body = chunked(body)
        headers.append(("Transfer-Encoding", "chunked"))
    else:
        headers.append(("Content-Length", str(len(body))))
    headers.append(("Connection", "close"))
    return http_response(body, "200 OK", headers)


def _redirect(url: str) -> Page:
    http_url = "http://" + url.split("://", 1)[-1]
    return Page(http_url, http_response(b"", "301 Moved Permanently", [
        ("Date", HTTP_DATE), ("Server", "Apache/2.4.57 (Debian)"), ("Location", url), ("Content-Length", "0"),
        ("Content-Type", "text/html; charset=iso-8859-1"), ("Connection", "close")]), DATE)


def _revisit(url: str) -> bytes:
    http = http_response(b"", "304 Not Modified", [("Date", HTTP_DATE), ("Server", "Apache/2.4.57 (Debian)"),
                                                    ("ETag", '"revisit"'), ("Connection", "close")])
    return warc_record("revisit", http, [("WARC-Record-ID", record_id(url, "revisit")), ("WARC-Date", DATE),
                                         ("WARC-Target-URI", url), ("WARC-Profile",
                                          "http://netpreserve.org/warc/1.1/revisit/server-not-modified"),
                                         ("WARC-Refers-To", record_id(url, "response")),
                                         ("Content-Type", "application/http; msgtype=response")])


def _wet_text(html: str) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=False, alt_texts=False)  # CC's WET: all text, no main-content


def build_demo_warc(corpus: Any, out: Path, per_component: int = 24, wet_per_component: int = 4,
                    files_per_lang: int = 2, br: bool = True) -> dict[str, int]:
    """Write the WARC/WET copy of ``corpus`` (a ``DemoCorpus``) into ``out``; returns counts by kind.
    ``br=False`` sends no brotli bodies (for readers that cannot decode them: bench/bench_warc.py)."""
    pages: dict[str, list[dict[str, Any]]] = {lang: [] for lang in COMPONENTS}
    wet: dict[str, list[dict[str, Any]]] = {lang: [] for lang in COMPONENTS}
    by_comp: dict[str, list[dict[str, Any]]] = {}
    for domain in ("web_en", "math", "zh"):
        for r in corpus.iter_domain(domain):
            if r.get("format") == "html" and r.get("raw"):
                by_comp.setdefault(r["component"], []).append(r)
    for lang, comps in COMPONENTS.items():
        for comp in comps:
            chosen = _pick(by_comp.get(comp, []), per_component + wet_per_component)
            pages[lang] += chosen[:per_component]
            wet[lang] += chosen[per_component:]
    counts = {"pages": 0, "redirects": 0, "revisits": 0, "wet": 0, "files": 0}
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for lang in COMPONENTS:
            (tmp / lang).mkdir(parents=True)
            n_files = min(files_per_lang, max(1, len(pages[lang]) // 20)) if pages[lang] else 0
            for f in range(n_files):
                name = f"CC-DEMO-{lang}-{f:05d}.warc.gz"
                members = [gzip_member(warcinfo(name, DATE))]
                for i, r in enumerate(pages[lang][f::n_files]):
                    url = _url(r)
                    k = i * n_files + f
                    if k % 10 == 5:
                        members += [gzip_member(x) for x in (triplet(_redirect(url)))]
                        counts["redirects"] += 1
                    body, ctype = _encode(r["raw"], lang, k)
                    members += [gzip_member(x) for x in (triplet(Page(url, _response(body, ctype, k, br), DATE)))]
                    counts["pages"] += 1
                    if k % 10 == 7:
                        members.append(gzip_member(_revisit(url)))
                        counts["revisits"] += 1
                (tmp / lang / name).write_bytes(b"".join(members))
                counts["files"] += 1
            if wet[lang]:
                name = f"CC-DEMO-{lang}-00000.warc.wet.gz"
                members = [gzip_member(warcinfo(name, DATE))]
                for r in wet[lang]:
                    members.append(gzip_member(conversion(_url(r), _wet_text(r["raw"]), DATE)))
                    counts["wet"] += 1
                (tmp / lang / name).write_bytes(b"".join(members))
                counts["files"] += 1
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("demo WARC copy in %s: %s", out, counts)
    return counts
