"""``type: warc``: WARC/WET files in stage 1 (sources/warc.py, sources/warc_http.py), on WARC files built
here byte by byte (sources/warc_writer.py) from real text: stdlib docstrings as page bodies, CPython's
CJK codec test texts (real GBK / Shift_JIS / EUC-KR prose) for the charsets.

Record kinds, statuses, content types, content and transfer encodings, charsets (header, meta tag,
detection), WET, cut and lying files, empty and misnamed files, over-long and binary bodies; then
stage 1 itself: exact quota, byte-identical reruns, the demo's WARC copy end to end, local vs Ray."""

from __future__ import annotations

import gzip
import json
import os
import re
import sysconfig
import zlib
from pathlib import Path

import brotli
import pytest
import yaml
from realtext import stdlib_docstrings

import mix_sampler
from minideepseek.records import RawDoc
from minideepseek.sources import SourceConfig, make_source
from minideepseek.sources.warc import WarcSource
from minideepseek.sources.warc_http import dechunk, decode_content, to_text
from minideepseek.sources.warc_writer import (
    Page,
    chunked,
    conversion,
    gzip_member,
    http_response,
    record_id,
    triplet,
    warc_record,
    warcinfo,
)
from tests.test_pipeline_e2e import _data_files

CJK = Path(sysconfig.get_paths()["stdlib"]) / "test" / "cjkencodings"
DOCS = [d for _, d in stdlib_docstrings(80, 300, 2000, unique=True)]


def _cjk(codec: str) -> str:
    """CPython's sample text for ``codec``. The EUC-KR sample's last line spells syllables with KS X 1001
    8-byte composition sequences, which Python's euc_kr codec composes but browsers (windows-949, what a
    page labelled EUC-KR is decoded as) show as separate jamo: that line is left out."""
    text = (CJK / f"{codec}-utf8.txt").read_text(encoding="utf-8")
    return text.split("☆")[0] if codec == "euc_kr" else text


def _html(i: int, head: str = "") -> str:
    paras = "".join(f"<p>{line}</p>" for line in DOCS[i % len(DOCS)].split("\n\n"))
    return (f"<html><head>{head}<title>Page {i}</title></head><body><nav>Home | Index</nav>"
            f"<main><h1>Page {i}</h1>{paras}</main><footer>Copyright</footer></body></html>")


def _page(i: int, body: bytes | None = None, status: str = "200 OK", ctype: str = "text/html; charset=utf-8",
          headers: tuple[tuple[str, str], ...] = ()) -> Page:
    body = _html(i).encode("utf-8") if body is None else body
    hdrs = [("Content-Type", ctype)] if ctype else []
    if not any(k.lower() == "transfer-encoding" for k, _ in headers):
        hdrs.append(("Content-Length", str(len(body))))
    return Page(f"https://example.org/page/{i}", http_response(body, status, [*hdrs, *headers]))


def _write(path: Path, records: list[bytes], gz: bool = True) -> Path:
    path.write_bytes(b"".join(gzip_member(r) for r in records) if gz else b"".join(records))
    return path


def _pages(n: int, start: int = 0) -> list[bytes]:
    return [r for i in range(start, start + n) for r in triplet(_page(i))]


def _source(path: Path, fmt: str = "auto", max_chars: int = 2_000_000) -> WarcSource:
    return WarcSource(SourceConfig(name="cc", type="warc", weight=1.0, path=str(path), format=fmt), 0, max_chars)


def _load(path: Path, **kw) -> tuple[list[RawDoc], WarcSource]:
    src = _source(path, **kw)
    docs = list(src.load())
    return docs, src


def _report(src: WarcSource, name: str) -> dict:
    return next(r.to_dict() for r in src.file_reports if r.file == name)


# ---- record kinds, statuses, content types -----------------------------------------------------------


