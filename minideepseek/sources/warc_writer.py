"""Writing WARC 1.1 files byte by byte: the demo corpus's Common Crawl-format copy, the tests and the
WARC bench build their inputs with it, so the reader is exercised on exactly the bytes a crawler writes
(request/response/metadata triplets, one gzip member per record as Common Crawl does) and on the
damage a test plants (a cut member, a Content-Length that lies).

Deterministic: record ids are UUIDs derived from the url and the record kind, dates are given, gzip
members carry no file name and mtime 0, so the same pages give byte-identical files.
"""

from __future__ import annotations

import gzip
import hashlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass


def record_id(*parts: str) -> str:
    """A stable ``<urn:uuid:...>`` for a record: a UUID from the SHA-1 of its parts (url, kind)."""
    return f"<urn:uuid:{uuid.UUID(bytes=hashlib.sha1(chr(0).join(parts).encode('utf-8')).digest()[:16], version=5)}>"


def warc_record(kind: str, block: bytes, headers: Iterable[tuple[str, str]] = (), *,
                content_length: int | None = None) -> bytes:
    """One uncompressed WARC record: version line, headers, blank line, block, two CRLFs.
    ``content_length`` overrides the true length (a test's lying header)."""
    n = len(block) if content_length is None else content_length
    head = [("WARC-Type", kind), *headers, ("Content-Length", str(n))]
    text = "WARC/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head) + "\r\n"
    return text.encode("utf-8") + block + b"\r\n\r\n"


def gzip_member(data: bytes) -> bytes:
    """One gzip member with no name and mtime 0 (deterministic), as Common Crawl writes per record."""
    return gzip.compress(data, compresslevel=6, mtime=0)


def http_response(body: bytes, status: str = "200 OK", headers: Iterable[tuple[str, str]] = ()) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def http_request(url: str, user_agent: str = "minideepseek-demo/1.0 (offline copy)") -> bytes:
    rest = url.split("://", 1)[-1]
    host, _, path = rest.partition("/")
    return (f"GET /{path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {user_agent}\r\nAccept: text/html,"
            "application/xhtml+xml;q=0.9,*/*;q=0.8\r\nAccept-Encoding: gzip, br\r\nConnection: close\r\n\r\n"
            ).encode("latin-1")


def chunked(body: bytes, size: int = 4096) -> bytes:
    """``Transfer-Encoding: chunked`` framing of ``body``."""
    out = bytearray()
    for i in range(0, len(body), size):
        piece = body[i:i + size]
        out += f"{len(piece):x}\r\n".encode("ascii") + piece + b"\r\n"
    return bytes(out + b"0\r\n\r\n")


@dataclass(frozen=True)
class Page:
    """One fetched page: what the crawler asked for and what the server sent back (HTTP message)."""

    url: str
    http: bytes  # the full HTTP response: status line, headers, body (as sent: encoded, chunked)
    date: str = "2024-01-01T00:00:00Z"
    ip: str = "192.0.2.1"  # TEST-NET-1 (RFC 5737): a documentation address, never a real host


def triplet(page: Page, payload_type: str = "text/html") -> tuple[bytes, bytes, bytes]:
    """request, response and metadata records of one fetch, uncompressed, in Common Crawl's order."""
    req_id, resp_id = record_id(page.url, "request"), record_id(page.url, "response")
    common = [("WARC-Date", page.date), ("WARC-Target-URI", page.url), ("WARC-IP-Address", page.ip)]
    req = warc_record("request", http_request(page.url), [("WARC-Record-ID", req_id), *common,
                                                           ("Content-Type", "application/http; msgtype=request")])
    digest = "sha1:" + hashlib.sha1(page.http).hexdigest()
    resp = warc_record("response", page.http, [("WARC-Record-ID", resp_id), *common, ("WARC-Concurrent-To", req_id),
                                               ("WARC-Block-Digest", digest),
                                               ("WARC-Identified-Payload-Type", payload_type),
                                               ("Content-Type", "application/http; msgtype=response")])
    meta = warc_record("metadata", b"fetchTimeMs: 120\r\ncharset-detected: see response\r\n",
                       [("WARC-Record-ID", record_id(page.url, "metadata")), ("WARC-Date", page.date),
                        ("WARC-Target-URI", page.url), ("WARC-Concurrent-To", resp_id),
                        ("Content-Type", "application/warc-fields")])
    return req, resp, meta


def warcinfo(filename: str, date: str = "2024-01-01T00:00:00Z") -> bytes:
    fields = (b"software: minideepseek warc_writer\r\nformat: WARC File Format 1.1\r\n"
              b"description: offline Common Crawl-format copy\r\nisPartOf: minideepseek-demo\r\n")
    return warc_record("warcinfo", fields, [("WARC-Date", date), ("WARC-Filename", filename),
                                            ("WARC-Record-ID", record_id(filename, "warcinfo")),
                                            ("Content-Type", "application/warc-fields")])


def conversion(url: str, text: str, date: str = "2024-01-01T00:00:00Z") -> bytes:
    """A WET ``conversion`` record: the plain text Common Crawl extracted from a page."""
    return warc_record("conversion", text.encode("utf-8"),
                       [("WARC-Target-URI", url), ("WARC-Date", date), ("WARC-Record-ID", record_id(url, "conversion")),
                        ("WARC-Refers-To", record_id(url, "response")), ("Content-Type", "text/plain")])
