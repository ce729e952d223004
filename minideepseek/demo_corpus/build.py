"""Build the demo corpus into the cache: raw records per domain, gzipped JSONL, plus a manifest.

Layout of a build (``<cache>/demo_corpus/v{BUILDER_VERSION}-{tiers}/``)::

    web_en.jsonl.gz code.jsonl.gz math.jsonl.gz academic.jsonl.gz zh.jsonl.gz
    manifest.json        # written last: its presence means the build is complete

The build is written into a sibling temp dir and renamed into place, so a killed build leaves
nothing that looks complete. Output is byte-identical across runs with the same packages:
records are sorted by ``doc_key`` within a component, components keep the table order, and
gzip headers carry no name or mtime.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import logging
import os
import platform
import re
import shutil
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from .components import DOMAINS, FORMATS, Component, Doc, Notes, default_components
from .fetch import Fetcher, Shortfall, sha256_file
from .pins import Expected, IntegrityError

log = logging.getLogger("minideepseek.demo_corpus")

# Bump when the selection or record layout changes: old builds stay valid under their own name.
BUILDER_VERSION = 2
# A *derived* corpus (the scale bench's recombination of the demo corpus, ``manifest["derived"]``) has
# records no pin can hash; stages read one only with this variable set to 1, so an altered cache cannot
# pass as one by adding the marker (the scale bench sets it for the stages it runs)
DERIVED_ENV = "MINIDEEPSEEK_ALLOW_DERIVED_CORPUS"
TIERS: tuple[str, ...] = ("portable", "debian")
MANIFEST = "manifest.json"


def default_cache_dir() -> Path:
    """``$MINIDEEPSEEK_CACHE`` or ``~/.cache/minideepseek``."""
    env = os.environ.get("MINIDEEPSEEK_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "minideepseek"


def normalize_tiers(tiers: Iterable[str]) -> tuple[str, ...]:
    """Validate tiers and put them in canonical order, so ``debian,portable`` shares a build."""
    wanted = {t.strip() for t in tiers if t.strip()}
    unknown = wanted - set(TIERS)
    if unknown or not wanted:
        raise ValueError(f"tiers must be a non-empty subset of {TIERS}, got {sorted(wanted)}")
    return tuple(t for t in TIERS if t in wanted)


def corpus_root(cache_dir: Path, tiers: tuple[str, ...]) -> Path:
    return cache_dir / "demo_corpus" / f"v{BUILDER_VERSION}-{'+'.join(tiers)}"


@dataclass(frozen=True)
class DemoCorpus:
    """A complete build: its directory and manifest, and readers for its domain files."""

    root: Path
    manifest: dict[str, Any]

    @classmethod
    def load(cls, root: Path) -> DemoCorpus:
        return cls(root, json.loads((root / MANIFEST).read_text(encoding="utf-8")))

    def domain_path(self, domain: str) -> Path | None:
        """``root/f"{domain}.jsonl.gz"``, or None when the domain got no documents. The manifest names the
        file; any other name (a path, ``..``) is refused: the manifest lives in a cache others may write."""
        if domain not in DOMAINS:
            raise KeyError(f"unknown domain {domain!r}; expected one of {DOMAINS}")
        name = self.manifest["domains"][domain]["file"]
        if name and name != f"{domain}.jsonl.gz":
            raise IntegrityError(f"{self.root / MANIFEST}: domain {domain} names the file {name!r}, not "
                                 f"{domain}.jsonl.gz; the cached build was altered: delete {self.root} to rebuild it")
        return self.root / name if name else None

    def iter_domain(self, domain: str) -> Iterator[dict[str, Any]]:
        """Raw records of one domain in their stable on-disk order."""
        path = self.domain_path(domain)
        if path is None:
            return
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                yield json.loads(line)

    @property
    def shortfalls(self) -> list[dict[str, Any]]:
        return self.manifest["shortfalls"]

    @property
    def integrity_warnings(self) -> list[str]:
        """Drift / unpinned packages (pins.py): empty when every download matched the expected list."""
        return list(self.manifest.get("integrity", {}).get("warnings", []))

    def require_pinned(self) -> None:
        """``demo_corpus.strict``: any drift or unpinned package is an error, not a warning."""
        if self.integrity_warnings:
            raise IntegrityError(f"demo_corpus.strict: {len(self.integrity_warnings)} package(s) differ from "
                                 f"the expected list: " + " | ".join(self.integrity_warnings))


def _integrity(infos: list[dict[str, Any]], expected: Expected) -> dict[str, Any]:
    # dict.fromkeys: one package can feed several components, one line each is enough
    return {"expected": expected.path, "warnings": list(dict.fromkeys(w for i in infos for w in i.get("warnings", []))),
            "verified": sum(1 for i in infos if i.get("file") and not i.get("warnings"))}


_COMPONENT = re.compile(rb'^\{"doc_key": "(?:[^"\\]|\\.)*", "domain": "[a-z_]+", "component": "([A-Za-z0-9_.+-]+)"')


def record_hashes(corpus: DemoCorpus) -> dict[str, tuple[str, int]]:
    """Component -> (sha256 of its records as written, count), read back from the domain files: what
    each component's ``content_sha256`` must be. Raises IntegrityError for a line that is no record."""
    digests: dict[str, Any] = {}
    counts: dict[str, int] = {}
    for domain in corpus.manifest["domains"]:
        path = corpus.domain_path(domain)
        if path is None:
            continue
        with gzip.open(path, "rb") as fh:
            for k, line in enumerate(fh, 1):
                m = _COMPONENT.match(line)
                if m is None:
                    raise IntegrityError(f"{path}: line {k:,} is not a demo corpus record; the cached build was "
                                         f"altered: delete {corpus.root} to rebuild it")
                name = m.group(1).decode("ascii")
                digests.setdefault(name, hashlib.sha256()).update(line)
                counts[name] = counts.get(name, 0) + 1
    return {n: (d.hexdigest(), counts[n]) for n, d in digests.items()}


