"""``type: local`` — JSONL (.jsonl/.json, optionally .gz/.zst), Parquet, and directories of plain
text or HTML files (one document per file).

The whole listing is read into memory so the sample is an exact seeded permutation. For corpora
larger than memory use ``type: hf`` with ``path: json`` and ``data_files``: the same files, streamed
through ``datasets`` with a shuffle buffer.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ..config import ConfigError
from ..records import RawDoc
from ..stage import InputRef, sha256_file
from .base import permuted
from .config import SourceConfig

log = logging.getLogger(__name__)

_JSONL = (".jsonl", ".json", ".jsonl.gz", ".json.gz", ".jsonl.zst", ".json.zst")
_TEXT = (".txt", ".md", ".rst", ".tex")
_HTML = (".html", ".htm", ".xhtml")


def _kind(path: Path, fmt: str) -> str | None:
    if fmt != "auto":
        return fmt
    name = path.name.lower()
    if name.endswith(_JSONL):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(_HTML):
        return "html"
    if name.endswith(_TEXT):
        return "text"
    return None


def _open_text(path: Path) -> io.TextIOBase:
    name = path.name.lower()
    if name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="surrogateescape")
    if name.endswith(".zst"):
        import zstandard

        raw = zstandard.ZstdDecompressor().stream_reader(path.open("rb"))
        return io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape")
    return path.open(encoding="utf-8", errors="surrogateescape", newline="")


class LocalSource:
    def __init__(self, cfg: SourceConfig, seed: int) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.seed = seed
        root = Path(cfg.path).expanduser()
        if not root.exists():
            raise ConfigError(f"sources.{cfg.name}.path={cfg.path!r} does not exist; point it at a file or directory")
        files = [root] if root.is_file() else sorted(p for p in root.glob(cfg.glob) if p.is_file())
        self.files = [(p, k) for p in files if (k := _kind(p, cfg.format)) is not None]
        if not self.files:
            raise ConfigError(f"sources.{cfg.name}: no readable files under {root} (glob {cfg.glob!r}); "
                              f"supported: {_JSONL + ('.parquet',) + _TEXT + _HTML}, or set format:")
        self.root = root
        self._records: list[RawDoc] | None = None

    def input_ref(self) -> InputRef:
        h = hashlib.sha256()
        for p, _ in self.files:
            h.update(f"{p.relative_to(self.root) if p != self.root else p.name}\0{sha256_file(p)}\n".encode())
        return InputRef(name=f"source:{self.name}", path=str(self.root), fingerprint=h.hexdigest(),
                        detail={"files": len(self.files)})

    def _load(self) -> list[RawDoc]:
        if self._records is None:
            recs: list[RawDoc] = []
            for path, kind in self.files:
                recs.extend(self._read_file(path, kind))
            log.info("source %s: %s records from %s files", self.name, f"{len(recs):,}", len(self.files))
            self._records = recs
        return self._records

    def iter_raw(self, epoch: int) -> Iterator[RawDoc]:
        recs = self._load()
        for i in permuted(len(recs), self.seed, self.name, epoch):
            yield recs[i]

    def _read_file(self, path: Path, kind: str) -> Iterator[RawDoc]:
        rel = path.name if path == self.root else path.relative_to(self.root).as_posix()
        if kind == "jsonl":
            yield from self._read_jsonl(path, rel)
        elif kind == "parquet":
            for i, row in enumerate(pq.read_table(path).to_pylist()):
                yield self._from_row(row, f"{rel}#{i}")
        else:
            data = path.read_bytes()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield RawDoc(source_id=rel, text=None, raw_bytes=data, url=f"file://{path}",
                             license=self.cfg.license, error=f"invalid_utf8: {exc}")
                return
            yield RawDoc(source_id=rel, text=text, fmt="html" if kind == "html" else self.cfg.fmt,
                         url=f"file://{path}", license=self.cfg.license, lang=self.cfg.lang)

    def _read_jsonl(self, path: Path, rel: str) -> Iterator[RawDoc]:
        with _open_text(path) as fh:
            for i, line in enumerate(fh):
                key = f"{rel}#{i}"
                if not line.strip():
                    continue
                try:
                    line.encode("utf-8")
                except UnicodeEncodeError:
                    raw = line.encode("utf-8", "surrogateescape")
                    yield RawDoc(source_id=key, text=None, raw_bytes=raw, error="invalid_utf8: undecodable bytes",
                                 url=f"file://{path}#L{i + 1}", license=self.cfg.license)
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield RawDoc(source_id=key, text=line[:200], error=f"malformed: {exc.msg} at col {exc.colno}",
                                 url=f"file://{path}#L{i + 1}", license=self.cfg.license)
                    continue
                if not isinstance(row, dict):
                    yield RawDoc(source_id=key, text=None, error="malformed: JSON line is not an object",
                                 url=f"file://{path}#L{i + 1}", license=self.cfg.license)
                    continue
                yield self._from_row(row, key, default_url=f"file://{path}#L{i + 1}")

    def _from_row(self, row: dict[str, Any], key: str, default_url: str = "") -> RawDoc:
        return row_to_raw(row, key, self.cfg, default_url)


def row_to_raw(row: dict[str, Any], key: str, cfg: SourceConfig, default_url: str = "") -> RawDoc:
    """Map one row (JSONL, Parquet, or a hub dataset) onto RawDoc via the source's field mapping."""
    sid = str(row[cfg.id_field]) if cfg.id_field and row.get(cfg.id_field) is not None else key
    url = str(row.get(cfg.url_field) or "") if cfg.url_field else str(row.get("url") or default_url)
    text = row.get(cfg.text_field)
    if text is None:
        return RawDoc(source_id=sid, text=None, url=url, license=cfg.license,
                      error=f"missing_text: no field {cfg.text_field!r}; row has {sorted(row)[:12]}")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            return RawDoc(source_id=sid, text=None, raw_bytes=text, url=url, license=cfg.license,
                          error=f"invalid_utf8: {exc}")
    if not isinstance(text, str):
        return RawDoc(source_id=sid, text=None, url=url, license=cfg.license,
                      error=f"malformed: field {cfg.text_field!r} is {type(text).__name__}, not text")
    lic = str(row.get("license") or cfg.license)
    return RawDoc(source_id=sid, text=text, fmt=cfg.fmt, url=url, license=lic, lang=cfg.lang)
