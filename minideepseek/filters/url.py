"""URL blocklist: the cheapest filter (no text is read), run before everything else.

    filters:
      - {type: url}                                   # the shipped lists
      - {type: url, domains_files: [minideepseek/filters/data/url_blocklist_domains.txt,
                                    /data/ut1/adult/domains, /data/ut1/adult/urls]}

Two rules, as in FineWeb/datatrove's URL filter (which uses the UT1 blacklist):

* ``url_domain_blocklist`` -- the host, or any parent domain of it, is listed (``bad.com`` blocks
  ``x.bad.com``, not ``notbad.com``), or a ``domain/path`` entry matches: same host rule, and
  the URL path equals the entry's path or lies below it (``huggingface.co/datasets`` blocks
  ``/datasets/gsm8k``, not ``/datasets-tools`` nor ``/docs``).
* ``url_substring_blocklist`` -- a listed word occurs in the *hostname* (``porn`` ->
  ``freeporn.net``), or, for entries written ``=word``, is a whole hostname token, tokens split
  on ``.`` and ``-`` (``=sex`` -> ``free-sex.net``, not ``essex.ac.uk``). Paths are not searched:
  articles *about* casinos or sex education live on ordinary sites under telling paths, and
  word-list rules over text are known to remove such pages disproportionately (Dodge et al.
  2021). datatrove matches its banned words against the whole normalized URL; we trade that
  recall for precision and leave the rest to the domain lists.

File format (UT1): one entry per line, ``#`` comments, blank lines ignored; ``http(s)://`` and
``www.`` are stripped and everything is lowercased, on both the entries and the URLs. Relative
paths are looked up under the repository root (the parent of the ``minideepseek`` package),
then the working directory; a missing file is a :class:`ConfigError` naming it.

Documents whose origin is not an http(s) URL (``deb://``, ``pypi://``, ``file://``, empty) pass
with ``url_checked: False``: the lists describe web hosts.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ..config import ConfigError, require
from .base import DocContext, FilterResult, register

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DOMAINS_FILE = "minideepseek/filters/data/url_blocklist_domains.txt"
DEFAULT_SUBSTRINGS_FILE = "minideepseek/filters/data/url_blocklist_substrings.txt"
_TOKEN_SPLIT = re.compile(r"[.\-]")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.\-]*://")


def resolve_path(path: str) -> Path | None:
    """An existing file for ``path``: absolute as given, else under the repo root, else cwd."""
    p = Path(path).expanduser()
    candidates = [p] if p.is_absolute() else [REPO_ROOT / p, Path.cwd() / p]
    for c in candidates:
        if c.is_file():
            return c
    return None


def _read_entries(path: Path) -> list[str]:
    out = []
    with path.open(encoding="utf-8-sig", errors="replace") as fh:  # -sig: tolerate a BOM
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line)
    return out


@functools.lru_cache(maxsize=32)
def _load_file(path: str) -> tuple[str, ...]:
    """Entries of one list file, cached per process: UT1's adult list is ~4M lines (~3 s to read),
    and several sources usually share it."""
    return tuple(_read_entries(Path(path)))


def _strip_www(host: str) -> str:
    return host[4:] if host.startswith("www.") else host


def normalize_entry(entry: str) -> tuple[str, str]:
    """``(host, path_prefix)`` of a list entry; ``path_prefix`` is ``""`` for a domain entry."""
    e = _SCHEME.sub("", entry.strip().lower())
    host, _, path = e.partition("/")
    host = _strip_www(host.split(":", 1)[0].strip("."))  # ".bad.com" (hosts-file style) = bad.com
    path = path.strip("/")
    return host, ("/" + path if path else "")


def host_of(url: str) -> str | None:
    """Lowercased hostname without ``www.``, port or trailing dot; ``None`` for non-http URLs."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
        if parts.scheme.lower() not in ("http", "https"):
            return None
        host = parts.hostname  # lowercased, no userinfo/port, IPv6 without brackets
    except ValueError:
        return None
    if not host:
        return None
    host = host.rstrip(".")
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")  # lists hold punycode
        except UnicodeError:
            pass
    return _strip_www(host)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class UrlBlocklistConfig:
    domains_files: tuple[str, ...] = (DEFAULT_DOMAINS_FILE,)
    substrings_files: tuple[str, ...] = (DEFAULT_SUBSTRINGS_FILE,)
    domains: tuple[str, ...] = ()  # inline entries, same syntax as a line of a domains file
    substrings: tuple[str, ...] = ()  # inline entries, same syntax as a line of a substrings file

    def __post_init__(self) -> None:
        for key in ("domains_files", "substrings_files"):
            for p in getattr(self, key):
                if resolve_path(p) is None:
                    where = sorted({str(REPO_ROOT), str(Path.cwd())}) if not Path(p).is_absolute() else [p]
                    raise ConfigError(
                        f"url.{key}: file {p!r} not found (looked in {', '.join(where)}); "
                        "give an existing path (UT1 format: one domain per line, # comments), or remove it"
                    )
        for d in self.domains:
            require(
                bool(normalize_entry(d)[0]),
                f"url.domains: {d!r} has no domain; write entries like bad.com or site.org/path",
            )
        for s in self.substrings:
            require(bool(s.strip().lstrip("=")), f"url.substrings: {s!r} is empty; write a word such as casino or =sex")