def verify_files(corpus: DemoCorpus) -> None:
    """Each domain file of a build against the sha256 its manifest recorded."""
    for domain, d in corpus.manifest["domains"].items():
        path = corpus.domain_path(domain)
        if path is not None and d.get("file_sha256"):
            found = sha256_file(path)
            if found != d["file_sha256"]:
                raise IntegrityError(f"{path}: sha256 mismatch for the cached demo corpus domain {domain}: expected "
                                     f"{d['file_sha256']} (its manifest), found {found}. The cached build was altered: "
                                     f"delete {corpus.root} to rebuild it (downloads are reused and checked)")


def verify_records(corpus: DemoCorpus) -> dict[str, tuple[str, int]]:
    """A build's files against its own manifest: each domain file's sha256 (``verify_files``), and each
    component's records (read back) against its ``content_sha256`` and count; returns the component hashes."""
    verify_files(corpus)
    got = record_hashes(corpus)
    listed = {i["component"]: i for i in corpus.manifest["components"] if i.get("status") == "ok"}
    for name, (sha, n) in sorted(got.items()):
        info = listed.get(name)
        if info is None or info.get("content_sha256") != sha or info.get("n_docs") != n:
            raise IntegrityError(f"{corpus.root}: the records of component {name} ({n:,}, sha256 {sha}) are not what "
                                 f"the build recorded; the cached build was altered: delete {corpus.root} to rebuild it")
    for name in listed:
        if name not in got:
            raise IntegrityError(f"{corpus.root}: component {name} has no records in its domain file; the cached "
                                 f"build was altered: delete {corpus.root} to rebuild it")
    return got


def _recheck_cached(corpus: DemoCorpus, expected: Expected) -> None:
    """A reused build: its files must match its manifest (``verify_records``), and every component's
    records must hash as the repo pins them (``expected.content``: a manifest rewritten along with the
    records does not pass; a component the repo does not pin is an ``unpinned`` warning, an error under
    ``demo_corpus.strict``); its packages are checked again against the (possibly re-pinned) expected
    list. Warnings are refreshed in memory only (the cache may be read-only)."""
    if corpus.manifest.get("derived") is not None:
        # a derived corpus's manifest hashed its records from the files it wrote (bench_scale.py), and no pin
        # names them: when every domain file's sha256 matches, re-hashing their records proves nothing more
        # (at 1B tokens that re-read was ~4 of the 4.5 minutes stage 1 spent checking the cache)
        whole = all(d.get("file_sha256") for name, d in corpus.manifest["domains"].items()
                    if corpus.domain_path(name) is not None)
        if whole:
            verify_files(corpus)
        else:
            verify_records(corpus)
        _recheck_derived(corpus, expected)
        return
    got = verify_records(corpus)
    for info in corpus.manifest["components"]:
        if info.get("status") != "ok":
            continue
        warnings = []
        if info.get("file") and info.get("sha256"):
            warnings = expected.check(info["source"], info["package"], info["version"], info["file"], info["sha256"],
                                      info.get("path") or info["file"])
        info["warnings"] = warnings + expected.check_content(
            corpus.manifest.get("builder_version", BUILDER_VERSION), info["component"], str(info["version"]),
            got[info["component"]][0], str(corpus.root))
    corpus.manifest["integrity"] = _integrity(corpus.manifest["components"], expected)


