"""The HTTP message inside a WARC ``response`` record, to text: status, headers, transfer and content
decoding, charset. Pure functions over bytes, so tests can feed them anything.

Charset order (what browsers do, WHATWG "encoding sniffing", minus the byte-order mark that wins over
all): the HTTP ``Content-Type`` charset, then a ``<meta charset>`` / ``<meta http-equiv>`` in the first
4 KiB, then detection (resiliparse's uchardet; charset-normalizer when uchardet's guess does not
decode). A label is mapped as browsers map it (``iso-8859-1`` and ``ascii`` mean windows-1252,
``gb2312`` means GBK, ``shift_jis`` means windows-31j) and the superset codec is used (GBK -> GB18030,
EUC-KR -> cp949), because servers declare the old name and send the superset. A declared charset whose
decoding fails strictly (a UTF-8 page served as ``charset=iso-8859-1`` decodes, a GBK page served as
``utf-8`` does not) falls through to the next candidate; when none decodes, the best guess decodes
with U+FFFD replacements and the binary check downstream judges the result.
"""

from __future__ import annotations

import codecs
import re
import zlib

HTML_TYPES = ("text/html", "application/xhtml+xml")
_META = re.compile(rb"""<meta\s[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]{1,40})""", re.I)
_SUPERSET = {"gbk": "gb18030", "gb2312": "gb18030", "shift_jis": "cp932", "euc_kr": "cp949", "big5": "big5hkscs",
             "iso8859-1": "cp1252", "latin-1": "cp1252", "ascii": "cp1252"}
_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
# File signatures of bodies that are no HTML whatever their Content-Type says.
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"),
          (b"%PDF-", "a PDF document"), (b"PK\x03\x04", "a ZIP archive"), (b"\x1f\x8b", "gzip data"),
          (b"RIFF", "a RIFF (WebP/AVI/WAV) file"), (b"\x00\x00\x00", "binary data (NUL bytes)"),
          (b"\x7fELF", "an ELF executable"), (b"wOF", "a web font"))