@register
class UrlBlocklist:
    """Drop documents whose URL host (or host + path prefix) or hostname words are blocklisted."""

    name: ClassVar[str] = "url"
    Config: ClassVar[type] = UrlBlocklistConfig

    def __init__(self, cfg: UrlBlocklistConfig | None = None) -> None:
        self.cfg = cfg = cfg or UrlBlocklistConfig()
        domain_entries: list[str] = []
        for p in cfg.domains_files:
            domain_entries.extend(_load_file(str(resolve_path(p))))
        domain_entries.extend(cfg.domains)
        self.domains: set[str] = set()
        self.prefixes: dict[str, tuple[str, ...]] = {}
        prefixes: dict[str, set[str]] = {}
        for e in domain_entries:
            host, path = normalize_entry(e)
            if not host:
                continue
            if path:
                prefixes.setdefault(host, set()).add(path)
            else:
                self.domains.add(host)
        self.prefixes = {h: tuple(sorted(ps)) for h, ps in prefixes.items()}

        word_entries: list[str] = []
        for p in cfg.substrings_files:
            word_entries.extend(_load_file(str(resolve_path(p))))
        word_entries.extend(cfg.substrings)
        subs, tokens = set(), set()
        for w in word_entries:
            w = w.strip().lower()
            if w.startswith("="):
                if w[1:]:
                    tokens.add(w[1:])
            elif w:
                subs.add(w)
        self.substrings: tuple[str, ...] = tuple(sorted(subs))
        self.tokens: frozenset[str] = frozenset(tokens)
        # One alternation instead of a loop over words: C speed for long lists.
        self._sub_re = re.compile("|".join(re.escape(s) for s in self.substrings)) if self.substrings else None

    def _suffixes(self, host: str) -> list[str]:
        """The host and its parent domains: a.b.com -> [a.b.com, b.com, com]; an IP only itself."""
        if _is_ip(host):
            return [host]
        labels = host.split(".")
        return [".".join(labels[i:]) for i in range(len(labels))]

    def check(self, url: str) -> tuple[str, dict[str, Any]]:
        """``(reason, signals)`` for one URL; reason ``""`` when it passes."""
        host = host_of(url)
        if host is None:
            return "", {"url_checked": False}
        signals: dict[str, Any] = {"url_checked": True}
        suffixes = self._suffixes(host)
        for dom in suffixes:
            if dom in self.domains:
                signals["url_blocked_by"] = dom
                return "url_domain_blocklist", signals
        if self.prefixes:
            try:
                path = urlsplit(url.strip()).path.lower().rstrip("/")
            except ValueError:
                path = ""
            for dom in suffixes:
                for pre in self.prefixes.get(dom, ()):
                    if path == pre or path.startswith(pre + "/"):
                        signals["url_blocked_by"] = dom + pre
                        return "url_domain_blocklist", signals
        if self._sub_re is not None:
            m = self._sub_re.search(host)
            if m:
                signals["url_blocked_by"] = m.group(0)
                return "url_substring_blocklist", signals
        if self.tokens:
            for tok in _TOKEN_SPLIT.split(host):
                if tok in self.tokens:
                    signals["url_blocked_by"] = "=" + tok
                    return "url_substring_blocklist", signals
        return "", signals

    def __call__(self, text: str, ctx: DocContext) -> FilterResult:
        reason, signals = self.check(ctx.url)
        return FilterResult(keep=not reason, reason=reason, signals=signals)