def _recheck_derived(corpus: DemoCorpus, expected: Expected) -> None:
    """A derived corpus (its records already match its own manifest): allowed only under ``DERIVED_ENV``,
    and the demo-corpus records it says it was made from must hash as the repo pins them."""
    derived = corpus.manifest["derived"]
    if os.environ.get(DERIVED_ENV) != "1":
        raise IntegrityError(f"{corpus.root}: this cache holds a corpus derived by {derived.get('by', '?')} from the "
                             f"demo corpus, not the pinned demo corpus itself; set {DERIVED_ENV}=1 to read it on "
                             f"purpose, or point MINIDEEPSEEK_CACHE / run.cache_dir at the demo corpus's cache")
    builder = corpus.manifest.get("builder_version", BUILDER_VERSION)
    for name, src in sorted(derived.get("from_components", {}).items()):
        # raises on a source hash the repo pins otherwise; an unpinned source is a warning as usual
        src["warnings"] = expected.check_content(builder, name, str(src.get("version")), str(src.get("content_sha256")),
                                                 str(corpus.root))
    warnings = [w for s in derived.get("from_components", {}).values() for w in s["warnings"]]
    corpus.manifest["integrity"] = {"expected": expected.path, "warnings": list(dict.fromkeys(warnings)),
                                    "derived": f"records made by {derived.get('by', '?')} from the demo corpus "
                                               f"(checked against their own manifest; their sources against the "
                                               f"repo's pins)"}
    log.warning("demo corpus: %s is a derived corpus (%s); read because %s=1", corpus.root,
                derived.get("by", "?"), DERIVED_ENV)


def to_record(doc: Doc, comp: Component, license: str) -> tuple[dict[str, Any], int]:
    """The JSON record of a doc, and its raw UTF-8 byte count (-1 if not valid UTF-8).

    Invalid UTF-8 is never repaired here: ``raw`` is None and the bytes travel as ``raw_b64``,
    so the downstream stage can count and reject it (reason ``invalid_utf8``).
    """
    if doc.fmt not in FORMATS:
        raise ValueError(f"{doc.doc_key}: unknown format {doc.fmt!r}")
    data = doc.data
    raw: str | None
    if isinstance(data, str):
        try:
            n_bytes = len(data.encode("utf-8"))
            raw = data
        except UnicodeEncodeError:  # lone surrogates, e.g. from a JSON "\ud800" escape
            data, raw = data.encode("utf-8", "surrogatepass"), None
    else:
        try:
            raw, n_bytes = data.decode("utf-8"), len(data)
        except UnicodeDecodeError:
            raw = None
    rec: dict[str, Any] = {
        "doc_key": doc.doc_key, "domain": comp.domain, "component": comp.name, "format": doc.fmt,
        "url": doc.url, "license": license, "title": doc.title, "raw": raw,
    }
    if raw is None:
        assert isinstance(data, bytes)
        rec["raw_b64"] = base64.b64encode(data).decode("ascii")
        return rec, -1
    return rec, n_bytes


def _component_info(comp: Component) -> dict[str, Any]:
    src = comp.source
    return {
        "component": comp.name, "domain": comp.domain, "tier": comp.tier, "status": "ok",
        "reason": None, "source": src.kind, "package": src.name, "version": src.version,
        "file": None, "path": None, "sha256": None, "license": comp.license, "n_docs": 0,
        "n_bytes": 0, "n_invalid_utf8": 0, "skipped": {}, "content_sha256": None, "seconds": 0.0,
        "warnings": [],
    }