def test_only_200_html_responses_become_documents_everything_else_counted(tmp_path):
    url = "https://example.org/page/"
    recs = [warcinfo("x.warc.gz"), *triplet(_page(0)),
            *triplet(_page(1, ctype="application/xhtml+xml")),  # XHTML counts as HTML
            *triplet(_page(2, status="404 Not Found")), *triplet(_page(3, status="301 Moved Permanently", body=b"")),
            *triplet(_page(4, status="500 Internal Server Error")),
            *triplet(_page(5, body=DOCS[5].encode(), ctype="text/plain")),
            *triplet(_page(6, body=b"\x89PNG\r\n\x1a\n" + bytes(300), ctype="image/png")),
            *triplet(_page(7, ctype="")),  # no Content-Type at all: not known to be HTML
            warc_record("revisit", b"HTTP/1.1 304 Not Modified\r\n\r\n",
                        [("WARC-Target-URI", url + "0"), ("WARC-Record-ID", record_id("r", "revisit")),
                         ("Content-Type", "application/http; msgtype=response")]),
            warc_record("resource", b"%PDF-1.4 ...", [("WARC-Target-URI", url + "x.pdf"),
                                                      ("Content-Type", "application/pdf")]),
            warc_record("response", _page(8).http, [("WARC-Target-URI", url + "8"), ("WARC-Truncated", "length"),
                                                    ("Content-Type", "application/http; msgtype=response")])]
    docs, src = _load(_write(tmp_path / "x.warc.gz", recs))
    assert [d.url for d in docs] == [url + "0", url + "1"]
    assert all(d.fmt == "html" and "<p>" in d.text for d in docs)
    assert docs[0].source_id == record_id("https://example.org/page/0", "response").strip("<>") and docs[0].own_id
    rep = _report(src, "x.warc.gz")
    assert rep["status"] == "ok" and rep["records"] == 2 and rep["rejects"] == {}
    assert rep["skipped"] == {"warcinfo": 1, "request": 8, "metadata": 8, "status_4xx": 1, "status_3xx": 1,
                              "status_5xx": 1, "non_html": 3, "revisit": 1, "resource": 1, "truncated_by_crawler": 1}
    assert rep["lines"] == len(recs) == rep["records"] + sum(rep["skipped"].values())


def test_offsets_are_the_records_byte_offsets(tmp_path):
    recs = [warcinfo("p.warc"), *_pages(3)]
    path = _write(tmp_path / "p.warc", recs, gz=False)
    docs, _ = _load(path)
    data = path.read_bytes()
    for d in docs:
        assert data[d.offset:].startswith(b"WARC/1.1\r\nWARC-Type: response")
        assert d.file == "p.warc"


# ---- encodings --------------------------------------------------------------------------------------


def test_content_and_transfer_encodings_are_decoded(tmp_path):
    raw = _html(1).encode()
    variants = {
        "gzip": (gzip.compress(raw), [("Content-Encoding", "gzip")]),
        "x-gzip": (gzip.compress(raw), [("Content-Encoding", "x-gzip")]),
        "deflate": (zlib.compress(raw), [("Content-Encoding", "deflate")]),
        "raw-deflate": (_raw_deflate(raw), [("Content-Encoding", "deflate")]),  # what some servers send
        "br": (brotli.compress(raw), [("Content-Encoding", "br")]),
        "chunked": (chunked(raw, 100), [("Transfer-Encoding", "chunked")]),
        "chunked+gzip": (chunked(gzip.compress(raw), 64), [("Content-Encoding", "gzip"),
                                                           ("Transfer-Encoding", "chunked")]),
        # a crawler that stored the decoded payload but kept the headers: read as it is
        "stored-decoded": (raw, [("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked")]),
    }
    recs = [r for i, (body, hdrs) in enumerate(variants.values()) for r in triplet(
        Page(f"https://example.org/{i}", http_response(body, "200 OK", [("Content-Type", "text/html"), *hdrs])))]
    docs, src = _load(_write(tmp_path / "enc.warc.gz", recs))
    assert len(docs) == len(variants) and all(d.text == raw.decode() for d in docs)
    assert src.rejects == () or not list(src.rejects)


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-15)
    return c.compress(data) + c.flush()


