"""``type: local`` — JSONL (.jsonl/.json, gzip or zstd), Parquet, Arrow IPC, and directories of plain
text or HTML files (one document per file).

Ingestion policy (README "Stage 1", DESIGN.md "Stage contract"): a JSONL line is a record only if it
is valid UTF-8 and valid JSON that is an object; its text field must be a non-blank string that
encodes to UTF-8, without NUL and with at most 1% control characters. Every other line is a
``Reject`` with a fixed reason, its file, its 1-based line number and byte offset, written to
``rejects.jsonl``; blank lines are counted per file. Problems of a whole file (cut-off stream,
corrupt Parquet, empty input, unreadable) are ``FileReport`` entries; the source's other files go
on. A wrong ``text_field`` (no record of the source has it) is a config error naming the fields
that are there, whatever the source's size.

Every file is read and validated up front, so the counts cover the whole source, not only the
records the sampler reached. The valid records (and the ingestion rejects) are spooled to an
uncompressed file as they are read (``spool.RecordSpool``; in stage 1 inside the stage's tmp dir,
removed before it commits): memory holds 8 bytes per record, not the record, and the sample is still
an exact seeded permutation of all of them, read back by offset. Disk: about the valid records' raw
size while stage 1 runs. ``type: hf`` with ``path: json`` and ``data_files`` streams the same files
through ``datasets`` with a shuffle buffer instead (no spool, an approximate shuffle).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifact import InputRef
from ..config import ConfigError
from ..fsio import printable, sha256_file
from ..records import RawDoc, Reject, lone_surrogate_field, snippet, validate_text
from ..rng import permuted
from .config import SourceConfig
from .entries import Entry, check, display, recheck
from .lines import FileProblem, LineReader
from .spool import RecordSpool

log = logging.getLogger(__name__)

_JSONL = (".jsonl", ".json", ".ndjson", ".jsonl.gz", ".json.gz", ".ndjson.gz", ".jsonl.zst", ".json.zst",
          ".ndjson.zst")
_TEXT = (".txt", ".md", ".rst", ".tex")
_HTML = (".html", ".htm", ".xhtml")
_ARROW = (".arrow", ".feather", ".ipc")
_BATCH = 1024
# A JSON line of more than this many bytes per allowed character cannot hold a text within
# max_chars even when every character is \uXXXX-escaped (6 bytes); +1 MiB for the other fields.
_ESCAPED_BYTES_PER_CHAR = 6
_LINE_SLACK = 1 << 20


def _kind(path: Path, fmt: str) -> str | None:
    if fmt != "auto":
        return fmt
    name = path.name.lower()
    if name.endswith(_JSONL):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(_ARROW):
        return "arrow"
    if name.endswith(_HTML):
        return "html"
    if name.endswith(_TEXT):
        return "text"
    return None


@dataclass
class FileReport:
    """What ingestion saw in one file: lines, records kept, rejects by reason, file-level problem."""

    file: str
    kind: str
    compression: str = "none"
    lines: int = 0  # JSONL lines (incl. blank); rows for Parquet/Arrow; 1 for a text file
    records: int = 0  # valid records handed to the sampler
    blank_lines: int = 0
    rejects: Counter = field(default_factory=Counter)
    # records read that are not documents by design (a WARC's request/metadata records, non-200 responses):
    # counted by reason, not rejects (they are no damage and are not charged to the error budget)
    skipped: Counter = field(default_factory=Counter)
    status: str = "ok"  # ok | truncated | corrupt | empty | unreadable | unsupported | skipped (never opened)
    problem: str = ""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "kind": self.kind, "compression": self.compression, "status": self.status,
                "problem": self.problem, "lines": self.lines, "records": self.records,
                "blank_lines": self.blank_lines, "rejects": dict(sorted(self.rejects.items())),
                **({"skipped": dict(sorted(self.skipped.items()))} if self.skipped else {}),
                **({"notes": self.notes} if self.notes else {})}


class LocalSource:
    SUPPORTED = _JSONL + (".parquet",) + _ARROW + _TEXT + _HTML  # file names format: auto reads

    def __init__(self, cfg: SourceConfig, seed: int, max_chars: int = 2_000_000) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.seed = seed
        self.max_chars = max_chars
        self.line_limit = _ESCAPED_BYTES_PER_CHAR * max_chars + _LINE_SLACK
        root = Path(cfg.path).expanduser()
        if not root.exists():
            raise ConfigError(f"sources.{cfg.name}.path={cfg.path!r} does not exist; point it at a file or directory")
        self.root = root
        self.entries = self._list(root)
        self.files = [(e.path, e.kind) for e in self.entries if not e.problem]
        if not self.files:
            skipped = "; ".join(f"{e.rel}: {e.problem}" for e in self.entries)[:400]
            raise ConfigError(f"sources.{cfg.name}: no readable files under {display(root)} (glob {cfg.glob!r}); "
                              f"supported: {self.SUPPORTED}, or set format:"
                              + (f"; skipped: {skipped}" if skipped else ""))
        self.spool_dir: Path | None = None  # where the spools go (the stage's tmp dir); None: a tempdir
        self._records: RecordSpool[RawDoc] | None = None
        self._reset_ingestion()

    def _reset_ingestion(self) -> None:
        self.rejects: Sequence[Reject] = ()  # ingestion rejects, in file and line order (spooled by load)
        # one report per file: it stays in memory because it is part of source_mix.json (a directory
        # of text files has one per document; a few hundred bytes each)
        self.file_reports: list[FileReport] = []
        self._objects = 0  # JSON objects / table rows seen
        self._with_field = 0  # ... of which had the text field
        self._fields: Counter = Counter()  # field names seen (for the wrong-text_field message)

    def _list(self, root: Path) -> list[Entry]:
        """Every file the glob finds, checked (``entries.check``): links leaving the directory (unless
        follow_symlinks), special and virtual files are kept as skipped entries, never read."""
        follow = self.cfg.follow_symlinks
        if not root.is_dir():  # one file named by the config: it may be a link (the user's own), never special
            kind = self._file_kind(root)
            if kind is None:
                return []
            problem, ident = check(root, Path(os.path.realpath(root)), True)
            return [Entry(root, display(root.name), kind, problem, ident)]
        root_real = Path(os.path.realpath(root))
        out = []
        for p in sorted(root.glob(self.cfg.glob)):
            if p.is_dir():  # a directory (or a link to one: never descended into by the glob's **)
                continue
            kind = self._file_kind(p)
            if kind is None:
                continue
            problem, ident = check(p, root_real, follow)
            out.append(Entry(p, self._rel(p), kind, problem, ident))
        return out

    def _file_kind(self, path: Path) -> str | None:
        """How a listed file is read (None: not a file this source reads)."""
        return _kind(path, self.cfg.format)

    def input_ref(self) -> InputRef:
        h = hashlib.sha256()
        for e in self.entries:  # skipped entries count too: a link that appears or goes changes the input
            h.update(f"{e.rel}\0{e.problem or sha256_file(e.path)}\n".encode("utf-8", "backslashreplace"))
        return InputRef(name=f"source:{self.name}", path=display(self.root), fingerprint=h.hexdigest(),
                        detail={"files": len(self.files)})

    def _rel(self, path: Path) -> str:
        """The file's name in ids, reports and rejects: relative to the root, non-UTF-8 bytes escaped."""
        return display(path.name if path == self.root else path.relative_to(self.root).as_posix())

    # ---- loading -------------------------------------------------------------------------------

    def load(self) -> Sequence[RawDoc]:
        """Read and validate every file once; later calls return the same records (a read-only sequence
        backed by the spool file, in file and line order)."""
        if self._records is None:
            self._reset_ingestion()
            recs: RecordSpool[RawDoc] = RecordSpool(self.spool_dir, f"local-{self.name}")
            rejects: RecordSpool[Reject] = RecordSpool(self.spool_dir, f"local-{self.name}-rejects")
            try:
                self._ingest(recs, rejects)
            except BaseException:
                recs.close()
                rejects.close()
                raise
            self._records, self.rejects = recs.seal(), rejects.seal()
        return self._records

    def close(self) -> None:
        """Remove the spools; a later ``load``/``iter_raw`` reads and validates the files again."""
        for sp in (self._records, self.rejects):
            if isinstance(sp, RecordSpool):
                sp.close()
        self._records = None
        self.rejects = ()

    def _ingest(self, recs: RecordSpool[RawDoc], rejects: RecordSpool[Reject]) -> None:
        for entry in self.entries:
            self.file_reports.append(self._ingest_entry(entry, recs, rejects))
        self._check_text_field()
        bad = sum(sum(r.rejects.values()) for r in self.file_reports)
        log.info("source %s: %s records from %s files (%s rejected at ingestion, %s file problem(s))", self.name,
                 f"{len(recs):,}", len(self.files), f"{bad:,}",
                 sum(r.status != "ok" for r in self.file_reports))

    def _ingest_entry(self, entry: Entry, recs: RecordSpool[RawDoc], rejects: RecordSpool[Reject]) -> FileReport:
        """Read one listed file into the spools; its report (a file that cannot be read is its problem)."""
        root_real = Path(os.path.realpath(self.root if self.root.is_dir() else self.root.parent))
        follow = self.cfg.follow_symlinks or not self.root.is_dir()
        path, kind = entry.path, entry.kind
        rep = FileReport(entry.rel, kind)
        problem = entry.problem or recheck(entry, root_real, follow)
        if problem:  # never opened: reported as this file's problem, the source's other files go on
            rep.status, rep.problem = "skipped", problem
            log.warning("source %s: %s: skipped: %s", self.name, printable(rep.file), printable(problem))
            return rep
        try:
            for item in self._read_file(path, kind, rep):
                if isinstance(item, Reject):
                    rejects.append(item)
                    rep.rejects[item.reason] += 1
                else:
                    recs.append(item)
                    rep.records += 1
        except FileProblem as exc:
            rep.status, rep.problem = exc.status, exc.message
        except OSError as exc:  # permission denied, EIO: this file's problem, reported
            rep.status, rep.problem = "unreadable", f"cannot read ({exc.strerror or exc})"
        if rep.status == "ok" and rep.lines == 0:
            rep.status, rep.problem = "empty", "empty input (no records)"
        if rep.status != "ok":
            log.warning("source %s: %s: %s", self.name, printable(rep.file), printable(rep.problem))
        for note in rep.notes:
            log.warning("source %s: %s: %s", self.name, printable(rep.file), printable(note))
        return rep

    def _check_text_field(self) -> None:
        if self._objects and not self._with_field:
            present = [k for k, _ in self._fields.most_common(20)]
            raise ConfigError(
                f"source {self.name}: none of its {self._objects:,} records has the field "
                f"{self.cfg.text_field!r} (sources.{self.name}.text_field); fields present: {present}; "
                f"set text_field to the one that holds the text")

    def iter_raw(self, epoch: int) -> Iterator[RawDoc]:
        recs = self.load()
        assert isinstance(recs, RecordSpool)
        yield from recs.iter_order(permuted(len(recs), self.seed, self.name, epoch))

    def _reject(self, rel: str, key: str, reason: str, detail: str, line: int | None = None,
                offset: int | None = None, text: str | None = None, raw: bytes | None = None) -> Reject:
        url = f"file://{display(self.root)}{'/' + rel if self.root.is_dir() else ''}" + (f"#L{line}" if line else "")
        return Reject(source=self.name, source_id=key, url=url, reason=reason, detail=detail,
                      snippet=snippet(text, raw), file=rel, line=line, offset=offset)

    def _read_file(self, path: Path, kind: str, rep: FileReport) -> Iterator[RawDoc | Reject]:
        if kind == "jsonl":
            yield from self._read_jsonl(path, rep)
        elif kind == "parquet":
            yield from self._read_table(path, rep, _parquet_batches(path))
        elif kind == "arrow":
            yield from self._read_table(path, rep, _arrow_batches(path))
        else:
            yield from self._read_text_file(path, kind, rep)

    def _read_text_file(self, path: Path, kind: str, rep: FileReport) -> Iterator[RawDoc | Reject]:
        rel = rep.file
        rep.lines = 1
        size = path.stat().st_size
        if size > 4 * self.max_chars + _LINE_SLACK:  # cannot be within max_chars: never read it whole
            yield self._reject(rel, rel, "too_long", f"file of {size:,} bytes > 4 x max_chars={self.max_chars:,}")
            return
        data = path.read_bytes()
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield self._reject(rel, rel, "invalid_utf8", f"invalid UTF-8 at byte {exc.start:,}", raw=data)
            return
        bad = validate_text(text)
        if bad:
            yield self._reject(rel, rel, bad[0], bad[1], text=text)
            return
        yield RawDoc(source_id=rel, text=text, fmt="html" if kind == "html" else self.cfg.fmt,
                     url=f"file://{display(path)}", license=self.cfg.license, lang=self.cfg.lang, file=rel, checked=True)

    def _read_jsonl(self, path: Path, rep: FileReport) -> Iterator[RawDoc | Reject]:
        rel = rep.file
        reader = LineReader(path, self.line_limit)
        rep.compression = reader.compression
        name = path.name.lower()
        named = "gzip" if name.endswith(".gz") else "zstd" if name.endswith(".zst") else "none"
        if named != reader.compression:
            rep.notes.append(f"name says {named} but the content is {reader.compression}; read as {reader.compression}")
        for ln in reader:
            rep.lines += 1
            key = f"{rel}#{ln.number - 1}"
            if ln.partial:
                yield self._reject(rel, key, "truncated_record", f"the stream ends {ln.length:,} bytes into this "
                                   "line (file cut short)", ln.number, ln.offset, raw=ln.data)
                continue
            if ln.data is None:
                yield self._reject(rel, key, "too_long", f"line of {ln.length:,} bytes > {self.line_limit:,} "
                                   f"(6 x max_chars={self.max_chars:,} + 1 MiB); not read", ln.number, ln.offset)
                continue
            if not ln.data.strip():
                rep.blank_lines += 1
                continue
            try:
                s = ln.data.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield self._reject(rel, key, "invalid_utf8", f"invalid UTF-8 at byte {exc.start:,} of the line",
                                   ln.number, ln.offset, raw=ln.data)
                continue
            try:
                row = json.loads(s)
            except (ValueError, RecursionError) as exc:  # ValueError: also what the parser accepts but Python
                # refuses to convert (an integer of more than 4,300 digits)
                msg = (f"{exc.msg} at col {exc.colno}" if isinstance(exc, json.JSONDecodeError) else
                       "nested too deep" if isinstance(exc, RecursionError) else f"{type(exc).__name__}: {exc}"[:200])
                yield self._reject(rel, key, "invalid_json", msg, ln.number, ln.offset, text=s[:200])
                continue
            if not isinstance(row, dict):
                kind = "null" if row is None else "array" if isinstance(row, list) else type(row).__name__
                yield self._reject(rel, key, "not_an_object", f"JSON line is {kind}, not an object",
                                   ln.number, ln.offset, text=s)
                continue
            del s
            yield self._row(row, rel, key, f"file://{display(path)}#L{ln.number}", ln.number, ln.offset)
        if reader.problem is not None:
            raise reader.problem

    def _read_table(self, path: Path, rep: FileReport, batches: Iterator[Any]) -> Iterator[RawDoc | Reject]:
        rel = rep.file
        i = 0
        for batch in batches:
            try:
                rows: list[dict[str, Any]] | None = _batch_rows(batch)
            except FileProblem:
                raise
            except Exception:  # noqa: BLE001 - a value Python cannot hold (a timestamp past year 9999): row by row
                rows = None
            for j in range(batch.num_rows):
                rep.lines += 1
                key = f"{rel}#{i}"
                if rows is not None:
                    yield self._row(rows[j], rel, key, f"file://{display(path)}#{i}", None, None)
                else:
                    try:
                        row = _batch_rows(batch.slice(j, 1))[0]
                    except Exception as exc:  # noqa: BLE001 - this row's reject, the file goes on
                        yield self._reject(rel, key, "bad_record", f"row {i:,}: {type(exc).__name__}: {exc}"[:300])
                    else:
                        yield self._row(row, rel, key, f"file://{display(path)}#{i}", None, None)
                i += 1

    def _row(self, row: dict[str, Any], rel: str, key: str, default_url: str, line: int | None,
             offset: int | None) -> RawDoc | Reject:
        """One record, validated; any exception while converting it is that record's reject (``bad_record``,
        with its line), never the stage's crash: a hostile record must not stop a run."""
        try:
            return self._row_checked(row, rel, key, default_url, line, offset)
        except Exception as exc:  # noqa: BLE001 - whatever one record does to the conversion, it is its reject
            return self._reject(rel, key, "bad_record", f"{type(exc).__name__}: {exc}"[:300], line, offset)

    def _row_checked(self, row: dict[str, Any], rel: str, key: str, default_url: str, line: int | None,
                     offset: int | None) -> RawDoc | Reject:
        self._objects += 1
        self._fields.update(row.keys())
        if self.cfg.text_field in row:
            self._with_field += 1
        raw = row_to_raw(row, key, self.cfg, default_url)
        if raw.error:
            reason, _, detail = raw.error.partition(":")
            return self._reject(rel, raw.source_id, reason.strip(), detail.strip(), line, offset,
                                text=raw.text, raw=raw.raw_bytes)
        if len(raw.text or "") > 10 * self.max_chars:  # extraction never shrinks a record 10x to fit
            return self._reject(rel, raw.source_id, "too_long", f"{len(raw.text or ''):,} chars > 10 x max_chars",
                                line, offset)
        raw.file, raw.line, raw.offset = rel, line, offset
        return raw