def build_component(comp: Component, fetcher: Fetcher) -> tuple[list[bytes], dict[str, Any]]:
    """Fetch, collect and serialize one component; any failure becomes a shortfall entry."""
    t0 = time.perf_counter()
    info = _component_info(comp)
    lines: list[bytes] = []
    try:
        pkg = fetcher.open(comp.source)
        info.update(version=pkg.version, path=str(pkg.file), sha256=pkg.sha256,
                    file=None if pkg.file.is_dir() else pkg.file.name, warnings=list(pkg.warnings))
        for w in pkg.warnings:
            log.warning("%s: %s", comp.name, w)
        notes = Notes()
        docs = sorted(comp.collect(pkg, notes), key=lambda d: d.doc_key)
        info["skipped"] = dict(sorted(notes.skipped.items()))
        if not docs:
            raise Shortfall(f"nothing matched in {pkg.file.name} (skipped: {info['skipped']})")
        license = notes.license or comp.license
        info["license"] = license
        digest = hashlib.sha256()
        for prev, doc in zip([None, *docs], docs):
            if prev is not None and prev.doc_key == doc.doc_key:
                raise ValueError(f"duplicate doc_key {doc.doc_key}")
            rec, n_bytes = to_record(doc, comp, license)
            line = (json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8")
            digest.update(line)
            lines.append(line)
            if n_bytes < 0:
                info["n_invalid_utf8"] += 1
            else:
                info["n_bytes"] += n_bytes
        info.update(n_docs=len(lines), content_sha256=digest.hexdigest())
        # the records too are checked against the repo's pins (the same check a reused build gets)
        content = fetcher.expected.check_content(BUILDER_VERSION, comp.name, str(info["version"]),
                                                 info["content_sha256"], str(pkg.file))
        info["warnings"] = list(info["warnings"]) + content
        for w in content:
            log.warning("%s: %s", comp.name, w)
    except IntegrityError:
        raise  # a file with the wrong hash stops the build: it is never a quiet shortfall
    except Shortfall as exc:
        lines = []
        info.update(status="shortfall", reason=str(exc), n_bytes=0, n_invalid_utf8=0)
    except Exception as exc:  # a broken source must not take the other 30 down with it
        log.debug("component %s failed", comp.name, exc_info=True)
        lines = []
        info.update(status="shortfall", reason=f"{type(exc).__name__}: {exc}", n_bytes=0,
                    n_invalid_utf8=0)
    info["seconds"] = round(time.perf_counter() - t0, 2)
    if info["status"] == "ok":
        log.info("%-22s %7s docs %7.2f MB  %.1fs", comp.name, f"{info['n_docs']:,}",
                 info["n_bytes"] / 1e6, info["seconds"])
    else:
        log.warning("%-22s shortfall: %s", comp.name, info["reason"])
    return lines, info


class _GzipJsonl:
    """Deterministic gzip writer: no file name and mtime 0 in the header."""

    def __init__(self, path: Path) -> None:
        self._fh = path.open("wb")
        self._gz = gzip.GzipFile(filename="", mode="wb", fileobj=self._fh, mtime=0, compresslevel=6)

    def write_lines(self, lines: list[bytes]) -> None:
        for line in lines:
            self._gz.write(line)

    def close(self) -> None:
        self._gz.close()
        self._fh.close()


def _write_manifest(path: Path, manifest: dict[str, Any]) -> None:
    path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _domain_summary(out: Path, infos: list[dict[str, Any]], tiers: tuple[str, ...]) -> tuple[dict, list]:
    domains: dict[str, Any] = {}
    shortfalls = [{"domain": i["domain"], "component": i["component"], "tier": i["tier"],
                   "reason": i["reason"]} for i in infos if i["status"] != "ok"]
    for domain in DOMAINS:
        mine = [i for i in infos if i["domain"] == domain]
        ok = [i for i in mine if i["status"] == "ok"]
        file = out / f"{domain}.jsonl.gz"
        domains[domain] = {
            "file": file.name if ok else None,
            "n_docs": sum(i["n_docs"] for i in ok), "n_bytes": sum(i["n_bytes"] for i in ok),
            "n_invalid_utf8": sum(i["n_invalid_utf8"] for i in ok),
            "components": [i["component"] for i in ok],
            "file_bytes": file.stat().st_size if ok else 0,
            "file_sha256": hashlib.sha256(file.read_bytes()).hexdigest() if ok else None,
        }
        if not ok:
            why = "all its components fell short" if mine else f"no component in tiers {'+'.join(tiers)}"
            shortfalls.append({"domain": domain, "component": None, "tier": None,
                               "reason": f"domain has no documents: {why}"})
    return domains, shortfalls


def _write_components(out: Path, comps: list[Component], fetcher: Fetcher) -> list[dict[str, Any]]:
    writers: dict[str, _GzipJsonl] = {}
    infos = []
    try:
        for comp in tqdm(comps, desc="demo corpus", unit="component", disable=None):
            lines, info = build_component(comp, fetcher)
            infos.append(info)
            if lines:
                if comp.domain not in writers:
                    writers[comp.domain] = _GzipJsonl(out / f"{comp.domain}.jsonl.gz")
                writers[comp.domain].write_lines(lines)
    finally:
        for writer in writers.values():
            writer.close()
    return infos


def _swap_into_place(tmp: Path, root: Path) -> None:
    """Rename the finished temp dir to ``root``; an old build is moved aside first."""
    if root.exists():
        old = root.with_name(f".{root.name}.old-{os.getpid()}")
        os.replace(root, old)
        os.replace(tmp, root)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, root)