def test_corrupt_bodies_are_counted_rejects(tmp_path):
    raw = _html(2).encode()
    bad = {
        "bad_content_encoding": (gzip.compress(raw)[:40] + b"garbage" * 10, [("Content-Encoding", "gzip")]),
        "bad_chunked": (b"Hello " + raw, [("Transfer-Encoding", "chunked")]),
        "binary": (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, []),  # an image declared text/html
    }
    recs = [r for i, (body, hdrs) in enumerate(bad.values()) for r in triplet(
        Page(f"https://example.org/{i}", http_response(body, "200 OK", [("Content-Type", "text/html"), *hdrs])))]
    recs += triplet(Page("https://example.org/nul", http_response(b"<html>" + b"\x00\x01" * 500, "200 OK",
                                                                   [("Content-Type", "text/html")])))
    recs += triplet(Page("https://example.org/ok", http_response(raw, "200 OK", [("Content-Type", "text/html")])))
    docs, src = _load(_write(tmp_path / "bad.warc.gz", recs))
    assert [d.url for d in docs] == ["https://example.org/ok"]
    reasons = [r.reason for r in src.rejects]
    assert reasons == ["bad_content_encoding", "bad_chunked", "binary", "binary"]
    assert all(r.file == "bad.warc.gz" and r.offset is not None and r.url for r in src.rejects)
    assert "PNG" in src.rejects[2].detail and "NUL" in src.rejects[3].detail


def test_decoding_is_bounded():
    bomb = gzip.compress(b"<p>" + b" " * 5_000_000)
    with pytest.raises(ValueError, match="over"):
        decode_content(bomb, "gzip", 1_000_000)
    assert dechunk(b"5\r\nhello\r\n3", 100) == b"hello"  # cut inside the framing: what arrived is kept


# ---- charsets --------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["gbk", "gb2312", "shift_jis", "euc_kr", "big5"])
@pytest.mark.parametrize("declared", ["http", "meta", "none", "wrong_utf8"])
def test_legacy_charsets_come_out_as_the_right_text(codec, declared):
    text = _cjk(codec)
    head = f'<meta http-equiv="Content-Type" content="text/html; charset={codec}">' if declared == "meta" else ""
    body = f"<html><head>{head}</head><body><pre>{text}</pre></body></html>".encode(codec)
    header = {"http": codec, "wrong_utf8": "utf-8"}.get(declared, "")
    out, used, how = to_text(body, header)
    assert text in out, (codec, declared, used, how)
    assert how == {"http": "http", "meta": "meta"}.get(declared, "detected")


@pytest.mark.parametrize("declared", ["iso-8859-1", "", "meta"])
def test_latin1_pages(declared):
    text = "Les hommes naissent et demeurent libres et égaux en droits. Déclaration de 1789, article premier."
    head = '<meta charset="ISO-8859-1">' if declared == "meta" else ""
    body = f"<html><head>{head}</head><body><p>{text} {DOCS[0]}</p></body></html>".encode("latin-1", "replace")
    out, used, _ = to_text(body, declared if declared != "meta" else "")
    assert text in out and used == "cp1252"


def test_bom_wins_and_unknown_labels_fall_through():
    page = '<html><head><meta charset="utf-16"></head><body>café</body></html>'
    assert to_text(page.encode())[:2] == (page, "utf-8")  # a meta tag read as ASCII: UTF-16 means UTF-8
    body = "\ufeff<p>naïve café</p>".encode("utf-16-le")
    assert to_text(body, "iso-8859-1")[0] == "<p>naïve café</p>"
    assert to_text("<p>naïve café</p>".encode(), "no-such-charset")[:2] == ("<p>naïve café</p>", "utf-8")


def test_charset_pages_in_a_warc(tmp_path):
    texts = {c: _cjk(c) for c in ("gbk", "shift_jis", "euc_kr")}
    recs = []
    for c, t in texts.items():
        body = f'<html><head><meta charset="{c}"></head><body><p>{t}</p></body></html>'.encode(c)
        recs += triplet(Page(f"https://example.org/{c}", http_response(body, "200 OK", [("Content-Type", "text/html")])))
    docs, _ = _load(_write(tmp_path / "cjk.warc.gz", recs))
    assert [t in d.text for d, t in zip(docs, texts.values(), strict=True)] == [True] * 3