class BodyError(ValueError):
    """The body cannot be decoded (bad chunked framing, corrupt gzip/deflate/brotli, over the size limit)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def split_http(block: bytes) -> tuple[int | None, dict[str, str], bytes]:
    """(status, headers with lowercased names, body) of an HTTP response message. Headers ending in bare
    LF are accepted (servers send them); a message without a header end has no body: (None, {}, b"")."""
    end = block.find(b"\r\n\r\n")
    sep = 4
    lf = block.find(b"\n\n")
    if lf >= 0 and (end < 0 or lf < end):
        end, sep = lf, 2
    if end < 0:
        return None, {}, b""
    lines = block[:end].decode("latin-1").splitlines()
    status = None
    parts = lines[0].split(None, 2) if lines else []
    if len(parts) >= 2 and parts[0].upper().startswith("HTTP/") and parts[1].isdigit():
        status = int(parts[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if colon:
            key = name.strip().lower()
            # a repeated header: keep the first Content-Type (the server's own), join codings in order
            if key in headers and key in ("content-encoding", "transfer-encoding"):
                headers[key] += ", " + value.strip()
            else:
                headers.setdefault(key, value.strip())
    return status, headers, block[end + sep:]


def mime_and_charset(content_type: str) -> tuple[str, str]:
    """``text/html; charset="GBK"`` -> ("text/html", "GBK")."""
    mime, _, params = content_type.partition(";")
    charset = ""
    for p in params.split(";"):
        k, _, v = p.partition("=")
        if k.strip().lower() == "charset":
            charset = v.strip().strip("\"'")
    return mime.strip().lower(), charset


def dechunk(body: bytes, limit: int) -> bytes:
    """Undo ``Transfer-Encoding: chunked``. A body cut inside a chunk keeps what arrived (crawlers store
    what the server sent before the cut); framing that is not chunked at all is an error."""
    out = bytearray()
    pos = 0
    while pos < len(body):
        nl = body.find(b"\n", pos)
        if nl < 0:
            break
        size_text = body[pos:nl].split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            if not out and pos == 0:
                raise BodyError("bad_chunked", f"Transfer-Encoding: chunked, but the body starts with "
                                f"{body[:20]!r}, not a chunk size") from None
            break
        if size == 0:
            break
        out += body[nl + 1:nl + 1 + size]
        if len(out) > limit:
            raise BodyError("too_long", f"dechunked body over {limit:,} bytes")
        pos = nl + 1 + size
        while pos < len(body) and body[pos:pos + 1] in (b"\r", b"\n"):
            pos += 1
    return bytes(out)


def decode_content(body: bytes, codings: str, limit: int) -> bytes:
    """Undo ``Content-Encoding`` (applied in order, undone in reverse): gzip, deflate (zlib or raw), br,
    identity. Output is bounded by ``limit`` (a decompression bomb stops there)."""
    for coding in reversed([c.strip().lower() for c in codings.split(",") if c.strip()]):
        if coding in ("identity", "none"):
            continue
        if coding in ("gzip", "x-gzip", "deflate"):
            modes = (31,) if coding != "deflate" else (15, -15)  # deflate: zlib-wrapped as specified, or raw
            for i, wbits in enumerate(modes):
                d = zlib.decompressobj(wbits)
                try:
                    out = d.decompress(body, limit + 1)
                except zlib.error as exc:
                    if i + 1 < len(modes):
                        continue
                    raise BodyError("bad_content_encoding", f"Content-Encoding {coding}: {exc}") from None
                break
        elif coding == "br":
            import brotli

            try:
                out = brotli.decompress(body)  # the brotli binding has no output bound: input is already bounded
            except brotli.error as exc:
                raise BodyError("bad_content_encoding", f"Content-Encoding br: {exc}") from None
        else:
            raise BodyError("bad_content_encoding", f"unsupported Content-Encoding {coding!r}")
        if len(out) > limit:
            raise BodyError("too_long", f"body decompresses to over {limit:,} bytes")
        body = out
    return body


def binary_kind(body: bytes) -> str:
    """What a body is when it is plainly not text (an image, an archive, NULs), else ""."""
    head = body[:16].lstrip()
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return what
    sample = body[:4096]
    if sample and sample.count(0) > len(sample) // 100:
        return f"binary data ({sample.count(0):,} NUL bytes in the first {len(sample):,})"
    return ""


def codec_for(label: str) -> str | None:
    """The Python codec a browser would use for an encoding label, or None for an unknown label."""
    from resiliparse.parse.encoding import map_encoding_to_html5

    label = label.strip().lower()
    try:
        python_name: str | None = codecs.lookup(label).name
    except LookupError:
        python_name = None
    name = map_encoding_to_html5(label)  # WHATWG's table; unknown labels come back as utf-8
    if name == "utf-8" and python_name != "utf-8":
        if python_name is None:
            return None  # neither WHATWG nor Python knows it
        name = python_name  # a label WHATWG lacks but Python knows (cp949, uchardet's names)
    return _SUPERSET.get(name, name)


def meta_charset(body: bytes) -> str:
    m = _META.search(body[:4096])
    return m.group(1).decode("ascii") if m else ""


def to_text(body: bytes, header_charset: str = "") -> tuple[str, str, str]:
    """(text, codec, where the codec came from: bom | http | meta | detected | fallback)."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return body[len(bom):].decode(name, "replace"), name, "bom"
    tried: list[str] = []
    for label, how in ((header_charset, "http"), (meta_charset(body), "meta")):
        codec = codec_for(label) if label else None
        if how == "meta" and codec and codec.startswith("utf-16"):
            codec = "utf-8"  # a meta tag readable as ASCII cannot be UTF-16: browsers read it as UTF-8 (WHATWG)
        if codec and codec not in tried:
            tried.append(codec)
            try:
                return body.decode(codec), codec, how
            except UnicodeDecodeError:
                pass
    if not body.isascii():  # pure ASCII decodes the same in every candidate: skip detection
        from resiliparse.parse.encoding import detect_encoding

        guess = codec_for(detect_encoding(body, html5_compatible=False) or "") or "utf-8"
        if guess not in tried:
            tried.append(guess)
            try:
                return body.decode(guess), guess, "detected"
            except (UnicodeDecodeError, LookupError):
                pass
        from charset_normalizer import from_bytes

        best = from_bytes(body[:65536]).best()
        guess2 = codec_for(best.encoding) if best is not None else None
        if guess2 and guess2 not in tried:
            try:
                return body.decode(guess2), guess2, "detected"
            except UnicodeDecodeError:
                pass
    else:
        return body.decode("ascii"), "ascii", "detected"
    return body.decode("utf-8", "replace"), "utf-8", "fallback"