def build_demo_corpus(
    cache_dir: Path | None = None,
    tiers: tuple[str, ...] = TIERS,
    force: bool = False,
    expected: Expected | None = None,
) -> DemoCorpus:
    """Build (or return the cached) demo corpus for ``tiers``.

    ``force`` rebuilds the corpus but still reuses cached downloads. Components that cannot be
    built are listed in ``manifest["shortfalls"]`` with the reason; the build itself only fails
    on errors of the cache directory (disk full, permissions).
    """
    cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    expected = expected if expected is not None else Expected.load()
    tiers = normalize_tiers(tiers)
    root = corpus_root(cache_dir, tiers)
    if not force and (root / MANIFEST).is_file():
        log.info("demo corpus cached at %s", root)
        corpus = DemoCorpus.load(root)
        _recheck_cached(corpus, expected)
        for w in corpus.integrity_warnings:
            log.warning("demo corpus: %s", w)
        return corpus

    t0 = time.perf_counter()
    comps = [c for c in default_components() if c.tier in tiers]
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = root.with_name(f".{root.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        fetcher = Fetcher(cache_dir / "downloads", expected)
        fetcher.prefetch([c.source for c in comps])
        infos = _write_components(tmp, comps, fetcher)
        domains, shortfalls = _domain_summary(tmp, infos, tiers)
        manifest = {
            "builder_version": BUILDER_VERSION,
            "tiers": list(tiers),
            "python": {"version": platform.python_version(),
                       "implementation": sys.implementation.name, "executable": sys.executable},
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "build_seconds": round(time.perf_counter() - t0, 2),
            "domains": domains,
            "components": infos,
            "shortfalls": shortfalls,
            "integrity": _integrity(infos, expected),
        }
        _write_manifest(tmp / MANIFEST, manifest)
        _swap_into_place(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("demo corpus built at %s in %.1fs", root, manifest["build_seconds"])
    return DemoCorpus(root, manifest)


def format_summary(corpus: DemoCorpus) -> str:
    """Per-domain table (docs, MB, shortfalls) and the list of shortfalls with reasons."""
    man = corpus.manifest
    rows = [f"{'domain':<10} {'docs':>9} {'MB':>8} {'components':>10} {'shortfalls':>10}"]
    for domain, d in man["domains"].items():
        short = sum(1 for s in man["shortfalls"] if s["domain"] == domain and s["component"])
        rows.append(f"{domain:<10} {d['n_docs']:>9,} {d['n_bytes'] / 1e6:>8.2f} "
                    f"{len(d['components']):>10} {short:>10}")
    tot_docs = sum(d["n_docs"] for d in man["domains"].values())
    tot_mb = sum(d["n_bytes"] for d in man["domains"].values()) / 1e6
    rows.append(f"{'total':<10} {tot_docs:>9,} {tot_mb:>8.2f}")
    for s in man["shortfalls"]:
        rows.append(f"shortfall {s['domain']}/{s['component'] or '*'}: {s['reason']}")
    for w in corpus.integrity_warnings:
        rows.append(f"WARNING {w}")
    rows.append(f"corpus: {corpus.root} (tiers {'+'.join(man['tiers'])}, "
                f"built in {man['build_seconds']:.1f}s at {man['built_at']})")
    return "\n".join(rows)
