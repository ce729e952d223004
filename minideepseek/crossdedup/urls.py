"""URL / origin dedup: documents whose normalized URL is equal keep one copy (the first in keep order).

Normalization (:func:`normalize_url`): scheme and host lowercased, ``http`` and ``https`` one scheme
(``same_scheme``, default on: a site served over both is one page, and crawls hold both), ``www.`` and
default ports dropped, ``index.html``/``index.htm`` and a trailing slash dropped, tracking query parameters
(``utm_*``, ``fbclid``, ``gclid``) removed and the rest sorted; the fragment is kept unless
``drop_fragment`` (the demo uses ``file#record`` to name records inside one file). Then the
``origin_rules`` rewrite URLs that name the same origin: by default a Sphinx page's published reST
source ``<root>/_sources/<page>.rst.txt`` becomes ``<root>/<page>.html``, so the Python docs' HTML
page and its ``.rst.txt`` twin (different text: markup, wrapping, quotes -- MinHash Jaccard ~0.5)
are one origin. Documents without a URL are never URL duplicates.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .granular_config import UrlDedupConfig

_TRACKING = re.compile(r"^(utm_.*|fbclid|gclid|mc_eid|mc_cid)$", re.I)
_DEFAULT_PORT = {"http": "80", "https": "443"}


def normalize_url(url: str, drop_fragment: bool = False, rules: Sequence[tuple[str, str]] = (),
                  same_scheme: bool = True) -> str:
    url = url.strip()
    if not url:
        return ""
    try:
        p = urlsplit(url)
    except ValueError:  # unparseable: compare as written
        return url
    scheme = p.scheme.lower()
    host = (p.hostname or "").lower()
    if host.startswith("www."):
        host = host[4:]
    netloc = host
    try:
        port = p.port
    except ValueError:
        port = None
    if port is not None and str(port) != _DEFAULT_PORT.get(scheme):
        netloc = f"{host}:{port}"
    if same_scheme and scheme == "http":  # after the port check: http's :80 and https's :443 are both dropped
        scheme = "https"
    path = re.sub(r"/index\.html?$", "/", p.path or "/")
    if len(path) > 1:
        path = path.rstrip("/")
    query = urlencode(sorted((k, v) for k, v in parse_qsl(p.query, keep_blank_values=True) if not _TRACKING.match(k)))
    out = urlunsplit((scheme, netloc if p.netloc else p.netloc, path, query, "" if drop_fragment else p.fragment))
    for pat, rep in rules:
        out = re.sub(pat, rep, out)
    return out


def url_duplicates(urls: Sequence[str], eligible: Sequence[bool], keep_key: Callable[[int], Any],
                   cfg: UrlDedupConfig) -> tuple[dict[int, int], list[str]]:
    """removed doc -> kept doc (same normalized URL, the kept one first in ``keep_key`` order), and
    every document's normalized URL (empty when not eligible or without a URL)."""
    norm = [normalize_url(u, cfg.drop_fragment, cfg.origin_rules, cfg.same_scheme) if ok else ""
            for u, ok in zip(urls, eligible)]
    groups: dict[str, list[int]] = {}
    for i, u in enumerate(norm):
        if u:
            groups.setdefault(u, []).append(i)
    removed: dict[int, int] = {}
    for members in groups.values():
        if len(members) > 1:
            keep = min(members, key=keep_key)
            removed.update({i: keep for i in members if i != keep})
    return removed, norm