# ---- WET ---------------------------------------------------------------------------------------------


def test_wet_conversion_records_are_text_documents_and_format_selects(tmp_path):
    wet = [warcinfo("x.wet.gz"), conversion("https://example.org/a", DOCS[10]),
           conversion("https://example.org/b", DOCS[11])]
    (tmp_path / "d").mkdir()
    _write(tmp_path / "d" / "x.warc.wet.gz", wet)
    _write(tmp_path / "d" / "y.warc.gz", _pages(2))
    docs, src = _load(tmp_path / "d")
    assert sorted((d.fmt, d.url) for d in docs) == [("html", "https://example.org/page/0"),
                                                   ("html", "https://example.org/page/1"),
                                                   ("text", "https://example.org/a"), ("text", "https://example.org/b")]
    assert next(d for d in docs if d.url.endswith("/a")).text == DOCS[10]
    wet_only, src = _load(tmp_path / "d", fmt="wet")
    assert [d.fmt for d in wet_only] == ["text", "text"] and _report(src, "y.warc.gz")["skipped"]["response"] == 2
    warc_only, src = _load(tmp_path / "d", fmt="warc")
    assert [d.fmt for d in warc_only] == ["html", "html"]
    assert _report(src, "x.warc.wet.gz")["skipped"]["conversion"] == 2


# ---- damaged files -------------------------------------------------------------------------------------


