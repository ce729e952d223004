"""``type: warc`` — Common Crawl WARC and WET files (``.warc``/``.warc.gz``/``.wet.gz``, compression
recognized by content) as a stage-1 source.

Per record (README "Stage 1", WARC input):

* a ``response`` with HTTP status 200 and an HTML content type (``text/html``,
  ``application/xhtml+xml``) is a document: ``WARC-Target-URI`` its url, ``WARC-Record-ID`` its id
  (kept verbatim in the document id), file + byte offset its provenance. Its body is de-chunked,
  content-decoded (gzip, deflate, br) and decoded to text (``warc_http.to_text``: HTTP charset, meta
  tag, detection), then goes the way every HTML record goes (format ``html``: resiliparse main-text
  extraction with math kept, the source's filters, the quota);
* a ``conversion`` record (a WET file) is a plain-text document (format ``text``);
* everything else is counted by reason in the file's report (``skipped``: ``request``, ``metadata``,
  ``warcinfo``, ``revisit``, ``status_3xx``, ``status_4xx``, ``non_html``, ``truncated_by_crawler`` ...).
  Skipped records are no damage: they are not rejects and not charged to the error budget.
  ``format: warc`` reads responses only, ``format: wet`` conversion records only, ``auto`` both.

A body the crawler cut (``WARC-Truncated``) is skipped: its end, often the main text's end and a gzip
trailer, is missing. Damage is a reject with file and offset (``rejects.jsonl``) or the file's problem,
never the stage's end:

* a file cut short (a gzip member without its end, a plain file ending inside a record) keeps every
  complete record before the cut; the cut record is a ``truncated_record`` reject and the file is
  reported ``truncated``. FastWARC returns a cut record as if complete (MEASURED_FACTS.md), so the
  reader decompresses itself (``lines.decompressed_chunks``, the JSONL reader's code) and checks every
  record's length against its ``Content-Length``;
* a ``Content-Length`` that lies makes FastWARC fail at the next header. A record is therefore only
  released once the next one parsed: on a failure the held record is a ``bad_length`` reject, and the
  reader finds the next ``WARC/1.x`` header after it and goes on from there (each resync re-reads the
  file's decompressed bytes up to that point: damage is rare, memory stays bounded);
* a body over 4 x ``sampler.max_chars`` bytes (+1 MiB) is a ``too_long`` reject without being read;
  bodies that are images/archives/NULs though declared HTML are ``binary``; a body whose chunked
  framing or content coding is corrupt is ``bad_content_encoding``/``bad_chunked``;
* a 0-byte file is ``empty``; a file with no WARC header at all is ``corrupt``; a plain WARC named
  ``.gz`` (or the reverse) is read by its content with a note.

Reading stops when the recipe is full: stage 1 reads the files as sampling needs them, in a seeded file
order per epoch, and within a file takes its documents in a seeded order (``iter_raw``). Each file is read
whole into a spool on disk (``spool.RecordSpool``: disk about one file's HTML, memory 8 bytes a record),
then dropped. A crawl segment's files are themselves random slices of the crawl, so a seeded file order
samples it fairly. Reports cover the files that were read: ``files_read`` of ``files_listed`` in
``source_mix.json``. ``load()`` reads every file up front, as ``local`` does (tests, the bench).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import ConfigError
from ..records import RawDoc, Reject, snippet, validate_text
from ..rng import permuted
from .lines import FileProblem, decompressed_chunks, sniff_compression
from .local import _LINE_SLACK, FileReport, LocalSource
from .spool import RecordSpool
from .warc_http import HTML_TYPES, BodyError, binary_kind, dechunk, decode_content, mime_and_charset, split_http, to_text

log = logging.getLogger(__name__)

WARC_NAMES = (".warc", ".warc.gz", ".warc.zst", ".wet", ".wet.gz", ".warc.wet", ".warc.wet.gz")
_HEAD = 1 << 16  # bytes of an over-long response read to see its HTTP headers (is it HTML at all?)
MAX_RESYNCS = 1000  # a file damaged in more places than this is reported corrupt from there on
_WARC_LINE = (b"WARC/1.0\r\n", b"WARC/1.1\r\n", b"WARC/0.18\r\n", b"WARC/1.0\n", b"WARC/1.1\n")


class _Decompressed:
    """The decompressed bytes of a file from ``start`` on, as a file object FastWARC reads. A damaged
    stream ends early (EOF to FastWARC); its ``FileProblem`` is kept in ``problem``."""

    def __init__(self, path: Path, compression: str, start: int) -> None:
        self._chunks = decompressed_chunks(path, compression)
        self._buf = b""
        self._off = 0  # bytes of _buf already read
        self.problem: FileProblem | None = None
        self.pos = 0  # decompressed bytes handed out, from the start of the file (skipped ones included)
        self.start = start
        skip = start
        while skip > 0:
            chunk = self._next()
            if chunk is None:
                break
            if len(chunk) > skip:
                self._buf = chunk[skip:]
                self.pos += skip
                break
            skip -= len(chunk)
            self.pos += len(chunk)

    def _next(self) -> bytes | None:
        if self.problem is not None:
            return None
        try:
            return next(self._chunks)
        except StopIteration:
            return None
        except FileProblem as exc:
            self.problem = exc
            return None
        except OSError as exc:
            self.problem = FileProblem("unreadable", f"read error ({exc.strerror or exc})")
            return None

    def read(self, n: int = -1) -> bytes:
        # an offset into the current chunk, not a re-sliced buffer: FastWARC reads 64 KiB at a time from
        # 1 MiB chunks, and slicing off the rest on every read would copy each chunk ~8 times
        while n < 0 or len(self._buf) - self._off < n:
            chunk = self._next()
            if chunk is None:
                break
            self._buf = self._buf[self._off:] + chunk
            self._off = 0
        end = len(self._buf) if n < 0 else min(len(self._buf), self._off + n)
        out = self._buf[self._off:end]
        self._off = end
        self.pos += len(out)
        return out

    def tell(self) -> int:  # FastWARC asks; offsets it reports are relative to ``start``
        return self.pos - self.start

    def close(self) -> None:
        self._chunks.close()


def _find_header(path: Path, compression: str, start: int) -> int | None:
    """Decompressed offset of the first ``WARC/1.x`` version line at or after ``start`` that begins a line."""
    stream = _Decompressed(path, compression, start)
    base, tail = start, b""
    while block := stream.read(1 << 20):
        data = tail + block
        best = None
        for marker in _WARC_LINE:
            i = data.find(marker)
            while i > 0 and data[i - 1:i] != b"\n":
                i = data.find(marker, i + 1)
            if i >= 0 and (best is None or i < best):
                best = i
        if best is not None:
            return base - len(tail) + best
        tail = data[-16:]
        base += len(block)
    return None


def _after_block(path: Path, compression: str, rec: _Record, limit: int = 1 << 16) -> bytes | None:
    """Up to ``limit`` bytes from where ``rec``'s block ends by its Content-Length (None: its header does not
    end within 64 KiB, or the file ends before)."""
    stream = _Decompressed(path, compression, rec.offset)
    head = stream.read(1 << 16)
    end = head.find(b"\r\n\r\n")
    if end < 0 or rec.declared < 0:
        return None
    skip = end + 4 + rec.declared - len(head)
    while skip > 0:
        piece = stream.read(min(skip, 1 << 20))
        if not piece:
            return None
        skip -= len(piece)
    return (head[end + 4 + rec.declared:] if skip < 0 else b"") + stream.read(limit)


@dataclass
class _Record:
    """What is kept of one WARC record until the next one proves its length right."""

    kind: str
    offset: int  # decompressed byte offset of its version line
    declared: int  # Content-Length
    headers: dict[str, str]
    block: bytes | None = None  # read for response/conversion records within the limit
    got: int = 0  # block bytes actually present
    over_limit: bool = False


class WarcSource(LocalSource):
    """A file or directory of WARC/WET files; see the module docstring for the policy."""

    SUPPORTED = WARC_NAMES
    reads_up_front = False  # stage 1 does not call load(): iter_raw reads the files as the sampler needs them

    def __init__(self, cfg: Any, seed: int, max_chars: int = 2_000_000) -> None:
        self.body_limit = 4 * max_chars + _LINE_SLACK  # the text-file limit of the local reader
        if not Path(cfg.path).expanduser().exists():
            raise ConfigError(f"sources.{cfg.name}.path={cfg.path!r} does not exist; point it at a WARC/WET file or a "
                              "folder of them (the demo's copy: .venv/bin/python -m minideepseek.demo_corpus warc "
                              "--out data/demo_warc)")
        super().__init__(cfg, seed, max_chars)

    def _reset_ingestion(self) -> None:
        super()._reset_ingestion()
        self._read: set[str] = set()  # files iter_raw has read (their reports are in file_reports)

    def iter_raw(self, epoch: int) -> Iterator[RawDoc]:
        """One epoch: files in a seeded order, each read when the sampler gets to it; a file's damaged
        records first (as error records: the stage counts them and writes them to rejects.jsonl, on the
        first read of the file only), then its documents in a seeded order."""
        for i in permuted(len(self.entries), self.seed, self.name, epoch):
            entry = self.entries[int(i)]
            recs: RecordSpool[RawDoc] = RecordSpool(self.spool_dir, f"warc-{self.name}")
            rejects: RecordSpool[Reject] = RecordSpool(self.spool_dir, f"warc-{self.name}-rejects")
            try:
                rep = self._ingest_entry(entry, recs, rejects)
                recs.seal()
                rejects.seal()
                first = entry.rel not in self._read
                if first:
                    self._read.add(entry.rel)
                    self.file_reports.append(rep)
                    for rej in rejects:
                        yield RawDoc(source_id=rej.source_id, text=None, url=rej.url, error=f"{rej.reason}: {rej.detail}",
                                     file=rej.file, offset=rej.offset)
                yield from recs.iter_order(permuted(len(recs), self.seed, f"{self.name}/{entry.rel}", epoch))
            finally:
                recs.close()
                rejects.close()

    def _file_kind(self, path: Path) -> str | None:
        """Every file the glob finds when a format is set, else the WARC/WET names (which records of a
        file are documents is the source's ``format``, not the file's name)."""
        return "warc" if self.cfg.format != "auto" or path.name.lower().endswith(WARC_NAMES) else None

    def _read_file(self, path: Path, kind: str, rep: FileReport) -> Iterator[RawDoc | Reject]:
        if path.stat().st_size == 0:
            raise FileProblem("empty", "empty file (0 bytes): no WARC records")
        rep.compression = compression = sniff_compression(path)
        named = "gzip" if path.name.lower().endswith(".gz") else "zstd" if path.name.lower().endswith(".zst") else "none"
        if named != compression:
            rep.notes.append(f"name says {named} but the content is {compression}; read as {compression}")
        for rec in self._iter_records(path, compression, rep):
            out = self._judge(rec, self.cfg.format, rep)
            if out is not None:
                yield out

    # ---- records -------------------------------------------------------------------------------

    def _iter_records(self, path: Path, compression: str, rep: FileReport) -> Iterator[_Record | Reject]:
        """Every record with a verified length, in file order; bad lengths and cut records as rejects."""
        from fastwarc.warc import ArchiveIterator, WarcRecordType

        start, resyncs = 0, 0
        while True:
            stream = _Decompressed(path, compression, start)
            held: _Record | None = None
            failed: str | None = None
            try:
                for wrec in ArchiveIterator(stream, record_types=WarcRecordType.any_type, parse_http=False,
                                            stream_detect=False, fsspec_args=False):
                    cur = self._take(wrec, start)
                    if held is not None:
                        yield held
                    held = cur
            except BaseException as exc:  # noqa: BLE001 - FastWARC's parse errors, whatever their type
                if not _parse_error(exc):
                    raise
                failed = str(exc) or type(exc).__name__
            cut = held is not None and held.got < held.declared
            if cut and failed is None and held is not None:
                # a block that runs to the end of the file: cut short, or a Content-Length too long that
                # swallowed the records after it (one of them starts inside its claimed extent)
                inside = _find_header(path, compression, held.offset + 1)
                if inside is not None:
                    failed = "a record header inside its block"
            if failed is None or stream.problem is not None:  # the end of what is readable
                if held is not None and held.declared < 0:  # FastWARC hands out a header cut mid-way as a record
                    raise stream.problem or FileProblem("truncated", "the file ends inside a record's header "
                                                        "(cut short)")
                if held is not None and held.got < held.declared:
                    yield self._cut(rep, held, f"the file ends {held.got:,} of {held.declared:,} bytes into this "
                                    "record's block (file cut short)")
                    raise stream.problem or FileProblem("truncated", "the file ends inside a record (cut short)")
                if held is not None:
                    yield held
                if stream.problem is not None:  # a cut inside a header, or corrupt compressed data: the file's
                    raise stream.problem         # problem (whatever FastWARC said about the bytes it got)
                if start == 0 and held is None:
                    raise FileProblem("corrupt", "no WARC record in the file")
                return
            # a header did not parse where the held record says the next one starts: either its length
            # lied, or it was right and what follows is damaged (or cut inside the next header)
            after = start + 1
            if held is not None:
                tail = _after_block(path, compression, held)
                if tail is not None and tail.startswith(b"\r\n\r\n"):  # its length is right: it is kept
                    yield held
                    rest = tail[4:]
                    if not rest.strip(b"\r\n\t \x00"):
                        rep.notes.append(f"{len(rest):,} bytes of padding after the last record ignored")
                        return
                    if rest.startswith(b"WARC/") and b"\r\n\r\n" not in rest:
                        raise FileProblem("truncated", "the file ends inside a record's header (cut short)")
                    after = held.offset + 1
                    held = None
                else:
                    after = held.offset + 1
            nxt = _find_header(path, compression, after)
            where = f"next record found at byte {nxt:,}" if nxt is not None else "no record after it"
            if held is not None:
                yield Reject(self.name, _sid(held, rep)[0], held.headers.get("warc-target-uri", ""), "bad_length",
                             f"Content-Length {held.declared:,} of this {held.kind} record does not end where a "
                             f"record starts ({failed}); {where}", "", file=rep.file, offset=held.offset)
            elif start == 0 and after == 1:
                if nxt is None:
                    raise FileProblem("corrupt", f"not a WARC file: no WARC/1.x header ({failed})")
                rep.notes.append(f"{nxt:,} bytes before the first WARC header skipped")
            if nxt is None:
                raise FileProblem("corrupt", f"damaged after byte {after - 1:,} ({failed}); nothing readable after it")
            resyncs += 1
            if resyncs > MAX_RESYNCS:
                raise FileProblem("corrupt", f"more than {MAX_RESYNCS} damaged records; stopped at byte {nxt:,}")
            if resyncs <= 20:  # the rejects hold every one; the notes name the first few
                rep.notes.append(f"damaged record at byte {after - 1:,} ({failed}); reading resumed at byte {nxt:,}")
            start = nxt

    def _cut(self, rep: FileReport, rec: _Record, detail: str) -> Reject:
        return Reject(self.name, _sid(rec, rep)[0], rec.headers.get("warc-target-uri", ""), "truncated_record", detail,
                      "", file=rep.file, offset=rec.offset)

    def _take(self, wrec: Any, base: int) -> _Record:
        """Copy what is needed out of FastWARC's record (its reader goes stale when the iterator moves)."""
        headers = {k.lower(): v for k, v in wrec.headers.items()}
        kind = headers.get("warc-type", "").lower() or "unknown"
        try:
            declared = int(headers.get("content-length", "-1"))
        except ValueError:
            declared = -1
        rec = _Record(kind, base + wrec.stream_pos, declared, headers)
        if kind in ("response", "conversion"):
            limit = self.body_limit + _HEAD
            if declared > limit:  # only its HTTP headers are kept: is it an HTML page (a reject) at all?
                rec.over_limit = True
                rec.block = wrec.reader.read(_HEAD)
                rec.got = len(rec.block) + _drain(wrec.reader)
            else:
                rec.block = wrec.reader.read()
                rec.got = len(rec.block)
        else:  # counted, not kept: a record cut by the end of the file shows as a short count
            rec.got = _drain(wrec.reader)
        return rec

    # ---- policy ----------------------------------------------------------------------------------

    def _judge(self, rec: _Record | Reject, fmt: str, rep: FileReport) -> RawDoc | Reject | None:
        """A record -> a document, a reject, or None (counted in ``rep.skipped``)."""
        rep.lines += 1  # WARC records: documents + rejects + skipped = lines
        if isinstance(rec, Reject):
            return rec
        kind = rec.kind
        wanted = {"auto": ("response", "conversion"), "warc": ("response",), "wet": ("conversion",)}[fmt]
        if kind not in wanted:
            rep.skipped[kind if kind in _KNOWN else "other_record"] += 1
            return None
        h = rec.headers
        sid, own = _sid(rec, rep)
        url = h.get("warc-target-uri", "").strip()

        def reject(reason: str, detail: str, text: str | None = None, raw: bytes | None = None) -> Reject:
            return Reject(self.name, sid, url, reason, detail, snippet(text, raw), file=rep.file, offset=rec.offset)

        if h.get("warc-truncated"):
            rep.skipped["truncated_by_crawler"] += 1
            return None
        block = rec.block or b""
        if kind == "conversion":
            if rec.over_limit:
                return reject("too_long", f"conversion record of {rec.declared:,} bytes > {self.body_limit:,}")
            try:
                text = block.decode("utf-8")
            except UnicodeDecodeError as exc:
                return reject("invalid_utf8", f"invalid UTF-8 at byte {exc.start:,} of the WET text", raw=block)
            fmt_out = "text"
        else:
            if "application/http" not in h.get("content-type", "application/http"):
                rep.skipped["not_http"] += 1
                return None
            status, http, body = split_http(block)
            if status is None:
                rep.skipped["no_http_status"] += 1
                return None
            if status != 200:
                rep.skipped[f"status_{status // 100}xx"] += 1
                return None
            mime, charset = mime_and_charset(http.get("content-type", ""))
            if mime not in HTML_TYPES:
                rep.skipped["non_html"] += 1
                return None
            if rec.over_limit:
                return reject("too_long", f"response of {rec.declared:,} bytes > {self.body_limit:,} (4 x max_chars"
                              f"={self.max_chars:,} + 1 MiB); not read")
            try:
                if "chunked" in http.get("transfer-encoding", "").lower() and not _is_markup(body):
                    body = dechunk(body, self.body_limit)
                if http.get("content-encoding") and not _is_markup(body):
                    body = decode_content(body, http["content-encoding"], self.body_limit)
            except BodyError as exc:
                return reject(exc.reason, str(exc), raw=body[:200])
            what = binary_kind(body)
            if what:
                return reject("binary", f"declared {mime} but the body is {what}", raw=body[:200])
            text, _codec, _how = to_text(body, charset)
            fmt_out = "html"
        bad = validate_text(text)
        if bad:
            return reject(bad[0], bad[1], text=text[:200])
        return RawDoc(source_id=sid, text=text, fmt=fmt_out, url=url, license=self.cfg.license, lang=self.cfg.lang,
                      file=rep.file, offset=rec.offset, checked=True, own_id=own)