def _parquet_batches(path: Path) -> Iterator[Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    size = path.stat().st_size
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        why = "0 bytes" if size == 0 else f"{size:,} bytes: {_first_line(exc)}"
        raise FileProblem("corrupt" if size else "empty", f"not a parquet file ({why})") from None
    try:
        yield from pf.iter_batches(batch_size=_BATCH)
    except (pa.ArrowException, OSError) as exc:
        raise FileProblem("corrupt", f"corrupt parquet data ({_first_line(exc)})") from None


def _arrow_batches(path: Path) -> Iterator[Any]:
    """Arrow IPC, file format (Feather v2) or stream format (what ``datasets.save_to_disk`` writes)."""
    import pyarrow as pa

    size = path.stat().st_size
    if size == 0:
        raise FileProblem("empty", "not an Arrow IPC file (0 bytes)")
    try:
        try:
            reader = pa.ipc.open_file(pa.memory_map(str(path)))
            batches: Iterator[Any] = (reader.get_batch(i) for i in range(reader.num_record_batches))
        except pa.ArrowInvalid:
            batches = iter(pa.ipc.open_stream(pa.memory_map(str(path))))
        yield from batches
    except (pa.ArrowException, OSError) as exc:
        raise FileProblem("corrupt", f"not a readable Arrow IPC file ({_first_line(exc)})") from None


def _batch_rows(batch: Any) -> list[dict[str, Any]]:
    """Rows of a record batch. Corrupt bytes inside a string column (invalid UTF-8) would make
    ``to_pylist`` raise for the whole batch: such columns are read as binary instead, so each row is
    judged on its own (``invalid_utf8`` for the damaged ones); damage beyond that is the file's problem."""
    import pyarrow as pa

    try:
        batch.validate(full=True)
        return batch.to_pylist()
    except (pa.ArrowException, UnicodeDecodeError):
        pass
    cols = []
    for col in batch.columns:
        if pa.types.is_string(col.type):
            col = col.view(pa.binary())
        elif pa.types.is_large_string(col.type):
            col = col.view(pa.large_binary())
        cols.append(col)
    try:
        raw = pa.RecordBatch.from_arrays(cols, names=batch.schema.names)
        raw.validate(full=True)
        rows = raw.to_pylist()
    except (pa.ArrowException, UnicodeDecodeError) as exc:
        raise FileProblem("corrupt", f"corrupt table data ({_first_line(exc)})") from None
    for row in rows:  # string fields back to str where they decode; a damaged one stays bytes
        for k, v in row.items():
            if isinstance(v, bytes):
                try:
                    row[k] = v.decode("utf-8")
                except UnicodeDecodeError:
                    row[k] = v  # the text field stays bytes: row_to_raw rejects it as invalid_utf8
    return rows


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def row_to_raw(row: dict[str, Any], key: str, cfg: SourceConfig, default_url: str = "") -> RawDoc:
    """Map one row (JSONL, Parquet, or a hub dataset) onto RawDoc via the source's field mapping, applying
    the record-level ingestion policy (``records.validate_text``); a bad row comes back with ``error``."""
    bad_field = lone_surrogate_field(row, (cfg.id_field, cfg.url_field or "url", "license"))
    if bad_field is not None:
        return RawDoc(source_id=key, text=None, license=cfg.license,
                      error=f"lone_surrogate: field {bad_field!r} holds an unpaired surrogate")
    own = bool(cfg.id_field) and row.get(cfg.id_field) is not None  # the record's own id: kept verbatim
    sid = str(row[cfg.id_field]) if own else key
    url = str(row.get(cfg.url_field) or "") if cfg.url_field else str(row.get("url") or default_url)
    lic = str(row.get("license") or cfg.license)
    if cfg.text_field not in row:
        return RawDoc(source_id=sid, text=None, url=url, license=lic,
                      error=f"missing_text: no field {cfg.text_field!r}; row has {sorted(map(str, row))[:12]}")
    text = row[cfg.text_field]
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            return RawDoc(source_id=sid, text=None, raw_bytes=text, url=url, license=lic,
                          error=f"invalid_utf8: invalid UTF-8 at byte {exc.start:,} of field {cfg.text_field!r}")
    bad = validate_text(text, cfg.text_field)
    if bad:
        shown = text if isinstance(text, str) else None
        return RawDoc(source_id=sid, text=shown, url=url, license=lic, error=f"{bad[0]}: {bad[1]}")
    return RawDoc(source_id=sid, text=text, fmt=cfg.fmt, url=url, license=lic, lang=cfg.lang, checked=True,
                  own_id=own)
