"""Reading JSONL-like files line by line, robust to what real dumps contain.

* Compression is recognized by the file's magic bytes, not its name (gzip ``1f 8b``, zstd
  ``28 b5 2f fd``): a ``.jsonl.gz`` that is really plain text, or a gzip without the suffix, reads right.
  A name that disagrees with the content is reported as a file-level note.
* A stream cut short (a download that stopped, no gzip trailer / incomplete zstd frame) yields every
  complete line before the cut; the partial last line comes out with ``partial=True`` and the file is
  reported as truncated. Corrupt data (bad CRC, garbage) ends the file with a ``corrupt`` problem after
  the lines already read.
* Lines split on ``\\n`` only: U+2028/U+2029 or a lone ``\\r`` inside a record are text. A ``\\r`` before
  the ``\\n`` (CRLF files) is dropped.
* A line longer than ``limit`` bytes is never held in memory: its bytes are counted and skipped, and it
  comes out with ``data=None`` (the caller rejects it as too long). Memory is bounded by ``limit`` plus
  one read chunk, whatever the file holds.
* A UTF-8 byte-order mark at the start is stripped; a UTF-16/32 one is a file-level error.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHUNK = 1 << 20
_GZIP = b"\x1f\x8b"
_ZSTD = b"\x28\xb5\x2f\xfd"
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_32_BOMS = {b"\xff\xfe\x00\x00": "UTF-32-LE", b"\x00\x00\xfe\xff": "UTF-32-BE", b"\xff\xfe": "UTF-16-LE",
                  b"\xfe\xff": "UTF-16-BE"}


class FileProblem(Exception):
    """A problem with a whole file (not one record): reported per file, the source's other files go on."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status  # "truncated" | "corrupt" | "empty" | "unreadable" | "unsupported"
        self.message = message


@dataclass(frozen=True)
class Line:
    number: int  # 1-based
    offset: int  # byte offset of the line's first byte in the decompressed stream
    data: bytes | None  # None when the line is longer than the limit (skipped, not held)
    length: int  # bytes, without the line break
    partial: bool = False  # the stream ended inside this line (a truncated file)


def sniff_compression(path: Path) -> str:
    with path.open("rb") as fh:
        head = fh.read(4)
    if head.startswith(_GZIP):
        return "gzip"
    if head.startswith(_ZSTD):
        return "zstd"
    return "none"


def _raw_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while block := fh.read(CHUNK):
            yield block


def _frames(path: Path, fmt: str, new: Callable[[], Any], error: type[Exception], magic: bytes) -> Iterator[bytes]:
    """Decompress member by member (concatenated gzip members / zstd frames are legal); raise
    FileProblem on a cut or corrupt stream after yielding everything that decompressed before the bad
    bytes (zstd keeps no copyable state, so a damaged zstd block is lost whole)."""
    d = new()
    fed = False
    for block in _raw_chunks(path):
        while block:
            snap = d.copy() if hasattr(d, "copy") else None
            try:
                out = d.decompress(block)
            except error as exc:
                if snap is not None:
                    yield from _salvage(snap, block)
                raise FileProblem("corrupt", f"corrupt {fmt} data ({exc})") from None
            fed = True
            if out:
                yield out
            if d.eof:
                block = d.unused_data
                d = new()
                fed = False
                if block and not block.startswith(magic[:1]):
                    return  # trailing zero padding after the last member: what gzip(1) ignores too
            else:
                block = b""
    if fed and not d.eof:
        tail = d.flush() if fmt == "gzip" else b""
        if tail:
            yield tail
        raise FileProblem("truncated", f"{fmt} stream ends before its end-of-stream marker (file cut short)")


def _salvage(d: Any, block: bytes, step: int = 256) -> Iterator[bytes]:
    """Output a decompressor gives for ``block`` up to the bytes that fail (a bad CRC, a flipped bit):
    the records before the damage are kept, the caller reports the file as corrupt. Fed in small
    steps, then byte by byte over the failing step, so only output of the damaged bytes is lost."""
    for i in range(0, len(block), step):
        snap = d.copy()
        try:
            out = d.decompress(block[i:i + step])
        except Exception:  # noqa: BLE001 - zlib.error / ZstdError: the damage is in this step
            for b in range(i, min(i + step, len(block))):
                try:
                    out = snap.decompress(block[b:b + 1])
                except Exception:  # noqa: BLE001
                    return
                if out:
                    yield out
            return
        if out:
            yield out


def decompressed_chunks(path: Path, compression: str) -> Iterator[bytes]:
    if compression == "gzip":
        return _frames(path, "gzip", lambda: zlib.decompressobj(wbits=31), zlib.error, _GZIP)
    if compression == "zstd":
        import zstandard

        dctx = zstandard.ZstdDecompressor()
        return _frames(path, "zstd", dctx.decompressobj, zstandard.ZstdError, _ZSTD)
    return _raw_chunks(path)



class LineReader:
    """Iterate the lines of one (possibly compressed) file; ``problem`` holds the file-level problem
    that ended it early, if any, once iteration is over."""

    def __init__(self, path: Path, limit: int) -> None:
        self.path = path
        self.limit = limit
        self.compression = sniff_compression(path)
        self.problem: FileProblem | None = None
        self.bytes_read = 0

    def __iter__(self) -> Iterator[Line]:
        buf = bytearray()
        number, offset = 0, 0  # the current line's number - 1 and its start offset
        skipping = 0  # > 0 while inside an over-long line: bytes seen so far (nothing kept)
        first = True
        try:
            for chunk in decompressed_chunks(self.path, self.compression):
                if first:
                    first = False
                    for bom, name in _UTF16_32_BOMS.items():
                        if chunk.startswith(bom):
                            raise FileProblem("unsupported", f"file is {name} encoded (byte-order mark "
                                              f"{bom.hex(' ')}); re-encode it as UTF-8")
                    if chunk.startswith(_UTF8_BOM):
                        chunk = chunk[len(_UTF8_BOM):]
                        offset = len(_UTF8_BOM)
                self.bytes_read += len(chunk)
                start = 0
                while True:
                    nl = chunk.find(b"\n", start)
                    piece = chunk[start:] if nl < 0 else chunk[start:nl]
                    if skipping:
                        skipping += len(piece)
                    elif len(buf) + len(piece) > self.limit:
                        skipping = len(buf) + len(piece)
                        buf.clear()
                    else:
                        buf += piece
                    if nl < 0:
                        break
                    number += 1
                    yield self._line(number, offset, buf, skipping)
                    offset += (skipping or len(buf)) + 1
                    buf.clear()
                    skipping = 0
                    start = nl + 1
        except FileProblem as exc:
            self.problem = exc
            if buf or skipping:
                yield self._line(number + 1, offset, buf, skipping, partial=True)
            return
        except OSError as exc:  # EIO, a file removed under us: the file's problem, not the run's
            self.problem = FileProblem("unreadable", f"read error ({exc.strerror or exc})")
            return
        if buf or skipping:  # a last line without a final newline is a complete record
            yield self._line(number + 1, offset, buf, skipping)

    @staticmethod
    def _line(number: int, offset: int, buf: bytearray, skipping: int, partial: bool = False) -> Line:
        if skipping:
            return Line(number, offset, None, skipping, partial)
        data = bytes(buf)
        if data.endswith(b"\r"):
            data = data[:-1]
        return Line(number, offset, data, len(buf), partial)