def test_a_cut_gzip_member_keeps_every_complete_record_before_it(tmp_path):
    members = [gzip_member(r) for r in [warcinfo("c"), *_pages(4)]]
    whole = b"".join(members)
    resp3 = sum(len(m) for m in members[:1 + 3 * 3 + 1])  # up to the 4th page's response member
    for cut, kept, cut_reject in ((len(whole) - 10, 4, False), (resp3 + len(members[11]) // 2, 3, True)):
        path = tmp_path / f"cut{cut}.warc.gz"
        path.write_bytes(whole[:cut])
        docs, src = _load(path)
        rep = _report(src, path.name)
        assert [d.url for d in docs] == [f"https://example.org/page/{i}" for i in range(kept)]
        assert rep["status"] == "truncated" and "cut short" in rep["problem"]
        assert [r.reason for r in src.rejects] == (["truncated_record"] if cut_reject else [])


@pytest.mark.parametrize("where", ["header", "block"])
def test_a_plain_warc_cut_inside_a_record(tmp_path, where):
    data = b"".join([warcinfo("c"), *_pages(3)])
    path = tmp_path / "cut.warc"
    last = data.rfind(b"WARC-Type: response")
    cut = last + 200 if where == "header" else data.index(b"HTTP/1.1 200", last) + 100
    path.write_bytes(data[:cut])
    docs, src = _load(path)
    assert len(docs) == 2 and [r.reason for r in src.rejects] == (["truncated_record"] if where == "block" else [])
    rep = _report(src, "cut.warc")
    assert rep["status"] == "truncated" and "cut short" in rep["problem"]


@pytest.mark.parametrize("delta", [+400, -25, +10_000_000])
@pytest.mark.parametrize("gz", [True, False])
def test_a_lying_content_length_is_reported_and_reading_goes_on(tmp_path, delta, gz):
    liar = triplet(_page(1))[1]
    liar = re.sub(rb"Content-Length: (\d+)\r\n\r\nHTTP",
                  lambda m: b"Content-Length: %d\r\n\r\nHTTP" % (int(m.group(1)) + delta), liar, count=1)
    recs = [warcinfo("l"), *triplet(_page(0)), triplet(_page(1))[0], liar, triplet(_page(1))[2], *_pages(2, start=2)]
    path = _write(tmp_path / ("l.warc.gz" if gz else "l.warc"), recs, gz)
    docs, src = _load(path)
    assert [d.url.rsplit("/", 1)[1] for d in docs] == ["0", "2", "3"]
    assert [r.reason for r in src.rejects] == ["bad_length"]
    assert src.rejects[0].url == "https://example.org/page/1" and "Content-Length" in src.rejects[0].detail
    rep = _report(src, path.name)
    assert rep["status"] == "ok" and any("resumed" in n for n in rep["notes"])


def test_empty_misnamed_and_garbage_files(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "zero.warc.gz").write_bytes(b"")
    _write(d / "plain.warc.gz", [warcinfo("p"), *_pages(1)], gz=False)  # a plain WARC named .gz
    _write(d / "zipped.warc", [warcinfo("z"), *_pages(1, start=1)], gz=True)  # gzip without the name
    (d / "notes.warc").write_text(DOCS[3])  # text, no WARC header
    (d / "junk.warc.gz").write_bytes(gzip.compress(b"\x00" * 100 + bytes(range(256))))
    (d / "readme.txt").write_text("not a WARC name: not read by format auto")
    docs, src = _load(d)
    assert sorted(doc.url for doc in docs) == ["https://example.org/page/0", "https://example.org/page/1"]
    reps = {r.file: r.to_dict() for r in src.file_reports}
    assert set(reps) == {"zero.warc.gz", "plain.warc.gz", "zipped.warc", "notes.warc", "junk.warc.gz"}
    assert reps["zero.warc.gz"]["status"] == "empty" and "0 bytes" in reps["zero.warc.gz"]["problem"]
    assert reps["plain.warc.gz"]["status"] == "ok" and "content is none" in reps["plain.warc.gz"]["notes"][0]
    assert reps["zipped.warc"]["status"] == "ok" and "content is gzip" in reps["zipped.warc"]["notes"][0]
    for bad in ("notes.warc", "junk.warc.gz"):
        assert reps[bad]["status"] == "corrupt" and "not a WARC file" in reps[bad]["problem"], reps[bad]


def test_a_50_mb_body_is_rejected_without_being_held(tmp_path):
    big = b"<html><body>" + (b"<p>" + DOCS[0].encode() + b"</p>\n") * (50_000_000 // (len(DOCS[0]) + 8)) + b"</body></html>"
    recs = [*triplet(_page(0)), *triplet(Page("https://example.org/big", http_response(
        big, "200 OK", [("Content-Type", "text/html"), ("Content-Length", str(len(big)))]))), *triplet(_page(2))]
    docs, src = _load(_write(tmp_path / "big.warc", recs, gz=False))
    assert [d.url.rsplit("/", 1)[1] for d in docs] == ["0", "2"]
    (rej,) = src.rejects
    assert rej.reason == "too_long" and rej.url == "https://example.org/big" and "not read" in rej.detail


def test_a_config_with_a_wrong_format_or_missing_path_stops_early(tmp_path):
    from minideepseek.config import ConfigError

    with pytest.raises(ConfigError, match="format"):
        SourceConfig(name="cc", type="warc", weight=1.0, path="x", format="jsonl")
    with pytest.raises(ConfigError, match="does not exist"):
        make_source(SourceConfig(name="cc", type="warc", weight=1.0, path=str(tmp_path / "nope")), 0, tmp_path, ())
    with pytest.raises(ConfigError, match="text_field"):
        SourceConfig.check_keys({"name": "cc", "type": "warc", "text_field": "x"}, "sources[0]")


# ---- stage 1 -------------------------------------------------------------------------------------------


def _stage_config(tmp: Path, warc_dir: Path, name: str, **sampler) -> Path:
    cfg = {"run": {"name": "w", "seed": 11, "data_dir": str(tmp / name / "data"), "reports_dir": str(tmp / name / "rep")},
           "sources": [{"name": "cc", "type": "warc", "path": str(warc_dir), "weight": 1.0, "lang": "en"}],
           "sampler": {"num_proc": 2, "min_chars": 20, **sampler}}
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


@pytest.fixture(scope="module")
def small_warcs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("warcs")
    _write(d / "a.warc.gz", [warcinfo("a"), *_pages(20)])
    _write(d / "b.warc", [warcinfo("b"), *_pages(20, start=20)], gz=False)
    (d / "c.warc.gz").write_bytes(b"".join(gzip_member(r) for r in _pages(10, start=40))[:-300])  # cut short
    return d


def test_reading_stops_when_the_sampler_has_enough(small_warcs):
    src = _source(small_warcs)
    it = src.iter_raw(1)
    first = [next(it) for _ in range(5)]
    assert len(src.file_reports) == 1 and all(d.file == src.file_reports[0].file for d in first)  # one file read
    rest = list(it)
    assert len(src.file_reports) == 3 and sum(r.text is not None for r in first + rest) == 49
    assert [r.error.split(":")[0] for r in first + rest if r.error] == ["truncated_record"]  # its reject, once
    docs = [d.source_id for d in first + rest if d.error is None]
    assert [d.source_id for d in src.iter_raw(1)] == docs  # seeded: the same order again (no rejects twice)
    assert sum(r.error is not None for r in src.iter_raw(2)) == 0  # a file's rejects are counted on its first read
    src.close()


@pytest.mark.stage
def test_stage1_exact_quota_and_byte_identical_rerun(tmp_path, small_warcs):
    a, b = (_stage_config(tmp_path, small_warcs, n, target_docs=17, batch_size=8) for n in "ab")
    assert mix_sampler.main(["--config", str(a)]) == 0
    assert mix_sampler.main(["--config", str(b)]) == 0
    fa, fb = _data_files(tmp_path / "a" / "data" / "w"), _data_files(tmp_path / "b" / "data" / "w")
    assert fa == fb and any(k.startswith("mixed_raw/data-") for k in fa)
    mix = json.loads((tmp_path / "a" / "rep" / "w" / "source_mix.json").read_text())
    (src,) = mix["sources"]
    assert src["docs"] == 17 and src["type"] == "warc"
    ing = mix["ingestion"]["sources"]["cc"]
    assert ing["files_listed"] == 3 and ing["files_read"] < 3  # reading stopped when the quota was full
    # a quota that needs every file: every record and every problem is counted
    c = _stage_config(tmp_path, small_warcs, "c", target_docs=45, batch_size=8)
    assert mix_sampler.main(["--config", str(c)]) == 0
    mix = json.loads((tmp_path / "c" / "rep" / "w" / "source_mix.json").read_text())
    assert mix["sources"][0]["docs"] == 45
    ing = mix["ingestion"]["sources"]["cc"]
    assert ing["files_read"] == 3 and ing["records"] == 49 and ing["file_problems"] == 1
    assert ing["skipped"]["request"] == 50
    man = json.loads((tmp_path / "c" / "data" / "w" / "mixed_raw" / "manifest.json").read_text())
    (problem,) = man["counters"]["file_problems"]
    assert problem["file"] == "c.warc.gz" and problem["status"] == "truncated"
    rejects = [json.loads(x) for x in (tmp_path / "c" / "data" / "w" / "mixed_raw" / "rejects.jsonl").open()]
    assert [(r["reason"], r["file"]) for r in rejects if r["kind"] == "invalid"] == [("truncated_record", "c.warc.gz")]
    md = (tmp_path / "c" / "rep" / "w" / "source_mix.md").read_text()
    assert "WARC records that are not documents" in md and "request 50" in md


@pytest.mark.slow
def test_demo_warc_copy_through_stage1(tmp_path):
    """The demo's Common Crawl-format copy (built from the demo corpus) through configs/demo_warc.yaml."""
    from minideepseek.demo_corpus import __main__ as demo_cli

    out = tmp_path / "demo_warc"
    assert demo_cli.main(["warc", "--out", str(out), "-q"]) == 0
    first = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*.gz"))}
    assert demo_cli.main(["warc", "--out", str(out), "-q"]) == 0  # deterministic bytes
    assert first == {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*.gz"))}
    sets = [f"sources.cc_en.path={out / 'en'}", f"sources.cc_zh.path={out / 'zh'}", f"run.data_dir={tmp_path / 'data'}",
            f"run.reports_dir={tmp_path / 'rep'}"]
    assert mix_sampler.main(["--config", "configs/demo_warc.yaml", *[x for s in sets for x in ("--set", s)]]) == 0
    mix = json.loads((tmp_path / "rep" / "demo_warc" / "source_mix.json").read_text())
    assert mix["recipe"]["met"] and all(s["docs"] > 10 for s in mix["sources"])
    ing = mix["ingestion"]["sources"]
    assert ing["cc_en"]["skipped"]["status_3xx"] > 0 and ing["cc_en"]["skipped"]["revisit"] > 0
    assert ing["cc_zh"]["rejects"] == 0 and ing["cc_en"]["rejects"] == 0
    import datasets

    ds = datasets.load_from_disk(str(tmp_path / "data" / "demo_warc" / "mixed_raw"))
    zh = [t for t, s in zip(ds["text"], ds["source"], strict=True) if s == "cc_zh"]
    assert zh and all("\ufffd" not in t for t in zh) and sum("的" in t for t in zh) > len(zh) // 2  # GBK decoded
    en = [t for t, s in zip(ds["text"], ds["source"], strict=True) if s == "cc_en"]
    assert any("\\(" in t or "\\[" in t or "\\frac" in t for t in en)  # MathJax kept by extraction


@pytest.mark.slow
def test_ray_stage1_equals_local(tmp_path, small_warcs):
    pytest.importorskip("ray")
    from minideepseek.executor import ray_init, ray_shutdown

    a, b = _stage_config(tmp_path, small_warcs, "a", target_docs=30), _stage_config(tmp_path, small_warcs, "b",
                                                                                      target_docs=30)
    assert mix_sampler.main(["--config", str(a)]) == 0
    ray_init(num_cpus=2)
    try:
        assert mix_sampler.main(["--config", str(b), "--executor", "ray"]) == 0
    finally:
        ray_shutdown()
    assert _data_files(tmp_path / "a" / "data" / "w") == _data_files(tmp_path / "b" / "data" / "w")


def test_damaged_bytes_anywhere_never_stop_reading(tmp_path):
    """Seeded mutations of a small WARC (bytes flipped, cut, duplicated, zeroed) in plain and gzip form: every
    one loads, and every record is a document, a reject or a skip (or the file reports its problem)."""
    import random

    rng = random.Random(30)
    recs = [warcinfo("f"), *_pages(4)]
    forms = (b"".join(recs), b"".join(gzip_member(r) for r in recs))  # plain, and one gzip member per record
    for n in range(int(os.environ.get("WARC_FUZZ", 160))):
        gz = n % 2 == 1
        data = bytearray(forms[gz])
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            op = rng.choice(("flip", "cut", "dup", "zero"))
            if op == "flip":
                data[i] = rng.randrange(256)
            elif op == "cut":
                del data[i:i + rng.randint(1, 400)]
            elif op == "dup":
                data[i:i] = data[i:i + rng.randint(1, 400)]
            else:
                data[i:i + 50] = bytes(len(data[i:i + 50]))
        path = tmp_path / f"m{n}.warc{'.gz' if gz else ''}"
        path.write_bytes(bytes(data))
        docs, src = _load(path)
        (rep,) = src.file_reports
        assert rep.lines == rep.records + sum(rep.rejects.values()) + sum(rep.skipped.values())
        assert rep.records == len(docs) <= 4


def test_http_heads_as_servers_send_them(tmp_path):
    from minideepseek.sources.warc_http import mime_and_charset, split_http

    status, headers, body = split_http(b"HTTP/2 200\nContent-Type: Text/HTML; Charset=\"Shift_JIS\"\n\n<p>x</p>")
    assert status == 200 and body == b"<p>x</p>"  # HTTP/2 status line, bare LF line ends
    assert mime_and_charset(headers["content-type"]) == ("text/html", "Shift_JIS")
    assert split_http(b"HTTP/1.1 200 OK\r\nContent-Type: text/html")[0] is None  # no end of the headers
    # format set: every file the glob finds is read, whatever its name
    d = tmp_path / "d"
    d.mkdir()
    _write(d / "segment-00001.dat", [warcinfo("s"), *_pages(2)])
    docs, src = _load(d, fmt="warc")
    assert len(docs) == 2 and src.file_reports[0].compression == "gzip"
    with pytest.raises(Exception, match="no readable files"):
        _load(d)  # format auto: only WARC/WET names