def _is_markup(body: bytes) -> bool:
    """A body that already reads as HTML (``<`` after optional whitespace or a UTF-8 BOM): a crawler that stored
    the decoded payload but kept the ``Content-Encoding``/``Transfer-Encoding`` header. No gzip, brotli or
    chunk-size line starts with ``<``, so decoding it would only fail."""
    return body.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"<"


def _parse_error(exc: BaseException) -> bool:
    """An exception FastWARC raised over the bytes it read (OSError for an invalid header; a Rust panic
    surfaces as ``pyo3_runtime.PanicException``, a BaseException): the file's damage, not the run's end.
    KeyboardInterrupt, SystemExit and GeneratorExit are never that."""
    return isinstance(exc, (OSError, ValueError, RuntimeError)) or type(exc).__name__ == "PanicException"


def _sid(rec: _Record, rep: FileReport) -> tuple[str, bool]:
    """(id, is it the record's own): ``WARC-Record-ID`` without its angle brackets, else file@offset."""
    rid = rec.headers.get("warc-record-id", "").strip().strip("<>")
    return (rid, True) if rid else (f"{rep.file}@{rec.offset}", False)


def _drain(reader: Any) -> int:
    """Bytes left in a record's block, read in bounded pieces and dropped."""
    n = 0
    while piece := reader.read(1 << 20):
        n += len(piece)
    return n


_KNOWN = ("warcinfo", "request", "metadata", "revisit", "resource", "continuation", "response", "conversion")
